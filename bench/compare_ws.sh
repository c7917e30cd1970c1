#!/usr/bin/env bash
# Side-by-side WebSocket echo comparison: examples/ws_echo on every engine configuration next to
# the peer servers of ../shared/peers/ws (Go gobwas and gorilla, tungstenite thread per
# connection, fastwebsockets, tokio-tungstenite), with its wsload client, interleaved, each
# server started fresh. Scenarios: a = 64 x 32 B, b = 64 x 16 KiB, c = 1,000 x 32 B,
# d = IDLE_N idle WebSockets (server RSS and threads).
#
# usage: bench/compare_ws.sh [PEER ...]   (default peers: gobwas tung_thread fastws)
# knobs: REPS (2) DUR (8) SCEN ("a b c d") IDLE_N (5000) OUTDIR
# Everything runs on 127.0.0.1; servers are stopped by PID (run_ws.sh).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
peers_src=${PEERS:-$here/../shared/peers}/ws
[ -d "$peers_src" ] || { echo "no peers folder at $peers_src (set PEERS=...)"; exit 2; }
work=${PEERS_WORK:-/tmp/twinhttp-peers}/ws
if [ ! -x "$work/rs/target/release/wsload" ] || [ ! -x "$work/go/bin/ws_gobwas" ]; then
  # Copy over (not delete) a previous copy, keeping what was already built there.
  mkdir -p "$work" && cp -rT "$peers_src" "$work" && chmod -R u+w "$work"
  "$work/build.sh"
fi
(cd "$here" && cargo build --release --features server --example ws_echo)
bin=$here/target/release/examples/ws_echo
[ $# -gt 0 ] || set -- gobwas tung_thread fastws
OUTDIR=${OUTDIR:-$here/bench/results/ws-$(date +%Y%m%d-%H%M%S)} "$work/run_ws.sh" "$@" \
  "tw-server:9211:exec $bin --addr 127.0.0.1:9211 --engine server" \
  "tw-inline:9212:exec $bin --addr 127.0.0.1:9212 --engine reactor --dispatch inline" \
  "tw-pool:9213:exec $bin --addr 127.0.0.1:9213 --engine reactor --dispatch pool"
