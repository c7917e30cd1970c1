#!/usr/bin/env bash
# System calls and context switches per request (HTTP) or per echoed message (WebSocket), counted
# by the kernel's tracepoints (`perf stat -p PID`) while a fixed load runs: a repeatable measure of
# per-request cost on a machine whose wall clock moves 10-20% from run to run.
#
# usage: bench/syscalls.sh http|ws SERVER ...
#   SERVER = NAME:PORT:COMMAND  (COMMAND starts a server on 127.0.0.1:PORT; {PORT} is replaced)
#   e.g. bench/syscalls.sh http "reactor:18301:target/release/examples/hello --addr 127.0.0.1:{PORT} --engine reactor"
# knobs: CONNS (64) DURATION (3 s) SIZE (32, ws message bytes) WSLOAD (path of the ws_load example)
# HTTP load: wrk -t2 (installed from Debian's packages if missing); WebSocket load: examples/ws_load
# (built here if missing). Every server is started fresh, talks to
# 127.0.0.1 only, and is stopped by its PID.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"
kind=${1:-}; shift || true
check_args 2,13p $#
CONNS=${CONNS:-64} DURATION=${DURATION:-3} SIZE=${SIZE:-32}

calls="recvfrom sendto read write readv writev recvmsg sendmsg epoll_wait epoll_pwait epoll_pwait2 epoll_ctl timerfd_settime poll ppoll futex sched_yield"
events="raw_syscalls:sys_enter,context-switches"
for c in $calls; do events="$events,syscalls:sys_enter_$c"; done

need_tools
trap stop_server EXIT

header="| server | ${unit}s | syscalls each | context switches each |"
sep="|---|---|---|---|"
for c in $calls; do header="$header $c |"; sep="$sep---|"; done
rows=()
for spec in "$@"; do
  start_server "$spec"
  sleep 0.3
  perf stat -x, -e "$events" -p "$spid" -o /tmp/twinhttp-syscalls.$$ -- sleep $((DURATION + 1)) &
  ppid=$!
  sleep 0.3
  run_load
  wait "$ppid"
  stop_server
  row=$(awk -F, -v n="$n" -v name="$name" -v calls="$calls" '
    { v[$3] = $1 }
    END {
      split(calls, c, " ")
      printf "| %s | %d | %.2f | %.3f |", name, n, v["raw_syscalls:sys_enter"] / n, v["context-switches"] / n
      for (i = 1; i in c; i++) printf " %.2f |", v["syscalls:sys_enter_" c[i]] / n
    }' /tmp/twinhttp-syscalls.$$)
  rm -f /tmp/twinhttp-syscalls.$$
  echo "$row" >&2
  rows+=("$row")
done
echo
echo "Per $unit, $CONNS connections, ${DURATION} s$([ "$kind" = ws ] && echo ", $SIZE B messages"); $(nproc) cores, $(uname -r), $(date -I)."
echo
echo "$header"
echo "$sep"
printf '%s\n' "${rows[@]}"
