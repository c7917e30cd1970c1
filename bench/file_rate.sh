#!/usr/bin/env bash
# Large-file downloads, plain and over TLS, on every engine configuration: the `app` example
# serves a file of SIZE_MB (200) MiB from `--static`, and curl downloads it REPS (3) times per
# configuration, the configurations interleaved within each repetition. Plain TCP sends the file
# with `sendfile(2)`; TLS reads and encrypts it in 16 KiB pieces. Reports each download's rate
# and the server's CPU time per download (its threads' run time, /proc/PID/schedstat), medians
# (min–max).
#
# usage: bench/file_rate.sh        knobs: REPS (3) SIZE_MB (200) PORT (18444) THREADS (1)
# One event loop (THREADS) on the reactor, so that a configuration's cost is one thread's.
# Only 127.0.0.1 is contacted; every server is stopped by its PID.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
REPS=${REPS:-3}; SIZE_MB=${SIZE_MB:-200}; PORT=${PORT:-18444}; THREADS=${THREADS:-1}
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"
command -v curl >/dev/null || { apt-get update -qq && apt-get install -y -qq curl; }
command -v openssl >/dev/null || { apt-get update -qq && apt-get install -y -qq openssl; }

echo "building twinhttp's app (all features) ..." >&2
(cd "$here" && cargo build -q --release --all-features --example app)

work=$(mktemp -d /tmp/twinhttp-file-rate.XXXXXX)  # no spaces: it goes into a command line
trap 'stop_server; rm -rf "$work"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj /CN=localhost -addext subjectAltName=DNS:localhost \
  -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
mkdir "$work/www"
head -c $((SIZE_MB << 20)) /dev/urandom > "$work/www/big.bin"
app="$release/examples/app --addr 127.0.0.1:{PORT} --static $work/www"
tls="--tls-cert $work/cert.pem --tls-key $work/key.pem"
configs=(
  "server::--engine server"
  "reactor inline::--engine reactor --dispatch inline --threads $THREADS"
  "reactor pool::--engine reactor --dispatch pool --threads $THREADS"
)
raw=$work/raw
# The server's CPU time so far, in nanoseconds: the scheduler's count for each of its threads
# (finer than /proc's 10 ms ticks; its threads live as long as the server).
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {print s}'; }
for rep in $(seq 1 "$REPS"); do
  for scheme in http https; do
    for config in "${configs[@]}"; do
      label=${config%%::*}; args=${config#*::}
      extra=""; [ "$scheme" = https ] && extra=$tls
      start_server "$label:$PORT:$app $args $extra"
      before=$(cpu_ns "$spid")
      rate=$(curl -sS --cacert "$work/cert.pem" -o /dev/null -w '%{speed_download}' \
        --connect-to "localhost:$PORT:127.0.0.1:$PORT" "$scheme://localhost:$PORT/static/big.bin")
      after=$(cpu_ns "$spid")
      stop_server
      printf '%s\t%s\t%s\t%s\n' "$scheme" "$label" "$rate" "$((after - before))" >> "$raw"
      echo "rep $rep $scheme $label: $((${rate%.*} >> 20)) MiB/s" >&2
    done
  done
done

python3 - "$raw" "$REPS" "$SIZE_MB" <<'PY'
import sys, statistics, collections
raw, reps, size = sys.argv[1], sys.argv[2], sys.argv[3]
rows = collections.defaultdict(list)
order = []
for line in open(raw):
    scheme, label, rate, cpu = line.rstrip("\n").split("\t")
    if label not in order:
        order.append(label)
    rows[(scheme, label)].append((float(rate) / 2**20, float(cpu) / 1e6))
def cell(xs, fmt):
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}–{fmt.format(max(xs))})"
print(f"medians (min–max) of {reps} interleaved downloads of a {size} MiB file by curl\n")
print("| configuration | plain MiB/s | server CPU ms | TLS MiB/s | server CPU ms |")
print("|---|---|---|---|---|")
for label in order:
    cells = []
    for scheme in ("http", "https"):
        xs = rows[(scheme, label)]
        cells += [cell([x[0] for x in xs], "{:.0f}"), cell([x[1] for x in xs], "{:.0f}")]
    print(f"| {label} | " + " | ".join(cells) + " |")
PY
