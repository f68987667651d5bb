#!/usr/bin/env bash
# The Java clients (clients/java): `mvn install` with every test, the vector tests and the
# end-to-end test of the sample order service among them, against the hub, PostgreSQL and
# Kafka that tests/with-services.sh provides (TXHUB_BIN, TXHUB_PG, TXHUB_BROKERS).
#
#   tests/clients/java_test.sh SOURCE_ROOT
#
# kafka-clients 4.x speaks no Metadata request older than v4, which the embedded broker of
# Debian's librdkafka 2.0.2 lacks: unless Apache Kafka is given (TXHUB_TEST_BROKERS, as the
# Kafka suites set it), this starts one with deploy/kafka.sh for the Java tests and the hub
# they start, and stops it after. Exit 77 (skipped) without java or mvn. Dependencies come
# from Maven Central into ~/.m2 (the first run downloads them; later ones reuse them).
set -euo pipefail
root=$(cd "${1:?usage: java_test.sh SOURCE_ROOT}" && pwd)

for tool in java mvn; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "java: SKIP: $tool is not installed (deploy/dev.sh installs openjdk-17-jdk-headless and maven)"
    exit 77
  fi
done
feature=$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
if [ "${feature:-0}" -lt 17 ] 2>/dev/null; then
  echo "java: SKIP: Java ${feature:-?} is older than 17"
  exit 77
fi

kdir=""
cleanup() {
  [ -n "$kdir" ] && "$root/deploy/kafka.sh" stop "$kdir" >/dev/null 2>&1
  [ -n "$kdir" ] && rm -rf "$kdir"
}
trap cleanup EXIT
if [ -z "${TXHUB_TEST_BROKERS:-}" ] && [ -n "${TXHUB_BIN:-}" ]; then
  kdir=$(mktemp -d "${TMPDIR:-/tmp}/txhub-java-kafka.XXXXXX")
  echo "java: starting Apache Kafka with deploy/kafka.sh for kafka-clients 4.x (the embedded broker cannot serve it)"
  TXHUB_BROKERS=$("$root/deploy/kafka.sh" start "$kdir")
  # ours to stop and start again: the starter's broker-outage test does
  TXHUB_JAVA_KAFKA_DIR=$kdir
  export TXHUB_BROKERS TXHUB_JAVA_KAFKA_DIR
fi

set +e
mvn -B -ntp -Dstyle.color=never -f "$root/clients/java/pom.xml" clean install
rc=$?
set -e

# one closing line for deploy/dev.sh's summary, from Surefire's reports
python3 - "$root/clients/java" <<'PY'
import glob, sys, xml.etree.ElementTree as ET
t = f = s = 0
for path in glob.glob(sys.argv[1] + "/**/target/surefire-reports/TEST-*.xml", recursive=True):
    r = ET.parse(path).getroot()
    t += int(r.get("tests", 0)); s += int(r.get("skipped", 0))
    f += int(r.get("failures", 0)) + int(r.get("errors", 0))
print(f"\njava: {t - f - s} passed, {f} failed, {s} skipped")
PY
exit $rc
