#!/usr/bin/env bash
# A single-node Apache Kafka broker (KRaft, no ZooKeeper) on 127.0.0.1, for
# running the tests against real Kafka. Nothing is committed but the pom:
# the broker's jars come from Maven Central with Maven and are cached in
# ${TXHUB_KAFKA_CACHE:-~/.cache/txhub}/kafka-<version>, each version apart.
#
# TXHUB_KAFKA_VERSION chooses the version: any Apache Kafka from 3.9 to 4.4
# that Maven Central serves (3.9.1, 4.0.0 ... 4.4.0); the default is the
# pom's, 4.4.0 (CI runs the suites on 4.4.0 and on 3.9.1). Every command
# below works on each (on 4.x the tools are
# org.apache.kafka.tools.* from kafka-tools and the broker logs with log4j 2;
# the pom's profile kafka-4 brings both). A DIR keeps the version it was
# formatted with: a restart, acls and user use DIR/kafka-version.
#
#   deploy/kafka.sh start DIR   format KRaft storage in DIR (created), start
#                               the broker, wait until it answers, print its
#                               bootstrap servers (host:port) on stdout; when
#                               DIR holds a broker stopped earlier, start it
#                               again with its data and ports (a restart)
#   deploy/kafka.sh start DIR --sasl [--user NAME[:PASSWORD]]...
#                               the same with authentication and ACLs: the
#                               client listener is SASL_PLAINTEXT with
#                               SCRAM-SHA-512, the authorizer KRaft's
#                               StandardAuthorizer (no ACL: denied), the super
#                               user `admin` (the broker itself and the tests'
#                               administrator) and each NAME are created at
#                               format time (a random password unless given).
#                               For each user, admin too, DIR/sasl/ holds
#                               NAME.password, NAME.properties (for the Java
#                               tools' --command-config) and NAME.conf
#                               (txhub's kafka.* keys)
#   deploy/kafka.sh start DIR --secure [--expired-cert] [--user NAME[:PASSWORD]]...
#                               the same with TLS: the client listener is
#                               SASL_SSL (SCRAM-SHA-512), its certificate
#                               (SAN localhost and 127.0.0.1) signed by a CA
#                               made with openssl at format time in DIR/tls/
#                               (ca.pem for clients; other-ca.pem, a CA that
#                               signed nothing, for tests of an untrusted
#                               broker). DIR/sasl/NAME.properties and
#                               NAME.conf name ca.pem. --expired-cert adds a
#                               second SASL_SSL listener whose certificate
#                               (same CA) expired in 2020; its host:port is
#                               in DIR/bootstrap-expired
#   deploy/kafka.sh acls DIR ARG...
#                               kafka-acls.sh as admin against the broker in
#                               DIR (e.g. --add --allow-principal User:txhub
#                               --operation Read --topic txhub.control)
#   deploy/kafka.sh user DIR NAME[:PASSWORD]
#                               add a SCRAM-SHA-512 user to the running broker
#                               in DIR (started with --sasl or --secure; a
#                               random password unless given) and write its
#                               DIR/sasl/ files, as --user does at start
#   deploy/kafka.sh stop DIR    stop it (SIGTERM, then SIGKILL after 30 s)
#   deploy/kafka.sh fetch       only fetch the jars (of TXHUB_KAFKA_VERSION)
#
# Installs Java 17 and Maven from Debian's packages when they are missing.
# Topics are created on first use with 4 partitions.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pom=$here/kafka/pom.xml
default_version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$pom")
caches=${TXHUB_KAFKA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/txhub}
version= cache= major=

# Choose version V (3.9.x to 4.4.x): its cache and its major version.
use_version() {
  version=$1
  case $version in
    3.9.[0-9]*|4.[0-4].[0-9]*) ;;
    *) echo "kafka.sh: Kafka $version: this script runs 3.9.x to 4.4.x (TXHUB_KAFKA_VERSION)" >&2
       exit 2 ;;
  esac
  major=${version%%.*}
  cache=$caches/kafka-$version
}

# The version of the broker in DIR (written at format time; a DIR from
# before that holds a 3.9.1, the only one then), else TXHUB_KAFKA_VERSION
# or the default.
use_dir_version() {
  local dir=$1
  if [ -f "$dir/kafka-version" ]; then
    use_version "$(cat "$dir/kafka-version")"
    [ -z "${TXHUB_KAFKA_VERSION:-}" ] || [ "$TXHUB_KAFKA_VERSION" = "$version" ] ||
      echo "kafka.sh: $dir holds a broker of Kafka $version: TXHUB_KAFKA_VERSION=$TXHUB_KAFKA_VERSION does not apply to it" >&2
  elif [ -f "$dir/data/meta.properties" ]; then
    use_version 3.9.1
  else
    use_version "${TXHUB_KAFKA_VERSION:-$default_version}"
  fi
}

need() {
  local missing=()
  command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
  command -v mvn >/dev/null || missing+=(maven)
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "kafka.sh: installing ${missing[*]}" >&2
  local sudo=(); [ "$(id -u)" = 0 ] || sudo=(sudo)
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    "${missing[@]}" >/dev/null
}

fetch() {
  [ -f "$cache/.complete" ] && return 0
  need
  echo "kafka.sh: fetching Apache Kafka $version from Maven Central into $cache" >&2
  rm -rf "$cache.tmp"
  mvn -q -B -f "$pom" dependency:copy-dependencies -DincludeScope=runtime \
    -Dkafka.version="$version" -P "kafka-$major" -DoutputDirectory="$cache.tmp" >&2
  rm -rf "$cache"
  mv "$cache.tmp" "$cache"
  touch "$cache/.complete"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# A password for a test user: 24 random hex digits.
password() {
  od -An -N12 -tx1 /dev/urandom | tr -d ' \n'
}

# DIR/sasl/NAME.{password,properties,conf} for user NAME with password PW on
# a listener of security protocol PROTO (SASL_PLAINTEXT or SASL_SSL: then the
# clients trust DIR/tls/ca.pem).
user_files() {
  local dir=$1 name=$2 pw=$3 proto=$4
  umask 077
  printf '%s\n' "$pw" >"$dir/sasl/$name.password"
  cat >"$dir/sasl/$name.properties" <<PROPS
security.protocol=$proto
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="$name" password="$pw";
PROPS
  cat >"$dir/sasl/$name.conf" <<PROPS
kafka.security.protocol = $proto
kafka.sasl.mechanisms = SCRAM-SHA-512
kafka.sasl.username = $name
kafka.sasl.password = $pw
PROPS
  if [ "$proto" = SASL_SSL ]; then
    printf 'ssl.truststore.type=PEM\nssl.truststore.location=%s\n' "$dir/tls/ca.pem" \
      >>"$dir/sasl/$name.properties"
    printf 'kafka.ssl.ca.location = %s\n' "$dir/tls/ca.pem" >>"$dir/sasl/$name.conf"
  fi
  umask 022
}

# Sign DIR/tls/broker.csr with the CA into DIR/tls/NAME.pem, valid from
# START to END (openssl ca's YYMMDDHHMMSSZ or YYYYMMDDHHMMSSZ: `openssl x509
# -days` cannot make a certificate that has already expired), then
# DIR/tls/NAME-keystore.pem: the key, the certificate and the CA's, as
# Kafka's ssl.keystore.type=PEM reads them.
tls_sign() {
  local tls=$1/tls name=$2 start=$3 end=$4
  openssl ca -batch -config "$tls/ca.cnf" -cert "$tls/ca.pem" -keyfile "$tls/ca.key" \
    -in "$tls/broker.csr" -out "$tls/$name.pem" -startdate "$start" -enddate "$end" -notext \
    >>"$tls/openssl.log" 2>&1 || { cat "$tls/openssl.log" >&2; return 1; }
  cat "$tls/broker.key" "$tls/$name.pem" "$tls/ca.pem" >"$tls/$name-keystore.pem"
}

# --secure: DIR/tls/ with a CA (ca.pem, what clients trust), the broker's
# key and certificate for localhost and 127.0.0.1 (broker-keystore.pem),
# another CA that signed nothing (other-ca.pem) and with --expired-cert a
# certificate for the same names that expired in 2020
# (expired-keystore.pem).
tls_setup() {
  local dir=$1 expired=$2 tls=$1/tls
  mkdir -p "$tls/issued"
  umask 077
  : >"$tls/index.txt"
  echo 1000 >"$tls/serial"
  cat >"$tls/ca.cnf" <<CNF
[ca]
default_ca = txhub_ca
[txhub_ca]
database = $tls/index.txt
serial = $tls/serial
new_certs_dir = $tls/issued
default_md = sha256
policy = any_cn
unique_subject = no
x509_extensions = broker
[any_cn]
commonName = supplied
[broker]
basicConstraints = CA:FALSE
keyUsage = critical, digitalSignature, keyEncipherment
extendedKeyUsage = serverAuth, clientAuth
subjectAltName = DNS:localhost, IP:127.0.0.1
CNF
  local ca
  for ca in ca other-ca; do
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tls/$ca.key" -out "$tls/$ca.pem" \
      -days 3650 -subj "/CN=txhub test $ca $(basename "$dir")" \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
      >>"$tls/openssl.log" 2>&1 || { cat "$tls/openssl.log" >&2; return 1; }
  done
  openssl req -newkey rsa:2048 -nodes -keyout "$tls/broker.key" -out "$tls/broker.csr" \
    -subj "/CN=localhost" >>"$tls/openssl.log" 2>&1 || { cat "$tls/openssl.log" >&2; return 1; }
  tls_sign "$dir" broker "$(date -u -d '-1 day' +%Y%m%d%H%M%SZ)" \
    "$(date -u -d '+10 years' +%Y%m%d%H%M%SZ)" || return
  if [ "$expired" = 1 ]; then
    tls_sign "$dir" expired 20200101000000Z 20200102000000Z || return
  fi
  chmod 644 "$tls/ca.pem" "$tls/other-ca.pem"
  umask 022
}

# --sasl and --secure: the users' files in DIR/sasl; the listeners and
# authorizer for server.properties into the caller's $listeners, the
# format's --add-scram options into its array scram. PROTO is the client
# listener's security protocol (SASL_PLAINTEXT, or SASL_SSL with
# DIR/tls/ made); EPORT, when not empty, the port of the listener with the
# expired certificate. The controller listener authenticates the broker
# with PLAIN (SCRAM's credentials live in the metadata the controller
# serves).
sasl_setup() {
  local dir=$1 port=$2 cport=$3 proto=$4 eport=$5
  shift 5
  mkdir -p "$dir/sasl"
  local admin_pw controller_pw spec name pw
  admin_pw=$(password)
  controller_pw=$(password)
  user_files "$dir" admin "$admin_pw" "$proto"
  scram=(--add-scram "SCRAM-SHA-512=[name=admin,password=$admin_pw]")
  for spec in "$@"; do
    name=${spec%%:*}
    pw=${spec#*:}
    [ "$pw" = "$spec" ] && pw=$(password)
    case $name in
      ''|admin|controller|*[!A-Za-z0-9._-]*)
        echo "kafka.sh: --user $name: a name of letters, digits, . _ - (not admin)" >&2; return 2 ;;
    esac
    user_files "$dir" "$name" "$pw" "$proto"
    scram+=(--add-scram "SCRAM-SHA-512=[name=$name,password=$pw]")
  done
  local lc=${proto,,} extra="" map="CONTROLLER:SASL_PLAINTEXT,$proto:$proto" more=""
  if [ "$proto" = SASL_SSL ]; then
    more="ssl.keystore.type=PEM
ssl.keystore.location=$dir/tls/broker-keystore.pem
ssl.truststore.type=PEM
ssl.truststore.location=$dir/tls/ca.pem"
  fi
  if [ -n "$eport" ]; then
    extra=",EXPIRED://127.0.0.1:$eport"
    map+=",EXPIRED:SASL_SSL"
    more+="
listener.name.expired.ssl.keystore.type=PEM
listener.name.expired.ssl.keystore.location=$dir/tls/expired-keystore.pem
listener.name.expired.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;"
  fi
  listeners=$(cat <<PROPS
listeners=$proto://127.0.0.1:$port$extra,CONTROLLER://127.0.0.1:$cport
advertised.listeners=$proto://127.0.0.1:$port$extra
inter.broker.listener.name=$proto
listener.security.protocol.map=$map
sasl.enabled.mechanisms=SCRAM-SHA-512
sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512
listener.name.$lc.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="admin" password="$admin_pw";
sasl.mechanism.controller.protocol=PLAIN
listener.name.controller.sasl.enabled.mechanisms=PLAIN
listener.name.controller.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="controller" password="$controller_pw" user_controller="$controller_pw";
authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer
super.users=User:admin;User:controller
allow.everyone.if.no.acl.found=false
$more
PROPS
)
}

# The java command line for Kafka's classes in the caller's array java:
# the cache's jars, the logging configuration (written here: log4j 1 on
# 3.9, log4j 2 on 4.x) sending everything to DIR/server.log, and the JVM
# options given.
java_cmd() {
  local dir=$1
  shift
  if [ "$major" = 3 ]; then
    cat >"$dir/log4j.properties" <<'PROPS'
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=${kafka.logs.dir}/server.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka=INFO
log4j.logger.org.apache.kafka=INFO
PROPS
    java=(java "$@" -Dkafka.logs.dir="$dir" -Dlog4j.configuration="file:$dir/log4j.properties"
          -cp "$cache/*")
  else
    cat >"$dir/log4j2.properties" <<'PROPS'
appender.file.type = File
appender.file.name = file
appender.file.fileName = ${sys:kafka.logs.dir}/server.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
PROPS
    java=(java "$@" -Dkafka.logs.dir="$dir" -Dlog4j2.configurationFile="$dir/log4j2.properties"
          -cp "$cache/*")
  fi
}

start() {
  local dir=$1
  shift
  local sasl=0 secure=0 expired=0 users=()
  while [ $# -gt 0 ]; do
    case $1 in
      --sasl) sasl=1 ;;
      --secure) secure=1 ;;
      --expired-cert) expired=1 ;;
      --user) [ $# -ge 2 ] || { echo "kafka.sh: --user needs NAME[:PASSWORD]" >&2; return 2; }
              users+=("$2"); shift ;;
      *) echo "kafka.sh: start: unknown argument $1" >&2; return 2 ;;
    esac
    shift
  done
  if [ ${#users[@]} -gt 0 ] && [ $sasl = 0 ] && [ $secure = 0 ]; then
    echo "kafka.sh: --user needs --sasl or --secure" >&2
    return 2
  fi
  if [ $sasl = 1 ] && [ $secure = 1 ]; then
    echo "kafka.sh: --sasl or --secure, not both" >&2
    return 2
  fi
  if [ $expired = 1 ] && [ $secure = 0 ]; then
    echo "kafka.sh: --expired-cert needs --secure" >&2
    return 2
  fi
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  use_dir_version "$dir"
  fetch
  local java
  java_cmd "$dir" -Xms256m -Xmx768m
  if [ -f "$dir/data/meta.properties" ]; then
    # a restart: same storage, same ports, same users
    : >"$dir/server.log"
    run_broker "$dir"
    return
  fi
  local port cport listeners scram=()
  port=$(free_port)
  cport=$(free_port)
  if [ $sasl = 1 ]; then
    sasl_setup "$dir" "$port" "$cport" SASL_PLAINTEXT "" "${users[@]}" || return
  elif [ $secure = 1 ]; then
    command -v openssl >/dev/null || { echo "kafka.sh: --secure needs openssl" >&2; return 1; }
    local eport=""
    if [ $expired = 1 ]; then
      eport=$(free_port)
      echo "127.0.0.1:$eport" >"$dir/bootstrap-expired"
    fi
    tls_setup "$dir" "$expired" || return
    sasl_setup "$dir" "$port" "$cport" SASL_SSL "$eport" "${users[@]}" || return
  else
    listeners="listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT"
  fi
  cat >"$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
controller.listener.names=CONTROLLER
$listeners
log.dirs=$dir/data
num.partitions=4
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
# consumer-protocol groups (KIP-848, kafka.group.protocol=consumer) take
# their time-outs from the broker: as short as the test harness's classic ones
group.consumer.min.session.timeout.ms=6000
group.consumer.session.timeout.ms=6000
group.consumer.min.heartbeat.interval.ms=500
group.consumer.heartbeat.interval.ms=500
PROPS
  echo "$version" >"$dir/kafka-version"
  local id
  # a cluster id as StorageTool random-uuid makes it (16 random bytes in
  # URL-safe base64, unpadded, not starting with "-"), without a JVM start
  id=$(python3 -c 'import base64, os
while True:
    s = base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()
    if s[0] != "-":
        print(s)
        break')
  "${java[@]}" kafka.tools.StorageTool format -t "$id" -c "$dir/server.properties" "${scram[@]}" \
    >"$dir/format.log" 2>&1 || { cat "$dir/format.log" >&2; return 1; }
  echo "127.0.0.1:$port" >"$dir/bootstrap"
  run_broker "$dir"
}

# Start the broker configured in DIR (java=(...) set by the caller) and wait.
run_broker() {
  local dir=$1
  nohup "${java[@]}" kafka.Kafka "$dir/server.properties" >"$dir/stdout.log" 2>&1 &
  echo $! >"$dir/pid"
  for _ in $(seq 1 600); do
    if grep -q "Kafka Server started" "$dir/server.log" 2>/dev/null; then
      cat "$dir/bootstrap"
      return 0
    fi
    if ! kill -0 "$(cat "$dir/pid")" 2>/dev/null; then
      echo "kafka.sh: the broker exited; see $dir/server.log and $dir/stdout.log" >&2
      tail -20 "$dir/stdout.log" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "kafka.sh: the broker did not start within 60 s; see $dir/server.log" >&2
  return 1
}

stop() {
  local dir=$1 pid
  [ -f "$dir/pid" ] || return 0
  pid=$(cat "$dir/pid")
  kill "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 300); do kill -0 "$pid" 2>/dev/null || { rm -f "$dir/pid"; return 0; }; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$dir/pid"
}

# The class of Kafka's command-line tool NAME (AclCommand, ConfigCommand):
# org.apache.kafka.tools.NAME when the cache's kafka-tools jar holds it
# (AclCommand from 4.0, ConfigCommand from 4.4), else core's kafka.admin.NAME.
tool_class() {
  python3 - "$1" "$cache"/kafka-tools-*.jar <<'PY'
import sys, zipfile
name, jars = sys.argv[1], [j for j in sys.argv[2:] if not j.endswith("*.jar")]
tools = "org/apache/kafka/tools/%s.class" % name
held = any(tools in zipfile.ZipFile(j).namelist() for j in jars)
print(("org.apache.kafka.tools." if held else "kafka.admin.") + name)
PY
}

# kafka-acls.sh as admin against the broker in DIR (started with --sasl or
# --secure).
acls() {
  local dir=$1
  shift
  [ -f "$dir/sasl/admin.properties" ] || { echo "kafka.sh: $dir has no broker started with --sasl or --secure" >&2; return 2; }
  use_dir_version "$dir"
  fetch
  local java
  java_cmd "$dir" -Xmx256m
  "${java[@]}" "$(tool_class AclCommand)" --bootstrap-server "$(cat "$dir/bootstrap")" \
    --command-config "$dir/sasl/admin.properties" "$@"
}

# A SCRAM-SHA-512 user NAME[:PASSWORD] added to the running broker in DIR
# (kafka-configs.sh as admin), with its DIR/sasl/ files.
user() {
  local dir=$1 spec=${2:-} name pw proto
  [ -f "$dir/sasl/admin.properties" ] || { echo "kafka.sh: $dir has no broker started with --sasl or --secure" >&2; return 2; }
  name=${spec%%:*}
  pw=${spec#*:}
  [ "$pw" = "$spec" ] && pw=$(password)
  case $name in
    ''|admin|controller|*[!A-Za-z0-9._-]*)
      echo "kafka.sh: user $name: a name of letters, digits, . _ - (not admin)" >&2; return 2 ;;
  esac
  use_dir_version "$dir"
  fetch
  local java
  java_cmd "$dir" -Xmx256m
  "${java[@]}" "$(tool_class ConfigCommand)" --bootstrap-server "$(cat "$dir/bootstrap")" \
    --command-config "$dir/sasl/admin.properties" --alter --entity-type users \
    --entity-name "$name" --add-config "SCRAM-SHA-512=[password=$pw]" >/dev/null || return
  proto=$(sed -n 's/^security.protocol=//p' "$dir/sasl/admin.properties")
  user_files "$dir" "$name" "$pw" "$proto"
}

case "${1:-}" in
  start) start "${2:?usage: deploy/kafka.sh start DIR [--sasl|--secure [--expired-cert]] [--user NAME[:PASSWORD]]...}" "${@:3}" ;;
  acls) acls "${2:?usage: deploy/kafka.sh acls DIR ARG...}" "${@:3}" ;;
  user) user "${2:?usage: deploy/kafka.sh user DIR NAME[:PASSWORD]}" "${3:?usage: deploy/kafka.sh user DIR NAME[:PASSWORD]}" ;;
  stop) stop "${2:?usage: deploy/kafka.sh stop DIR}" ;;
  fetch) use_version "${TXHUB_KAFKA_VERSION:-$default_version}"; fetch ;;
  *) echo "usage: deploy/kafka.sh start DIR [--sasl|--secure [--expired-cert]] [--user NAME[:PASSWORD]]... | acls DIR ARG... | user DIR NAME[:PASSWORD] | stop DIR | fetch" >&2; exit 2 ;;
esac
