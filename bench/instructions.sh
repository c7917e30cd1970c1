#!/usr/bin/env bash
# User-space instructions per request (valgrind's callgrind) beside system calls per request (the
# kernel's tracepoints, as bench/syscalls.sh counts them), for twinhttp's engine configurations,
# the peers and the floor (bench/peers/floor_hello: epoll, read, write a fixed response). Both
# repeat from run to run where wall-clock rates here move 15-20%.
#
# Each server serves an exact number of requests from bench/peers/fixed_load (64 connections):
#   keepalive  one GET at a time per connection      pipelined  16 GETs per write
#   close      Connection: close, a connection each  post1k     a POST with a 1 KiB body
#   browser    as keepalive, each GET with the 16 fields a browser sends to open a page
# Instructions: the server runs under callgrind for N requests and again for 3N; the difference
# of the two totals over 2N is per request (start-up and shutdown cancel out). System calls: the
# server runs natively, serves N to warm up, then `perf stat -p` counts during 2N more.
#
# usage: bench/instructions.sh [SERVER ...]
#   SERVER: server nopark inline pool (twinhttp's hello: the server engine with and without
#   parking, the reactor inline and pool) hyper may actix floor; default all of them. Also,
#   never by default: app (examples/app on the reactor inline, GET /api/items through its router
#   and layers: request ids, CORS, JSON; no peer serves the same, so it has no ratio; it skips
#   post1k, which no route of it takes).
# knobs: LOADS ("keepalive pipelined close post1k browser") N (16000 keepalive, post1k and
#   browser, 32000 pipelined, 2000 close) PORT (18401) OUT (bench/results/run-instructions-<time>:
#   raw.tsv, results.md)
# Builds what it runs (bench/peers/build.sh without Go, the hello example, the app example when
# named) and installs valgrind and perf from Debian's packages if missing. Only 127.0.0.1 is
# contacted; every server is stopped by its PID. About 5 minutes for everything on 2 cores (5.3
# with app), after the builds.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
LOADS=${LOADS:-"keepalive pipelined close post1k browser"} PORT=${PORT:-18401}
OUT=${OUT:-$here/bench/results/run-instructions-$(date +%Y%m%d-%H%M%S)}
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"
trap stop_server EXIT
[ $# -gt 0 ] || set -- server nopark inline pool hyper may actix floor

for tool in valgrind perf; do
  command -v "$tool" >/dev/null && continue
  apt-get update -qq && apt-get install -y -qq valgrind linux-perf >/dev/null
done
echo "building the peers and twinhttp's hello ..." >&2
(cd "$here" && cargo build -q --release --manifest-path bench/peers/Cargo.toml)
(cd "$here" && cargo build -q --release --features server --example hello)
case " $* " in
  *" app "*) (cd "$here" && cargo build -q --release --features server,json --example app) ;;
esac
load=$peers_rs/fixed_load

# command NAME: the server's command line ({PORT} for its port).
command_of() {
  local hello="$release/examples/hello --addr 127.0.0.1:{PORT}"
  case "$1" in
    server) echo "$hello --engine server" ;;
    nopark) echo "$hello --engine server --no-park" ;;
    inline) echo "$hello --engine reactor --dispatch inline" ;;
    pool) echo "$hello --engine reactor --dispatch pool" ;;
    app) echo "$release/examples/app --addr 127.0.0.1:{PORT} --engine reactor --dispatch inline" ;;
    *) peer_command "$1" ;;
  esac
}

# target_of NAME: the path its load asks for.
target_of() {
  case "$1" in
    app) echo /api/items ;;
    *) echo / ;;
  esac
}

# requests LOAD: N for the load.
requests() {
  case "$1" in
    pipelined) echo "${N:-32000}" ;;
    close) echo "${N:-2000}" ;;
    *) echo "${N:-16000}" ;;
  esac
}

# callgrind_total NAME LOAD COUNT: sets total to the instructions NAME's process runs, under
# callgrind, from its start to its exit after serving COUNT requests of LOAD. (Called directly,
# not in a command substitution, so that a failed load stops the script and the server's PID is
# the one the EXIT trap stops.)
callgrind_total() {
  local out=$work/callgrind.out
  rm -f "$out"
  START_SECS=120 start_server "$1:$PORT:valgrind --tool=callgrind --callgrind-out-file=$out $(command_of "$1")"
  if ! FIXED_LOAD_PATH=$(target_of "$1") timeout 900 "$load" "$PORT" "$2" "$3" >&2; then
    echo "instructions.sh: the load failed against $1 under callgrind ($2, $3 requests)" >&2
    exit 1
  fi
  STOP_SECS=60 stop_server
  # The file's summary line: every thread's instructions (Ir).
  total=$(awk '/^(summary|totals):/ {print $2; exit}' "$out")
  [ -n "$total" ] || { echo "instructions.sh: no callgrind total for $1" >&2; exit 1; }
}

# syscalls NAME LOAD COUNT: sets calls and switches, per request, counted while NAME (native)
# serves 2 x COUNT requests of LOAD after COUNT to warm up.
syscalls() {
  local counts=$work/perf.out perf
  start_server "$1:$PORT:$(command_of "$1")"
  FIXED_LOAD_PATH=$(target_of "$1") "$load" "$PORT" "$2" "$3" >/dev/null
  perf stat -x, -e raw_syscalls:sys_enter,context-switches -p "$spid" -o "$counts" &
  perf=$!
  sleep 0.5
  FIXED_LOAD_PATH=$(target_of "$1") "$load" "$PORT" "$2" $((2 * $3)) >/dev/null
  kill -INT "$perf"
  wait "$perf" || true
  stop_server
  calls=$(awk -F, -v n=$((2 * $3)) '$3 == "raw_syscalls:sys_enter" {printf "%.2f", $1 / n}' "$counts")
  switches=$(awk -F, -v n=$((2 * $3)) '$3 == "context-switches" {printf "%.3f", $1 / n}' "$counts")
}

mkdir -p "$OUT"
work=$(mktemp -d)
trap 'stop_server; rm -rf "$work"' EXIT
raw=$OUT/raw.tsv
printf 'load\tserver\tn\tinstructions_n\tinstructions_3n\tinstructions_per_request\tsyscalls_per_request\tswitches_per_request\n' >"$raw"
started=$(date +%s)
for load_name in $LOADS; do
  n=$(requests "$load_name")
  for name in "$@"; do
    # The app has no route that takes post1k's octet-stream body (its POST wants JSON: 415).
    [ "$name/$load_name" = app/post1k ] && continue
    callgrind_total "$name" "$load_name" "$n"
    one=$total
    callgrind_total "$name" "$load_name" $((3 * n))
    three=$total
    per=$(awk -v a="$one" -v b="$three" -v n="$n" 'BEGIN {printf "%.0f", (b - a) / (2 * n)}')
    syscalls "$name" "$load_name" "$n"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$load_name" "$name" "$n" "$one" "$three" "$per" \
      "$calls" "$switches" >>"$raw"
    echo "$load_name $name: $per instructions, $calls system calls per request" >&2
  done
done
elapsed=$(($(date +%s) - started))

# The table: per load, each server with its ratios to the best peer (the least of hyper, may,
# actix that ran) and to the floor.
python3 - "$raw" "$elapsed" "$(nproc)" "$(uname -r)" "$(valgrind --version)" >"$OUT/results.md" <<'PY'
import sys, csv, collections
raw, elapsed, cores, kernel, valgrind = sys.argv[1:]
rows = list(csv.DictReader(open(raw), delimiter="\t"))
by_load = collections.OrderedDict()
for r in rows:
    by_load.setdefault(r["load"], []).append(r)
peers = {"hyper", "may", "actix"}
names = {"app": "twinhttp app (router, layers)", "server": "twinhttp server", "nopark": "twinhttp server, no parking",
         "inline": "twinhttp reactor inline", "pool": "twinhttp reactor pool",
         "hyper": "hyper", "may": "may_minihttp", "actix": "actix-web", "floor": "floor"}
def ratio(x, base):
    return f"{x / base:.2f}×" if base else "–"
print(f"User-space instructions per request (callgrind: (3N − N) / 2N) and system calls per request")
print(f"(perf, natively, 2N after N), 64 connections from bench/peers/fixed_load; {cores} cores,")
print(f"Linux {kernel}, {valgrind}; {elapsed} s. Ratios: to the best of the peers that ran")
print("(hyper, may_minihttp, actix-web) on the load, and to the floor.")
print()
print("| load | server | instructions | × best peer | × floor | system calls | × best peer | × floor | context switches |")
print("|---|---|---|---|---|---|---|---|---|")
for load, rs in by_load.items():
    ins = {r["server"]: float(r["instructions_per_request"]) for r in rs}
    sc = {r["server"]: float(r["syscalls_per_request"] or "nan") for r in rs}
    best_i = min((v for k, v in ins.items() if k in peers), default=None)
    best_s = min((v for k, v in sc.items() if k in peers), default=None)
    fi, fs = ins.get("floor"), sc.get("floor")
    for r in rs:
        s = r["server"]
        # The app answers another route through its layers: no server here does the same.
        alone = s == "app"
        print(f"| {load} (N={r['n']}) | {names.get(s, s)} | {ins[s]:,.0f} | "
              f"{'–' if alone else ratio(ins[s], best_i)} | {'–' if alone else ratio(ins[s], fi)} | "
              f"{sc[s]:.2f} | {'–' if alone else ratio(sc[s], best_s)} | "
              f"{'–' if alone else ratio(sc[s], fs)} | {r['switches_per_request']} |")
PY
cat "$OUT/results.md"
echo "raw counts: $raw" >&2
