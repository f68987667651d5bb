#!/usr/bin/env bash
# A single-node Apache Kafka broker (KRaft, no ZooKeeper) on 127.0.0.1, for
# running the tests against real Kafka. Nothing is committed but the pom:
# the broker's jars come from Maven Central with Maven and are cached in
# ${TXHUB_KAFKA_CACHE:-~/.cache/txhub}/kafka-<version>.
#
#   deploy/kafka.sh start DIR   format KRaft storage in DIR (created), start
#                               the broker, wait until it answers, print its
#                               bootstrap servers (host:port) on stdout; when
#                               DIR holds a broker stopped earlier, start it
#                               again with its data and ports (a restart)
#   deploy/kafka.sh stop DIR    stop it (SIGTERM, then SIGKILL after 30 s)
#   deploy/kafka.sh fetch       only fetch the jars
#
# Installs Java 17 and Maven from Debian's packages when they are missing.
# Topics are created on first use with 4 partitions.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pom=$here/kafka/pom.xml
version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$pom")
cache=${TXHUB_KAFKA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/txhub}/kafka-$version

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
    -DoutputDirectory="$cache.tmp" >&2
  rm -rf "$cache"
  mv "$cache.tmp" "$cache"
  touch "$cache/.complete"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
  local dir=$1
  fetch
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  local java=(java -Xms256m -Xmx768m -Dkafka.logs.dir="$dir"
              -Dlog4j.configuration="file:$dir/log4j.properties" -cp "$cache/*")
  if [ -f "$dir/data/meta.properties" ]; then
    # a restart: same storage, same ports
    : >"$dir/server.log"
    run_broker "$dir"
    return
  fi
  local port cport
  port=$(free_port)
  cport=$(free_port)
  cat >"$dir/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$cport
listeners=PLAINTEXT://127.0.0.1:$port,CONTROLLER://127.0.0.1:$cport
advertised.listeners=PLAINTEXT://127.0.0.1:$port
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$dir/data
num.partitions=4
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
group.initial.rebalance.delay.ms=0
PROPS
  cat >"$dir/log4j.properties" <<'PROPS'
log4j.rootLogger=INFO, file
log4j.appender.file=org.apache.log4j.FileAppender
log4j.appender.file.File=${kafka.logs.dir}/server.log
log4j.appender.file.layout=org.apache.log4j.PatternLayout
log4j.appender.file.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka=INFO
log4j.logger.org.apache.kafka=INFO
PROPS
  local id
  id=$("${java[@]}" kafka.tools.StorageTool random-uuid)
  "${java[@]}" kafka.tools.StorageTool format -t "$id" -c "$dir/server.properties" >"$dir/format.log" 2>&1
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

case "${1:-}" in
  start) start "${2:?usage: deploy/kafka.sh start DIR}" ;;
  stop) stop "${2:?usage: deploy/kafka.sh stop DIR}" ;;
  fetch) fetch ;;
  *) echo "usage: deploy/kafka.sh start DIR | stop DIR | fetch" >&2; exit 2 ;;
esac
