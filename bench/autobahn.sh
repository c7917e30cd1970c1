#!/usr/bin/env bash
# WebSocket conformance: Autobahn|Testsuite's fuzzingclient (every case outside the
# permessage-deflate groups 12 and 13) and bench/autobahn/ws_smoke.py (8 connections, 32 messages
# in flight each, an independent client) against examples/ws_echo on every engine configuration.
# Exits 1 on any FAILED case or smoke failure. Installs its harness itself from PyPI
# (bench/autobahn/install.sh, into $AUTOBAHN_HOME, default ~/.cache/twinhttp-autobahn); reports
# land in $AUTOBAHN_HOME/reports/<configuration>/index.html.
#
#   bench/autobahn.sh                     # all three configurations, about 2 minutes
#   CONFIGS="server" bench/autobahn.sh    # one (server reactor-inline reactor-pool)
# knobs: CONFIGS, PORT (9301), TIMEOUT (900 s for one fuzzingclient run)
# Only 127.0.0.1 is contacted; the server is stopped by its PID.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
CONFIGS=${CONFIGS:-server reactor-inline reactor-pool} PORT=${PORT:-9301} TIMEOUT=${TIMEOUT:-900}
state=${AUTOBAHN_HOME:-$HOME/.cache/twinhttp-autobahn}
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"
trap stop_server EXIT

AUTOBAHN_HOME=$state "$here/bench/autobahn/install.sh"
(cd "$here" && cargo build -q --release --features server --example ws_echo)
echo_bin=$release/examples/ws_echo

status=0
for cfg in $CONFIGS; do
  case "$cfg" in
    server) flags="--engine server" ;;
    reactor-inline) flags="--engine reactor --dispatch inline" ;;
    reactor-pool) flags="--engine reactor --dispatch pool" ;;
    *) echo "unknown configuration $cfg (server reactor-inline reactor-pool)" >&2; exit 2 ;;
  esac
  start_server "twinhttp-$cfg:$PORT:$echo_bin --addr 127.0.0.1:{PORT} $flags"
  echo "== $cfg: ws_smoke.py --connections 8 --window 32"
  if ! timeout 120 "$state/tools/bin/python" "$here/bench/autobahn/ws_smoke.py" \
      "ws://127.0.0.1:$PORT/" --connections 8 --window 32 | tail -n 3; then
    echo "FAIL: ws_smoke against $cfg"; status=1
  fi
  echo "== $cfg: Autobahn fuzzingclient"
  if ! "$state/tools/bin/python" "$here/bench/autobahn/fuzzingclient.py" --timeout "$TIMEOUT" \
      "$state/py27/bin/wstest" "ws://127.0.0.1:$PORT/" "twinhttp-$cfg" "$state/reports/$cfg"; then
    echo "FAIL: Autobahn against $cfg"; status=1
  fi
  stop_server
done
exit $status
