#!/usr/bin/env bash
# What polling 3.11's five system calls per wait cost twinhttp: `hello` (or `ws_echo`) built as released (A)
# and against polling 3.11 patched to wait with one call (B: bench/polling/one-call-wait.patch,
# no timerfd, the timeout given to epoll_wait itself, and the notifier's eventfd read and
# re-armed only when it fired; what polling's master does since smol-rs/polling#250, not
# released). The patch is a measurement, never shipped: B is built in a scratch copy with
# cargo's `--config patch.crates-io.polling.path=...`, and the repository's Cargo.lock is not
# touched.
#
# It prints bench/syscalls.sh's table for both builds, then bench/ab.sh's interleaved wrk A/B
# (rate, server CPU per request and wrk's p99 latency) on one engine configuration.
#
# usage: bench/polling/one_call.sh [ENGINE FLAGS...]   e.g. bench/polling/one_call.sh --engine reactor
#        KIND=ws bench/polling/one_call.sh --engine server    (ws_echo under ws_load instead)
# knobs: REPS DURATION LOADS (bench/ab.sh's), PORT (18190)
# Only 127.0.0.1 is contacted; every server is stopped by its PID.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(--engine reactor)
PORT=${PORT:-18190}
KIND=${KIND:-http}
case $KIND in
  http) example=hello ;;
  ws) example=ws_echo ;;
  *) echo "KIND is http or ws"; exit 2 ;;
esac

cd "$here"
cargo fetch -q
registry_src=$(cargo metadata --format-version 1 | python3 -c '
import json, sys
pkgs = json.load(sys.stdin)["packages"]
print(next(p["manifest_path"] for p in pkgs if p["name"] == "polling" and p["version"] == "3.11.0"))')
work=$(mktemp -d)
trap 'git -C "$here" worktree remove --force "$work/b" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
cp -r "$(dirname "$registry_src")" "$work/polling"
patch -s -d "$work/polling" -p1 < "$here/bench/polling/one-call-wait.patch"
git -C "$here" worktree add --detach "$work/b" HEAD >/dev/null 2>&1
(cd "$work/b" && CARGO_TARGET_DIR="$work/target-b" cargo build -q --release --features server \
  --example "$example" --config "patch.crates-io.polling.path=\"$work/polling\"")
bin_b=$work/target-b/release/examples/$example
(cd "$here" && cargo build -q --release --features server --example "$example" --example ws_load)
# shellcheck source=bench/target.sh
. "$here/bench/target.sh"

echo "## System calls (bench/syscalls.sh)"
"$here/bench/syscalls.sh" "$KIND" \
  "released:$PORT:$release/examples/$example --addr 127.0.0.1:{PORT} ${flags[*]}" \
  "one-call:$PORT:$bin_b --addr 127.0.0.1:{PORT} ${flags[*]}" | sed -n '/^| server/,$p'
echo
echo "## Interleaved wrk (bench/ab.sh: A = released polling, B = one-call wait)"
KIND=$KIND BIN_B=$bin_b PORT=$PORT "$here/bench/ab.sh" HEAD "${flags[@]}" 2>/dev/null
