#!/usr/bin/env bash
# System calls and context switches per request (HTTP) or per echoed message (WebSocket), counted
# by the kernel's tracepoints (`perf stat -p PID`) while a fixed load runs: a repeatable measure of
# per-request cost on a machine whose wall clock moves 10-20% from run to run.
#
# usage: bench/syscalls.sh http|ws SERVER ...
#   SERVER = NAME:PORT:COMMAND  (COMMAND starts a server on 127.0.0.1:PORT; {PORT} is replaced)
#   e.g. bench/syscalls.sh http "reactor:18301:target/release/examples/hello --addr 127.0.0.1:{PORT} --engine reactor"
# knobs: CONNS (64) DURATION (3 s) SIZE (32, ws message bytes) WSLOAD (path of the peers' wsload)
# HTTP load: wrk -t2 (installed from Debian's packages if missing); WebSocket load: wsload from
# ../shared/peers/ws (bench/compare_ws.sh builds it). Every server is started fresh, talks to
# 127.0.0.1 only, and is stopped by its PID.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
kind=${1:-}; shift || true
case "$kind" in http|ws) ;; *) sed -n 2,13p "$0"; exit 2 ;; esac
[ $# -gt 0 ] || { echo "no servers given"; exit 2; }
unit=request; [ "$kind" = ws ] && unit=message
CONNS=${CONNS:-64} DURATION=${DURATION:-3} SIZE=${SIZE:-32}
WSLOAD=${WSLOAD:-${PEERS_WORK:-/tmp/twinhttp-peers}/ws/rs/target/release/wsload}
command -v perf >/dev/null || { apt-get update -qq && apt-get install -y -qq linux-perf; }
if [ "$kind" = http ]; then
  command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
else
  [ -x "$WSLOAD" ] || { echo "no wsload at $WSLOAD (run bench/compare_ws.sh once, or set WSLOAD)"; exit 2; }
fi

calls="recvfrom sendto read write readv writev recvmsg sendmsg epoll_wait epoll_pwait epoll_ctl timerfd_settime poll ppoll futex sched_yield"
events="raw_syscalls:sys_enter,context-switches"
for c in $calls; do events="$events,syscalls:sys_enter_$c"; done

spid=""
stop() {
  if [ -n "$spid" ]; then kill "$spid" 2>/dev/null || true; wait "$spid" 2>/dev/null || true; fi
  spid=""
}
trap stop EXIT

header="| server | ${unit}s | syscalls each | context switches each |"
sep="|---|---|---|---|"
for c in $calls; do header="$header $c |"; sep="$sep---|"; done
rows=()
for spec in "$@"; do
  name=${spec%%:*}; rest=${spec#*:}; port=${rest%%:*}; cmd=${rest#*:}; cmd=${cmd//\{PORT\}/$port}
  (cd "$here" && exec bash -c "exec $cmd") >/dev/null 2>&1 &
  spid=$!
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
  sleep 0.3
  perf stat -x, -e "$events" -p "$spid" -o /tmp/twinhttp-syscalls.$$ -- sleep $((DURATION + 1)) &
  ppid=$!
  sleep 0.3
  if [ "$kind" = http ]; then
    out=$(timeout $((DURATION + 10)) wrk -t2 -c"$CONNS" -d"${DURATION}s" "http://127.0.0.1:$port/")
    n=$(awk '/requests in/ {print $1}' <<<"$out")
  else
    out=$(timeout $((DURATION + 10)) "$WSLOAD" --url "ws://127.0.0.1:$port/" --conns "$CONNS" \
      --duration "$DURATION" --size "$SIZE" --mode binary --window 1)
    n=$(grep -o 'msgs=[0-9]*' <<<"$out" | cut -d= -f2)
  fi
  wait "$ppid"
  stop
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
