# The bench scripts' common harness (sourced, with $here set to the repository): start a server
# from a NAME:PORT:COMMAND spec and stop it by its PID, the peers by name, wrk runs with latency
# percentiles and the server's CPU per request, rows for raw.tsv, and the fixed HTTP (wrk) or
# WebSocket (examples/ws_load) load of bench/syscalls.sh and bench/profile.sh.
# Every server listens on 127.0.0.1 and every load goes there.
# shellcheck shell=bash
# Its variables are set for, and read from, the scripts that source it:
# shellcheck disable=SC2034,SC2154

spid=""
# shellcheck source=bench/target.sh
. "$here/bench/target.sh"
peers_rs=$peers_release
peers_go=$here/bench/peers-go/bin
WSLOAD=${WSLOAD:-$release/examples/ws_load}

# need_wrk: wrk, from Debian's packages if missing.
need_wrk() {
  command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
}

# peer_command NAME: the command line of a named peer ({PORT} stands for its port); fails for an
# unknown name. Built by bench/peers/build.sh; settings are the libraries' defaults.
peer_command() {
  case "$1" in
    hyper) echo "$peers_rs/hyper_hello {PORT}" ;;
    actix) echo "$peers_rs/actix_hello {PORT}" ;;
    may) echo "$peers_rs/may_minihttp_hello {PORT}" ;;
    tinyhttp) echo "$peers_rs/tiny_http_hello {PORT}" ;;
    ehttpd) echo "$peers_rs/ehttpd_hello {PORT}" ;;
    gostd) echo "$peers_go/nethttp_hello {PORT}" ;;
    floor) echo "$peers_rs/floor_hello {PORT}" ;;
    tungstenite) echo "$peers_rs/tungstenite_echo {PORT}" ;;
    tokio-tungstenite) echo "$peers_rs/tokio_tungstenite_echo {PORT}" ;;
    fastwebsockets) echo "$peers_rs/fastwebsockets_echo {PORT}" ;;
    gorilla) echo "$peers_go/gorilla_echo {PORT}" ;;
    gobwas) echo "$peers_go/gobwas_echo {PORT}" ;;
    *) echo "unknown peer '$1' (hyper actix may tinyhttp ehttpd gostd floor; WebSocket: tungstenite" \
      "tokio-tungstenite fastwebsockets gorilla gobwas)" >&2; return 1 ;;
  esac
}

# peer_spec NAME PORT: NAME:PORT:COMMAND for start_server.
peer_spec() {
  local cmd
  cmd=$(peer_command "$1") || return 1
  echo "$1:$2:$cmd"
}

# listening_pid PORT: the PID that listens on 127.0.0.1:PORT, if any.
listening_pid() {
  ss -Hltnp "sport = :$1" 2>/dev/null | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2
}

# start_server SPEC: starts NAME:PORT:COMMAND ({PORT} replaced) from the repository, its output
# to $SERVER_LOG (default: none); sets name, port and spid. Returns once that process (not
# another one: other benchmarks may share this machine) listens on the port; fails if the port
# is taken, or the server exits or is not listening within START_SECS (10) s.
start_server() {
  local rest cmd
  name=${1%%:*}; rest=${1#*:}; port=${rest%%:*}; cmd=${rest#*:}; cmd=${cmd//\{PORT\}/$port}
  if [ -n "$(listening_pid "$port")" ]; then
    echo "port $port is taken by another process; set PORT" >&2; return 1
  fi
  (cd "$here" && exec bash -c "exec $cmd") >"${SERVER_LOG:-/dev/null}" 2>&1 &
  spid=$!
  for _ in $(seq $((${START_SECS:-10} * 20))); do
    [ "$(listening_pid "$port")" = "$spid" ] && return 0
    kill -0 "$spid" 2>/dev/null || { echo "$name exited at start: $cmd" >&2; spid=""; return 1; }
    sleep 0.05
  done
  echo "$name did not listen on port $port within ${START_SECS:-10} s" >&2; stop_server; return 1
}

# stop_server: stops the server start_server started (TERM, then KILL after STOP_SECS (3) s), by
# its PID.
stop_server() {
  if [ -n "$spid" ]; then
    kill "$spid" 2>/dev/null || true
    for _ in $(seq $((${STOP_SECS:-3} * 10))); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
  fi
  spid=""
}

# cpu_ticks PID: the process's user + system time so far, in clock ticks (/proc/PID/stat,
# read after the command name, which may hold spaces).
cpu_ticks() {
  sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'
}

# proc_status PID FIELD: a field of /proc/PID/status (VmRSS in KiB, Threads).
proc_status() {
  awk -v f="$2:" '$1 == f {print $2}' "/proc/$1/status" 2>/dev/null
}

# hold_idle KIND N: bench/peers' idle_hold opens N idle connections (KIND http: one request
# each; ws: a WebSocket upgrade each) to the server start_server started and holds them; sets
# rss0/threads0 (the server's VmRSS KiB and threads before), rss/threads (2 s after all are
# open) and held (how many opened and were answered). Raise `ulimit -n` first.
hold_idle() {
  local log load
  sleep 0.5
  rss0=$(proc_status "$spid" VmRSS) threads0=$(proc_status "$spid" Threads)
  log=$(mktemp)
  timeout 600 "$peers_rs/idle_hold" "$port" "$2" "$1" 6 >"$log" &
  load=$!
  for _ in $(seq 6000); do
    grep -q READY "$log" && break
    kill -0 "$load" 2>/dev/null || break
    sleep 0.1
  done
  sleep 2
  rss=$(proc_status "$spid" VmRSS) threads=$(proc_status "$spid" Threads)
  wait "$load" || true
  held=$(grep -o 'held=[0-9]*' "$log" | cut -d= -f2)
  held=${held:-0}
  rm -f "$log"
}

# wrk_ms VALUE: wrk's latency (812.00us, 1.50ms, 2.01s) in milliseconds; nothing for 0.00us,
# which wrk prints for percentiles it did not record (pipelined runs past the first batch).
wrk_ms() {
  awk -v v="$1" 'BEGIN {
    if (v + 0 == 0) { print ""; exit }
    if (v ~ /us$/) printf "%.4f", v * 0.001; else if (v ~ /ms$/) printf "%.3f", v + 0;
    else if (v ~ /m$/) printf "%.1f", v * 60000; else if (v ~ /s$/) printf "%.3f", v * 1000;
    else print "" }'
}

# measure_wrk CONNS WRK_ARGS...: wrk -t2 -cCONNS --latency for DURATION seconds (after WARMUP
# seconds of the same load, discarded) against the server start_server started, with a response
# timeout of WRK_TIMEOUT (10 s, not wrk's 2 s: a slower response would be left out of p99). WRK_ARGS holds
# the URL (and a script's options). Sets rps, p50, p99 (ms), requests, errors (socket errors +
# non-2xx/3xx responses) and cpu_us (the server's CPU per request).
measure_wrk() {
  local conns=$1 threads=2 limit=${WRK_TIMEOUT:-10}s out before after ticks
  shift
  [ "$conns" -ge 2 ] || threads=1
  if [ "${WARMUP:-1}" -gt 0 ]; then
    timeout $((WARMUP + 20)) wrk -t"$threads" -c"$conns" -d"${WARMUP}s" --timeout "$limit" "$@" \
      >/dev/null 2>&1 || true
  fi
  before=$(cpu_ticks "$spid")
  out=$(timeout $((DURATION + 30)) wrk -t"$threads" -c"$conns" -d"${DURATION}s" --timeout "$limit" \
    --latency "$@" 2>&1 || true)
  after=$(cpu_ticks "$spid")
  ticks=$(getconf CLK_TCK)
  rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
  requests=$(awk '/requests in/ {print $1}' <<<"$out")
  p50=$(wrk_ms "$(awk '$1 == "50%" {print $2}' <<<"$out")")
  p99=$(wrk_ms "$(awk '$1 == "99%" {print $2}' <<<"$out")")
  errors=$(awk '/Socket errors/ {gsub(",", ""); n += $4 + $6 + $8 + $10} /Non-2xx/ {n += $NF} END {print n + 0}' <<<"$out")
  cpu_us=""
  # No response within the run: no latency to report (wrk prints 0.00us).
  if [ "${requests:-0}" -eq 0 ]; then p50="" p99=""; fi
  if [ "${requests:-0}" -gt 0 ]; then
    cpu_us=$(awk -v t=$((after - before)) -v hz="$ticks" -v n="$requests" 'BEGIN {printf "%.2f", t / hz * 1e6 / n}')
  fi
  rps=${rps:-0}
}

# raw_header FILE: starts a raw.tsv (the columns twinhttp-report reads; see bench/peers/report).
raw_header() {
  printf 'section\tserver\tworkload\tconns\trep\trps\tp50_ms\tp99_ms\tcpu_us\terrors\trss_kib\tthreads\n' >"$1"
}

# raw_row FILE SECTION SERVER WORKLOAD CONNS REP RPS P50 P99 CPU_US ERRORS RSS_KIB THREADS
raw_row() {
  local file=$1
  shift
  local IFS=$'\t'
  echo "$*" >>"$file"
}

# ---- bench/syscalls.sh and bench/profile.sh: a fixed load, by kind (http|ws) ----
# Expects kind, CONNS, DURATION, SIZE; LUA and PIPELINE optionally (a wrk script, its argument).

# check_args LINES COUNT: prints the caller's usage (its comment LINES) unless $kind is http or ws
# and COUNT servers were given; sets unit.
check_args() {
  case "$kind" in http|ws) ;; *) sed -n "$1" "$0"; exit 2 ;; esac
  [ "$2" -gt 0 ] || { echo "no servers given"; exit 2; }
  unit=request
  if [ "$kind" = ws ]; then unit=message; fi
}

# need_tools: perf and the load generator (wrk from Debian's packages; ws_load built here).
need_tools() {
  command -v perf >/dev/null || { apt-get update -qq && apt-get install -y -qq linux-perf; }
  if [ "$kind" = http ]; then
    need_wrk
  elif [ ! -x "$WSLOAD" ]; then
    (cd "$here" && cargo build -q --release --example ws_load)
  fi
}

# run_load: the load against 127.0.0.1:$port for DURATION seconds; sets n (requests or messages).
run_load() {
  local out args
  if [ "$kind" = http ]; then
    args=(-t2 -c"$CONNS" -d"${DURATION}s")
    [ -n "${LUA:-}" ] && args+=(-s "$LUA")
    args+=("http://127.0.0.1:$port/")
    [ -n "${LUA:-}" ] && args+=(-- "$PIPELINE")
    out=$(timeout $((DURATION + 10)) wrk "${args[@]}")
    n=$(awk '/requests in/ {print $1}' <<<"$out")
  else
    out=$(timeout $((DURATION + 10)) "$WSLOAD" --addr "127.0.0.1:$port" --conns "$CONNS" \
      --size "$SIZE" --secs "$DURATION")
    n=$(awk '/^ws_load:/ {print $2}' <<<"$out")
  fi
}
