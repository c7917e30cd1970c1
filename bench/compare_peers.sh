#!/usr/bin/env bash
# Side-by-side wrk comparison of twinhttp's hello example (server engine with and without parking,
# reactor with inline and pool dispatch) against the peer servers in bench/peers and
# bench/peers-go (built here by bench/peers/build.sh), interleaved: for each repetition, each
# test, each server, a fresh server process is started, warmed up, measured, its CPU time read
# from /proc/PID/stat, and stopped by its PID. Tests: ka (keep-alive, 64 connections), c256
# (256), pipe (16 requests per write, bench/pipeline.lua), close (Connection: close, 32).
#
# usage: bench/compare_peers.sh [PEER ...]   (default: hyper may actix ehttpd tinyhttp gostd)
# knobs: REPS (3) DURATION (5) WARMUP (1) TESTS ("ka c256 pipe close") PORT (18111)
#        OUT (bench/results/run-<time>: raw.tsv, results.md)
# Only 127.0.0.1 is contacted.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
REPS=${REPS:-3} DURATION=${DURATION:-5} WARMUP=${WARMUP:-1} TESTS=${TESTS:-"ka c256 pipe close"}
PORT=${PORT:-18111} OUT=${OUT:-$here/bench/results/run-$(date +%Y%m%d-%H%M%S)}
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"
need_wrk
trap stop_server EXIT

[ $# -gt 0 ] || set -- hyper may actix ehttpd tinyhttp gostd
hello=$release/examples/hello
servers=(
  "twinhttp-server:$PORT:$hello --addr 127.0.0.1:{PORT}"
  "twinhttp-server-nopark:$PORT:$hello --addr 127.0.0.1:{PORT} --no-park --threads 300"
  "twinhttp-reactor-inline:$PORT:$hello --addr 127.0.0.1:{PORT} --engine reactor --dispatch inline"
  "twinhttp-reactor-pool:$PORT:$hello --addr 127.0.0.1:{PORT} --engine reactor --dispatch pool"
)
for peer in "$@"; do servers+=("$(peer_spec "$peer" "$PORT")"); done

echo "building the peers (bench/peers/build.sh) and twinhttp's hello ..." >&2
"$here/bench/peers/build.sh" >&2
(cd "$here" && cargo build -q --release --features server --example hello)

mkdir -p "$OUT"
raw=$OUT/raw.tsv
raw_header "$raw"
echo "# $(date -u +%FT%TZ), $(nproc) cores, REPS=$REPS DURATION=$DURATION s WARMUP=$WARMUP s, wrk -t2 --latency" >>"$raw"
url="http://127.0.0.1:$PORT/"
read -ra tests <<<"$TESTS"
total=$((REPS * ${#tests[@]} * ${#servers[@]})) i=0
for rep in $(seq "$REPS"); do
  for test in "${tests[@]}"; do
    for spec in "${servers[@]}"; do
      i=$((i + 1))
      start_server "$spec"
      case $test in
        ka) conns=64; measure_wrk "$conns" "$url" ;;
        c256) conns=256; measure_wrk "$conns" "$url" ;;
        pipe) conns=64; measure_wrk "$conns" -s "$here/bench/pipeline.lua" "$url" -- 16 ;;
        close) conns=32; measure_wrk "$conns" -H "Connection: close" "$url" ;;
        *) echo "unknown test $test (ka c256 pipe close)" >&2; exit 2 ;;
      esac
      stop_server
      raw_row "$raw" peers "$name" "$test" "$conns" "$rep" "$rps" "$p50" "$p99" "$cpu_us" "$errors" "" ""
      printf '[%d/%d] %s %s c=%s rep %s: %s req/s, p99 %s ms, %s µs CPU/req, %s errors\n' \
        "$i" "$total" "$name" "$test" "$conns" "$rep" "$rps" "${p99:-?}" "${cpu_us:-?}" "$errors" >&2
    done
  done
done
"$peers_rs/twinhttp-report" table "$raw" | tee "$OUT/results.md"
echo "results: $OUT/results.md (raw: $raw)" >&2
