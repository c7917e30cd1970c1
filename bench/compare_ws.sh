#!/usr/bin/env bash
# Side-by-side WebSocket echo comparison: examples/ws_echo on every engine configuration next to
# the echo peers of bench/peers and bench/peers-go (built here by bench/peers/build.sh),
# interleaved, each server started fresh and stopped by its PID. The load is examples/ws_load
# (a thread per connection, one binary message in flight each); the server's CPU per message is
# read from /proc/PID/stat. Scenarios: a = 64 connections x 32 B, b = 64 x 16 KiB,
# c = 1,000 x 32 B, d = IDLE_N idle WebSockets (bench/peers' idle_hold: server RSS and threads
# with them).
#
# usage: bench/compare_ws.sh [PEER ...]
#        (default: gobwas tungstenite fastwebsockets; also gorilla tokio-tungstenite)
# knobs: REPS (2) DURATION (8) SCEN ("a b c d") IDLE_N (5000) PORT (9211)
#        OUT (bench/results/ws-<time>: raw.tsv, results.md)
# Only 127.0.0.1 is contacted.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
REPS=${REPS:-2} DURATION=${DURATION:-8} SCEN=${SCEN:-"a b c d"} IDLE_N=${IDLE_N:-5000}
PORT=${PORT:-9211} OUT=${OUT:-$here/bench/results/ws-$(date +%Y%m%d-%H%M%S)}
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"
trap stop_server EXIT
# Each idle connection takes a descriptor here and one in the server.
ulimit -n "$(ulimit -Hn)"

[ $# -gt 0 ] || set -- gobwas tungstenite fastwebsockets
echo_bin=$release/examples/ws_echo
servers=(
  "twinhttp-server:$PORT:$echo_bin --addr 127.0.0.1:{PORT} --engine server"
  "twinhttp-reactor-inline:$PORT:$echo_bin --addr 127.0.0.1:{PORT} --engine reactor --dispatch inline"
  "twinhttp-reactor-pool:$PORT:$echo_bin --addr 127.0.0.1:{PORT} --engine reactor --dispatch pool"
)
for peer in "$@"; do servers+=("$(peer_spec "$peer" "$PORT")"); done

echo "building the peers (bench/peers/build.sh), ws_echo and ws_load ..." >&2
"$here/bench/peers/build.sh" >&2
(cd "$here" && cargo build -q --release --features server --example ws_echo --example ws_load)

mkdir -p "$OUT"
raw=$OUT/raw.tsv
raw_header "$raw"
echo "# $(date -u +%FT%TZ), $(nproc) cores, REPS=$REPS DURATION=$DURATION s, ws_load (one message in flight per connection); req/s is messages/s" >>"$raw"
read -ra scens <<<"$SCEN"
total=$((REPS * ${#scens[@]} * ${#servers[@]})) i=0
ticks=$(getconf CLK_TCK)
for rep in $(seq "$REPS"); do
  for scen in "${scens[@]}"; do
    for spec in "${servers[@]}"; do
      i=$((i + 1))
      start_server "$spec"
      case $scen in
        a) conns=64 size=32 ;;
        b) conns=64 size=16384 ;;
        c) conns=1000 size=32 ;;
        d) conns=$IDLE_N size=0 ;;
        *) echo "unknown scenario $scen (a b c d)" >&2; exit 2 ;;
      esac
      if [ "$scen" = d ]; then
        hold_idle ws "$IDLE_N"
        stop_server
        raw_row "$raw" ws "$name" "d: idle" 0 "$rep" "" "" "" "" "" "$rss0" "$threads0"
        raw_row "$raw" ws "$name" "d: idle" "$held" "$rep" "" "" "" "" "$((IDLE_N - held))" "$rss" "$threads"
        printf '[%d/%d] %s d: %s idle held, RSS %s KiB, %s threads\n' "$i" "$total" "$name" "$held" "$rss" "$threads" >&2
        continue
      fi
      before=$(cpu_ticks "$spid")
      log=$(mktemp)
      timeout $((DURATION + 60)) "$WSLOAD" --addr "127.0.0.1:$PORT" --conns "$conns" --size "$size" \
        --secs "$DURATION" >"$log" 2>&1 &
      load=$!
      sleep "$((DURATION / 2)).5"
      threads=$(proc_status "$spid" Threads) # mid-run: a thread-per-connection server shows them
      wait "$load" || true
      after=$(cpu_ticks "$spid")
      out=$(cat "$log") && rm -f "$log"
      stop_server
      msgs=$(awk '/^ws_load:/ {print $2}' <<<"$out")
      rate=$(awk '/^ws_load:/ {print $(NF - 1)}' <<<"$out")
      cpu_us=""
      if [ "${msgs:-0}" -gt 0 ]; then
        cpu_us=$(awk -v t=$((after - before)) -v hz="$ticks" -v n="$msgs" 'BEGIN {printf "%.2f", t / hz * 1e6 / n}')
      fi
      raw_row "$raw" ws "$name" "$scen: ${size} B" "$conns" "$rep" "${rate:-0}" "" "" "$cpu_us" "" "" "$threads"
      printf '[%d/%d] %s %s c=%s rep %s: %s msgs/s, %s µs CPU/msg\n' "$i" "$total" "$name" "$scen" "$conns" "$rep" "${rate:-0}" "${cpu_us:-?}" >&2
    done
  done
done
"$peers_rs/twinhttp-report" table "$raw" | tee "$OUT/results.md"
echo "results: $OUT/results.md (raw: $raw); req/s there is messages/s" >&2
