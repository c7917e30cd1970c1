#!/usr/bin/env bash
# WebSocket conformance: Autobahn|Testsuite's fuzzingclient (every case outside the
# permessage-deflate groups 12 and 13) and the shared ws_smoke.py client (8 connections, 32
# messages in flight each) against examples/ws_echo on every engine configuration. Exits 1 on
# any FAILED case or smoke failure. Installs the harness itself (../shared/tools/autobahn).
#
#   bench/autobahn.sh                 # all three configurations
#   CONFIGS="server" bench/autobahn.sh
set -euo pipefail
cd "$(dirname "$0")/.."
TOOLS="$(cd ../shared/tools/autobahn && pwd)"
STATE="${AUTOBAHN_HOME:-$HOME/.cache/autobahn-harness}"
CONFIGS="${CONFIGS:-server reactor-inline reactor-pool}"
PORT="${PORT:-9301}"

bash "$TOOLS/install.sh" >/dev/null
cargo build --release --features server --example ws_echo
BIN=./target/release/examples/ws_echo

PID=""
stop() { if [[ -n "$PID" ]]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; PID=""; fi; }
trap stop EXIT

status=0
for cfg in $CONFIGS; do
  case "$cfg" in
    server) flags=(--engine server) ;;
    reactor-inline) flags=(--engine reactor --dispatch inline) ;;
    reactor-pool) flags=(--engine reactor --dispatch pool) ;;
    *) echo "unknown configuration $cfg" >&2; exit 2 ;;
  esac
  "$BIN" --addr "127.0.0.1:$PORT" "${flags[@]}" 2>/dev/null &
  PID=$!
  for _ in $(seq 50); do
    if bash -c "exec 3<>/dev/tcp/127.0.0.1/$PORT" 2>/dev/null; then break; fi
    sleep 0.1
  done
  echo "== $cfg: ws_smoke.py --connections 8 --window 32"
  if ! timeout 120 "$STATE/venv/bin/python" "$TOOLS/ws_smoke.py" "ws://127.0.0.1:$PORT/" \
      --connections 8 --window 32 | tail -n 1; then
    echo "FAIL: ws_smoke against $cfg"; status=1
  fi
  echo "== $cfg: Autobahn fuzzingclient"
  if ! TIMEOUT=600 bash "$TOOLS/run_autobahn.sh" "127.0.0.1:$PORT" "twinhttp-$cfg" | grep -v '^run_autobahn: spec'; then
    echo "FAIL: Autobahn against $cfg"; status=1
  fi
  stop
done
exit $status
