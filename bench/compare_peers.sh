#!/usr/bin/env bash
# Side-by-side wrk comparison of twinhttp's hello example (server engine with and without parking,
# reactor with inline and pool dispatch) against the peer servers in
# ../shared/peers (hyper, may_minihttp, actix-web, ehttpd, tiny_http, ...), interleaved.
#
# usage: bench/compare_peers.sh [PEER ...]        (default peers: hyper may actix ehttpd tinyhttp)
# knobs: REPS (3) DURATION (5) WARMUP (1) TESTS ("ka c256 pipe close") OUT (bench/results/run-<time>)
# Everything runs on 127.0.0.1; every server is started fresh per measurement and stopped by PID.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
peers_src=${PEERS:-$here/../shared/peers}
[ -d "$peers_src" ] || { echo "no peers folder at $peers_src (set PEERS=...)"; exit 2; }
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }

# The shared folder is read-only: build and run the peers from a private copy.
work=${PEERS_WORK:-/tmp/twinhttp-peers}
if [ ! -x "$work/rs/target/release/hyper_hello" ]; then
  # Copy over (not delete) a previous copy: its built WebSocket peers (bench/compare_ws.sh) stay.
  mkdir -p "$work" && cp -rT "$peers_src" "$work" && chmod -R u+w "$work"
  "$work/build.sh"
fi
(cd "$here" && cargo build --release --features server --example hello)
hello_reactor_flags="--engine reactor --dispatch"
hello=$here/target/release/examples/hello

[ $# -gt 0 ] || set -- hyper may actix ehttpd tinyhttp
out=${OUT:-$here/bench/results/run-$(date +%Y%m%d-%H%M%S)}
REPS=${REPS:-3} DURATION=${DURATION:-5} WARMUP=${WARMUP:-1} TESTS=${TESTS:-"ka c256 pipe close"} OUT=$out \
  "$work/run_all.sh" "$@" \
  "twinhttp-server:18111:$hello --addr 127.0.0.1:{PORT}" \
  "twinhttp-server-nopark:18112:$hello --addr 127.0.0.1:{PORT} --no-park --threads 300" \
  "twinhttp-reactor-inline:18113:$hello --addr 127.0.0.1:{PORT} $hello_reactor_flags inline" \
  "twinhttp-reactor-pool:18114:$hello --addr 127.0.0.1:{PORT} $hello_reactor_flags pool"
echo "results: $out/results.md"
