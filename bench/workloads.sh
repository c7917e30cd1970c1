#!/usr/bin/env bash
# Blocking versus event-driven on the same handler: wrk against `hello`'s routes `/` (no work),
# `/cpu?us=N` (N µs of CPU) and `/sleep?ms=N` (a blocking wait, like a database call), for each
# engine configuration, each server started fresh, configurations interleaved per repetition.
# Prints a markdown table of medians (min–max) for req/s, p50 and p99.
#
# usage: bench/workloads.sh        knobs: REPS (3) DURATION (5) CONNS (64) CPU_US (100) SLEEP_MS (10)
# Only 127.0.0.1 is contacted; every server is stopped by its PID.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/target.sh
. "$here/bench/target.sh"
REPS=${REPS:-3}; DURATION=${DURATION:-5}; CONNS=${CONNS:-64}; CPU_US=${CPU_US:-100}; SLEEP_MS=${SLEEP_MS:-10}
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
(cd "$here" && cargo build -q --release --features server --example hello)
hello=$release/examples/hello
port=18150
configs=("server|--engine server" "reactor-inline|--engine reactor --dispatch inline" "reactor-pool|--engine reactor --dispatch pool")
paths=("/" "/cpu?us=$CPU_US" "/sleep?ms=$SLEEP_MS")
raw=$(mktemp)

for rep in $(seq 1 "$REPS"); do
  for path in "${paths[@]}"; do
    for cfg in "${configs[@]}"; do
      name=${cfg%%|*}; flags=${cfg#*|}
      # shellcheck disable=SC2086
      "$hello" --addr "127.0.0.1:$port" $flags 2>/dev/null & pid=$!
      for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
      out=$(timeout $((DURATION + 20)) wrk -t2 -c"$CONNS" -d"${DURATION}s" --latency "http://127.0.0.1:$port$path" 2>&1 || true)
      kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
      rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
      p50=$(awk '$1=="50%" {print $2}' <<<"$out")
      p99=$(awk '$1=="99%" {print $2}' <<<"$out")
      printf '%s\t%s\t%s\t%s\t%s\n' "$path" "$name" "${rps:-0}" "${p50:-?}" "${p99:-?}" >> "$raw"
      echo "rep $rep $path $name: ${rps:-0} req/s p50 ${p50:-?} p99 ${p99:-?}" >&2
    done
  done
done

# Latencies from wrk come as 1.23ms / 456.78us / 1.02s; medians are taken in milliseconds.
python3 - "$raw" "$REPS" "$CONNS" <<'PY'
import sys, statistics, collections
rows = collections.defaultdict(list)
def ms(v):
    for unit, f in (("ms", 1), ("us", 1e-3), ("s", 1e3)):
        if v.endswith(unit):
            return float(v[:-len(unit)]) * f
    return float("nan")
for line in open(sys.argv[1]):
    path, name, rps, p50, p99 = line.rstrip("\n").split("\t")
    rows[(path, name)].append((float(rps), ms(p50), ms(p99)))
print(f"Medians (min–max) of {sys.argv[2]} runs, wrk -t2 -c{sys.argv[3]}.\n")
print("| route | engine | req/s | p50 ms | p99 ms |")
print("|---|---|---|---|---|")
for (path, name), v in rows.items():
    cols = []
    for i, fmt in ((0, "{:,.0f}"), (1, "{:.2f}"), (2, "{:.2f}")):
        xs = [x[i] for x in v]
        cols.append(f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}–{fmt.format(max(xs))})")
    print(f"| `{path}` | {name} | " + " | ".join(cols) + " |")
PY
rm -f "$raw"
