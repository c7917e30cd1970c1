#!/usr/bin/env bash
# Where a server's CPU time goes per request (HTTP) or per echoed message (WebSocket): `perf record -g`
# samples one server process while a fixed load runs, and the samples are split into user code,
# the send and receive system calls (a send on loopback includes delivering the bytes to the client
# and waking it), waiting for events (epoll and, for `polling`, its timerfd and notifier), the
# hand-off between threads (futex, sched_yield), preemption on the way out of a system call, and the
# rest. Each share is converted to CPU microseconds per request, so servers that serve different
# numbers of requests compare directly. The same split for every server answers "where is the gap?"
# in CPU time rather than in req/s, which moves 10-20% between runs on this machine.
#
# usage: bench/profile.sh http|ws SERVER ...
#   SERVER = NAME:PORT:COMMAND  (COMMAND starts a server on 127.0.0.1:PORT; {PORT} is replaced)
#   e.g. bench/profile.sh http "reactor:18401:target/release/examples/hello --addr 127.0.0.1:{PORT} --engine reactor"
# knobs: CONNS (64) DURATION (4 s) PIPELINE (0: keep-alive; N: N requests per write, wrk Lua script)
#        SIZE (32, ws message bytes) FREQ (2000 samples/s per thread) WSLOAD (path of the ws_load example)
#        KEEP (a folder: keep each perf.data there for `perf report -i`)
# HTTP load: wrk -t2 (installed from Debian's packages if missing); WebSocket load: examples/ws_load
# (built here if missing). Every server is started fresh, talks to
# 127.0.0.1 only, and is stopped by its PID. Kernel symbols need kptr_restrict 0 (root here).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"
kind=${1:-}; shift || true
check_args 2,19p $#
CONNS=${CONNS:-64} DURATION=${DURATION:-4} SIZE=${SIZE:-32} PIPELINE=${PIPELINE:-0} FREQ=${FREQ:-2000}

tmp=$(mktemp -d /tmp/twinhttp-profile.XXXXXX)
need_tools
trap 'stop_server; rm -rf "$tmp"' EXIT

LUA=""
if [ "$PIPELINE" -gt 0 ]; then LUA=$here/bench/pipeline.lua; fi

# Kernel functions whose inclusive time makes each column (one level per path, so none is counted
# twice; the __x64_sys_* wrappers are often tail calls that call graphs skip).
send="__sys_sendto __sys_sendmsg do_writev ksys_write"
recv="__sys_recvfrom __sys_recvmsg do_readv ksys_read"
wait="do_epoll_wait do_epoll_ctl __x64_sys_timerfd_settime do_sys_poll"
handoff="do_futex __x64_sys_sched_yield"
preempt="exit_to_user_mode_loop"

rows=()
for spec in "$@"; do
  start_server "$spec"
  sleep 0.5
  data=$tmp/$name.data
  perf record -q -F "$FREQ" -g -p "$spid" -o "$data" -- sleep $((DURATION + 1)) >/dev/null 2>&1 &
  ppid=$!
  sleep 0.3
  run_load
  wait "$ppid" || true
  stop_server
  [ -n "${KEEP:-}" ] && mkdir -p "$KEEP" && cp "$data" "$KEEP/$name.data"
  # Samples per DSO (exact counts), then inclusive shares of the kernel entry points.
  perf report -i "$data" --stdio --no-children -n --sort dso -g none 2>/dev/null | grep -v '^#' | grep -v '^$' \
    >"$tmp/dso" || true
  perf report -i "$data" --stdio --children --sort sym -g none 2>/dev/null | grep -v '^#' \
    >"$tmp/sym" || true
  row=$(awk -v n="$n" -v name="$name" -v freq="$FREQ" -v dur="$DURATION" \
    -v send="$send" -v recv="$recv" -v wait="$wait" -v handoff="$handoff" -v preempt="$preempt" '
    FNR == 1 { file++ }
    file == 1 {
      # --no-children rows: "  88.71%  5188  [kernel.kallsyms]"
      total += $2
      if ($3 != "[kernel.kallsyms]") { sub("%", "", $1); user += $1 }
      next
    }
    # --children rows: "  63.37%  0.22%  [k] __x64_sys_sendto"
    file == 2 && $3 == "[k]" { sub("%", "", $1); share[$4] = $1 }
    function sum(list,   s, i, k) { split(list, k, " "); s = 0; for (i in k) s += share[k[i]]; return s }
    END {
      us = total / freq / n * 1e6
      s = sum(send); r = sum(recv); w = sum(wait); h = sum(handoff); p = sum(preempt)
      other = 100 - user - s - r - w - h - p
      printf "| %s | %.0f | %.2f |", name, n / dur, us
      split(user " " s " " r " " w " " h " " p " " other, v, " ")
      for (i = 1; i <= 7; i++) printf " %.2f (%.0f%%) |", us * v[i] / 100, v[i]
    }' "$tmp/dso" "$tmp/sym")
  echo "$row" >&2
  rows+=("$row")
done

load="wrk -t2 -c$CONNS -d${DURATION}s"
[ "$PIPELINE" -gt 0 ] && load="$load, $PIPELINE requests per write"
[ "$kind" = ws ] && load="ws_load, $CONNS connections, $SIZE B binary messages, one in flight each"
echo
echo "CPU microseconds per $unit by where they are spent ($load; perf record -g -F $FREQ;" \
  "$(nproc) cores, $(uname -r), $(date -I)). Shares in brackets are of the server's samples."
echo
echo "| server | ${unit}s/s | CPU µs per $unit | user code | send syscalls | receive syscalls | event wait | futex, sched_yield | preempted leaving a syscall | other kernel |"
echo "|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
