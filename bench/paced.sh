#!/usr/bin/env bash
# The long-lived-connection shape: USERS users (100, then 1,000), each on its own keep-alive
# connection, one small POST /echo every 100 ms for DURATION seconds, against each engine configuration.
# usage: bench/paced.sh     knobs: DURATION (10, seconds per run)
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/target.sh
. "$here/bench/target.sh"
SECONDS_EACH=${DURATION:-10}
(cd "$here" && cargo build -q --release --features server --example demo --example paced_load)
bin=$release/examples/paced_load
echo "| server | users | seconds | sent | received | failures | avg ms | p99 ms |"
echo "|---|---|---|---|---|---|---|---|"
for users in 100 1000; do
  for flags in "--engine server" "--engine reactor --dispatch inline" "--engine reactor --dispatch pool"; do
    # shellcheck disable=SC2086
    "$bin" --users "$users" --seconds "$SECONDS_EACH" -- $flags | tail -n 1
  done
done
