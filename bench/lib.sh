# Shared by bench/syscalls.sh and bench/profile.sh: start one server from a NAME:PORT:COMMAND spec,
# stop it by its PID, and run the fixed HTTP (wrk) or WebSocket (wsload) load against it.
# Expects: here (the repository), kind (http|ws), CONNS, DURATION, SIZE; WSLOAD, LUA and PIPELINE
# optionally (the wsload binary, a wrk script and its argument).

spid=""
WSLOAD=${WSLOAD:-${PEERS_WORK:-/tmp/twinhttp-peers}/ws/rs/target/release/wsload}

# check_args LINES COUNT: prints the caller's usage (its comment LINES) unless $kind is http or ws
# and COUNT servers were given; sets unit.
check_args() {
  case "$kind" in http|ws) ;; *) sed -n "$1" "$0"; exit 2 ;; esac
  [ "$2" -gt 0 ] || { echo "no servers given"; exit 2; }
  unit=request
  if [ "$kind" = ws ]; then unit=message; fi
}

# need_tools: perf and the load generator (wrk from Debian's packages; wsload must be built).
need_tools() {
  command -v perf >/dev/null || { apt-get update -qq && apt-get install -y -qq linux-perf; }
  if [ "$kind" = http ]; then
    command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
  else
    [ -x "$WSLOAD" ] || { echo "no wsload at $WSLOAD (run bench/compare_ws.sh once, or set WSLOAD)"; exit 2; }
  fi
}

# start_server SPEC: sets name, port and spid; returns once the port accepts connections.
start_server() {
  local rest cmd
  name=${1%%:*}; rest=${1#*:}; port=${rest%%:*}; cmd=${rest#*:}; cmd=${cmd//\{PORT\}/$port}
  (cd "$here" && exec bash -c "exec $cmd") >/dev/null 2>&1 &
  spid=$!
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.05; done
}

stop_server() {
  if [ -n "$spid" ]; then kill "$spid" 2>/dev/null || true; wait "$spid" 2>/dev/null || true; fi
  spid=""
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
    out=$(timeout $((DURATION + 10)) "$WSLOAD" --url "ws://127.0.0.1:$port/" --conns "$CONNS" \
      --duration "$DURATION" --size "$SIZE" --mode binary --window 1)
    n=$(grep -o 'msgs=[0-9]*' <<<"$out" | cut -d= -f2)
  fi
}
