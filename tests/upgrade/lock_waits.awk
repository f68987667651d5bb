# lock_waits.awk: the lock waits in a PostgreSQL log written with
# log_line_prefix '%m [%p] %a: ' and log_lock_waits (tests/upgrade/run.sh).
# PostgreSQL logs a wait once it passes deadlock_timeout ("still waiting",
# with the holders and the queue in the DETAIL line after it) and again when
# the lock comes ("acquired ... after N ms"). The sessions of application
# `txhub-migrate` are migrate's; every other one is the hub's or the bench's.
# Prints four numbers: in ms, the longest wait of those sessions behind
# migrate (it held the lock or was queued for it ahead of them), and their
# longest wait of any cause (the hub's own sessions wait for each other too);
# then the deadlocks migrate's session was part of, and all of them.
function pid_of(line) {
  return substr(line, index(line, "[") + 1, index(line, "]") - index(line, "[") - 1)
}
function lock_of(line,    s) {
  s = line
  sub(/.* (still waiting for|acquired) /, "", s)
  sub(/ after [0-9.]+ ms.*/, "", s)
  return s
}
function involved(line,    s, p) {
  s = line
  while (match(s, /[Pp]rocess [0-9]+/)) {
    p = substr(s, RSTART + 8, RLENGTH - 8)
    if (p in migrate) with_migrate = 1
    s = substr(s, RSTART + RLENGTH)
  }
}
function ms_of(line,    s) {
  s = line
  sub(/.* after /, "", s)
  sub(/ ms.*/, "", s)
  return s + 0
}
# given the log twice: the first pass finds migrate's sessions
NR == FNR { if ($0 ~ /\] txhub-migrate: /) migrate[pid_of($0)] = 1; next }
# a deadlock: "ERROR:  deadlock detected", then "DETAIL:  Process 1 waits for
# ...; blocked by process 2." and a line per process more, each begun by a tab
in_deadlock && (/^\t/ || / DETAIL:  Process [0-9]+ waits for /) { involved($0); next }
in_deadlock { in_deadlock = 0; if (with_migrate) mig_deadlocks++ }
/ ERROR:  deadlock detected/ {
  deadlocks++; in_deadlock = 1; with_migrate = (pid_of($0) in migrate); next
}
/\] txhub-migrate: / { next }
/ still waiting for / || / acquired .* after [0-9.]+ ms/ {
  p = pid_of($0); l = lock_of($0); v = ms_of($0)
  if (v > any) any = v
  if (behind[p, l] && v > mig) mig = v
  if ($0 ~ / still waiting for /) { waiting = p; waiting_lock = l; waiting_ms = v }
  next
}
/ DETAIL:  Process(es)? holding the lock: / && waiting != "" {
  # "Process holding the lock: 1. Wait queue: 2, 3." (or "Processes ...: 1, 4.")
  s = $0
  sub(/.*holding the lock: /, "", s)
  n = split(s, w, /[^0-9]+/)
  for (i = 1; i <= n; i++) {
    if (w[i] == waiting) break   # those queued after it do not hold it up
    if (w[i] in migrate) { behind[waiting, waiting_lock] = 1; if (waiting_ms > mig) mig = waiting_ms }
  }
  waiting = ""
}
END { if (in_deadlock && with_migrate) mig_deadlocks++; printf "%d %d %d %d\n", mig, any, mig_deadlocks, deadlocks }
