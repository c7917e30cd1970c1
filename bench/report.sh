#!/usr/bin/env bash
# The blocking-versus-event-driven comparison as charts, in one command. For each repetition,
# workload (`/`, `/cpu?us=CPU_US`, `/sleep?ms=SLEEP_MS` of examples/hello) and concurrency
# (CONNS), every engine configuration (and every peer in PEERS) is started fresh, loaded by
# wrk -t2 --latency for DURATION seconds after WARMUP, its CPU time read from /proc/PID/stat, and
# stopped by its PID. Then idle connections: examples/idle_conns holds each count in IDLE, HTTP
# keep-alive then WebSocket, against every configuration (the peers: bench/peers' idle_hold,
# HTTP), and reads the server's RSS and threads. Writes OUT/raw.tsv, then twinhttp-report draws
# OUT/*.svg (throughput, p99 and server CPU per request against concurrency per workload; RSS
# and threads against idle connections) and writes OUT/summary.md beside them.
#
# usage: bench/report.sh
# knobs: CONNS ("16 64 256 1024") DURATION (5) WARMUP (1) REPS (3) CPU_US (100) SLEEP_MS (10)
#        IDLE ("1000 2000 5000 10000") CONFIGS ("server reactor-inline reactor-pool")
#        PEERS ("": any of hyper actix may tinyhttp ehttpd gostd, drawn on the same charts)
#        PORT (18160) OUT (bench/results/report-<time>)
# At the defaults: about 15 minutes of load and 3 of idle connections on 2 cores, plus builds.
# Only 127.0.0.1 is contacted.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
CONNS=${CONNS:-16 64 256 1024} DURATION=${DURATION:-5} WARMUP=${WARMUP:-1} REPS=${REPS:-3}
CPU_US=${CPU_US:-100} SLEEP_MS=${SLEEP_MS:-10} IDLE=${IDLE:-1000 2000 5000 10000}
CONFIGS=${CONFIGS:-server reactor-inline reactor-pool} PEERS=${PEERS:-} PORT=${PORT:-18160}
OUT=${OUT:-$here/bench/results/report-$(date +%Y%m%d-%H%M%S)}
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"
need_wrk
trap stop_server EXIT
# wrk's connections, and the idle ones: a descriptor each here and in the server.
ulimit -n "$(ulimit -Hn)"

flags_of() {
  case "$1" in
    server) echo "--engine server" ;;
    reactor-inline) echo "--engine reactor --dispatch inline" ;;
    reactor-pool) echo "--engine reactor --dispatch pool" ;;
    *) echo "unknown configuration $1 (server reactor-inline reactor-pool)" >&2; return 1 ;;
  esac
}
hello=$release/examples/hello
servers=()
for cfg in $CONFIGS; do
  servers+=("twinhttp-$cfg:$PORT:$hello --addr 127.0.0.1:{PORT} $(flags_of "$cfg")")
done
for peer in $PEERS; do servers+=("$(peer_spec "$peer" "$PORT")"); done

echo "building hello, idle_conns and bench/peers ..." >&2
(cd "$here" && cargo build -q --release --features server --example hello --example idle_conns)
if [ -n "$PEERS" ]; then
  "$here/bench/peers/build.sh" >&2
else
  cargo build -q --release --manifest-path "$here/bench/peers/Cargo.toml" -p twinhttp-report
fi

mkdir -p "$OUT"
raw=$OUT/raw.tsv
raw_header "$raw"
{
  echo "# $(date -u +%F), $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')), wrk on the same cores as the server"
  echo "# wrk -t2 --latency, $DURATION s after $WARMUP s of warm-up, repetitions: $REPS, servers interleaved; connections: $CONNS"
  echo "# /cpu?us=$CPU_US: CPU work in the handler; /sleep?ms=$SLEEP_MS: a blocking wait in the handler (a timer on the async peers)"
  echo "# idle: one request (or a WebSocket upgrade) per connection, then silent; RSS and threads of the server with them held"
} >>"$raw"

read -ra conns_list <<<"$CONNS"
paths=("/" "/cpu?us=$CPU_US" "/sleep?ms=$SLEEP_MS")
total=$((REPS * ${#paths[@]} * ${#conns_list[@]} * ${#servers[@]})) i=0
for rep in $(seq "$REPS"); do
  for path in "${paths[@]}"; do
    for conns in "${conns_list[@]}"; do
      for spec in "${servers[@]}"; do
        i=$((i + 1))
        printf '[%d/%d] %s %s c=%s rep %s ... ' "$i" "$total" "${spec%%:*}" "$path" "$conns" "$rep" >&2
        start_server "$spec"
        measure_wrk "$conns" "http://127.0.0.1:$PORT$path"
        stop_server
        raw_row "$raw" load "$name" "$path" "$conns" "$rep" "$rps" "$p50" "$p99" "$cpu_us" "$errors" "" ""
        printf '%s req/s, p99 %s ms, %s µs CPU/req, %s errors\n' "$rps" "${p99:-?}" "${cpu_us:-?}" "$errors" >&2
      done
    done
  done
done

# Idle connections. `idle_conns` prints markdown rows:
# | label | held | failed | threads before → after | RSS before → after (KiB) | KiB/conn | re-served |
read -ra idle_list <<<"$IDLE"
read -ra peer_list <<<"$PEERS"
read -ra cfg_list <<<"$CONFIGS"
total=$((${#idle_list[@]} * (${#cfg_list[@]} + ${#peer_list[@]}))) i=0
for n in "${idle_list[@]}"; do
  for cfg in "${cfg_list[@]}"; do
    i=$((i + 1))
    printf '[%d/%d] idle twinhttp-%s %s connections ... ' "$i" "$total" "$cfg" "$n" >&2
    # shellcheck disable=SC2046 # the flags are words
    out=$(timeout 600 "$release/examples/idle_conns" "$n" -- $(flags_of "$cfg") 2>/dev/null || true)
    for kind in http ws; do
      label=HTTP
      [ "$kind" = ws ] && label=WebSocket
      row=$(grep "^| .*, $label |" <<<"$out" | head -n 1 || true)
      if [ -z "$row" ]; then
        printf '%s: idle_conns printed no row (skipped); ' "$kind" >&2
        continue
      fi
      IFS='|' read -r _ _ held failed threads rss _ <<<"$row"
      read -r t0 _ t1 <<<"$threads"
      read -r r0 _ r1 <<<"$rss"
      raw_row "$raw" idle "twinhttp-$cfg" "$kind" 0 1 "" "" "" "" "" "$r0" "$t0"
      raw_row "$raw" idle "twinhttp-$cfg" "$kind" "${held// /}" 1 "" "" "" "" "${failed// /}" "$r1" "$t1"
      printf '%s: %s held, RSS %s KiB, %s threads; ' "$kind" "${held// /}" "$r1" "$t1" >&2
    done
    echo >&2
  done
  for peer in "${peer_list[@]}"; do
    i=$((i + 1))
    printf '[%d/%d] idle %s %s connections ... ' "$i" "$total" "$peer" "$n" >&2
    start_server "$(peer_spec "$peer" "$PORT")"
    hold_idle http "$n"
    stop_server
    raw_row "$raw" idle "$peer" http 0 1 "" "" "" "" "" "$rss0" "$threads0"
    raw_row "$raw" idle "$peer" http "$held" 1 "" "" "" "" "$((n - held))" "$rss" "$threads"
    printf 'http: %s held, RSS %s KiB, %s threads\n' "$held" "$rss" "$threads" >&2
  done
done

"$peers_rs/twinhttp-report" charts "$OUT"
echo "report: $OUT/summary.md" >&2
