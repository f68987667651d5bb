#!/bin/sh
# check_unit.sh UNIT TXHUB_BINARY: deploy/txhub.service must pass
# `systemd-analyze verify` without a single complaint (an unknown or
# misspelt directive is only a warning there, so any output fails), keep
# its hardening (every sandboxing line below still there, and
# `systemd-analyze security --offline` exposure at most 1.4, what the unit
# scores today), and reload by SIGHUP to the main process.
# Exit 77 (meson: skipped) where systemd-analyze is not installed.
set -eu
unit=$1
txhub=$(realpath "$2")
command -v systemd-analyze >/dev/null 2>&1 || { echo "systemd-analyze not found: skipped"; exit 77; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/txhub-unit.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# verify wants the executables to exist: point them at the one just built
sed "s#/usr/local/bin/txhub#$txhub#g" "$unit" >"$tmp/txhub.service"

out=$(cd "$tmp" && systemd-analyze verify ./txhub.service 2>&1) || { echo "$out"; exit 1; }
if [ -n "$out" ]; then
  echo "systemd-analyze verify complains:"
  echo "$out"
  exit 1
fi

if ! systemd-analyze security --offline=true --threshold=14 "$tmp/txhub.service" >"$tmp/security" 2>&1; then
  tail -n 1 "$tmp/security"
  echo "the unit's hardening got weaker (exposure above 1.4)"
  exit 1
fi
tail -n 1 "$tmp/security"

for d in User NoNewPrivileges ProtectSystem ProtectHome PrivateTmp PrivateDevices \
         ProtectKernelTunables ProtectKernelModules ProtectKernelLogs ProtectControlGroups \
         ProtectClock ProtectHostname ProtectProc RestrictAddressFamilies RestrictNamespaces \
         RestrictRealtime RestrictSUIDSGID LockPersonality MemoryDenyWriteExecute RemoveIPC \
         CapabilityBoundingSet AmbientCapabilities SystemCallArchitectures SystemCallFilter UMask; do
  grep -q "^$d=" "$unit" || { echo "the hardening line $d= is gone"; exit 1; }
done
grep -qx 'ExecReload=/bin/kill -HUP $MAINPID' "$unit" || { echo "no ExecReload sending SIGHUP"; exit 1; }
echo "ok"
