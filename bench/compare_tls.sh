#!/usr/bin/env bash
# TLS: twinhttp's `hello` on every engine configuration beside hyper + tokio-rustls and actix-web +
# rustls (bench/peers, built here), all on rustls 0.23 with the ring provider and one certificate
# (P-256, made here with openssl). Two loads under wrk -t2 over https: keep-alive (64 connections)
# and a new connection per request (`Connection: close`, 16 connections: the handshake rate).
# Beside the rate it reads each server's CPU time per request (utime + stime from /proc), which
# the load generator's share of the two cores does not skew the way it skews throughput. Servers
# alternate within every repetition, so drift on a shared machine hits all of them. Prints a
# markdown table: medians (min–max) of REPS runs.
#
# usage: bench/compare_tls.sh        knobs: REPS (3) DURATION (5) PORT (18443)
# Only 127.0.0.1 is contacted; every server is stopped by its PID.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
REPS=${REPS:-3}; DURATION=${DURATION:-5}; PORT=${PORT:-18443}
# start_server and stop_server (by PID).
# shellcheck source=bench/lib.sh
. "$here/bench/lib.sh"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
command -v openssl >/dev/null || { apt-get update -qq && apt-get install -y -qq openssl; }

echo "building twinhttp's hello (server,tls) and the peers in bench/peers ..." >&2
(cd "$here" && cargo build -q --release --features server,tls --example hello)
cargo build -q --release --manifest-path "$here/bench/peers/Cargo.toml"

work=$(mktemp -d)
trap 'stop_server; rm -rf "$work"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
  -subj /CN=localhost -addext subjectAltName=DNS:localhost \
  -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
cert=$work/cert.pem; key=$work/key.pem
hello=$release/examples/hello
peers=$peers_release
# NAME:PORT:COMMAND, as bench/lib.sh's start_server takes them.
servers=(
  "twinhttp server:$PORT:$hello --addr 127.0.0.1:{PORT} --tls-cert $cert --tls-key $key"
  "twinhttp reactor inline:$PORT:$hello --addr 127.0.0.1:{PORT} --tls-cert $cert --tls-key $key --engine reactor --dispatch inline"
  "twinhttp reactor pool:$PORT:$hello --addr 127.0.0.1:{PORT} --tls-cert $cert --tls-key $key --engine reactor --dispatch pool"
  "hyper + tokio-rustls:$PORT:$peers/hyper_rustls_hello {PORT} $cert $key"
  "actix-web + rustls:$PORT:$peers/actix_rustls_hello {PORT} $cert $key"
)
ticks=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
raw=$work/raw
for rep in $(seq 1 "$REPS"); do
  for load in keepalive handshake; do
    for spec in "${servers[@]}"; do
      start_server "$spec"
      case $load in
        keepalive) args=(-t2 -c64 -d"${DURATION}s") ;;
        handshake) args=(-t2 -c16 -d"${DURATION}s" -H "Connection: close") ;;
      esac
      before=$(cpu_ticks "$spid")
      out=$(timeout $((DURATION + 20)) wrk "${args[@]}" "https://127.0.0.1:$PORT/" 2>&1 || true)
      after=$(cpu_ticks "$spid")
      stop_server
      n=$(awk '/requests in/ {print $1}' <<<"$out")
      rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
      errors=$(awk '/Non-2xx|Socket errors/ {printf "%s ", $0}' <<<"$out")
      printf '%s\t%s\t%s\t%s\t%s\n' "$load" "$name" "${rps:-0}" "${n:-0}" "$((after - before))" >> "$raw"
      echo "rep $rep $load $name: ${rps:-0} req/s ${errors}" >&2
    done
  done
done

python3 - "$raw" "$REPS" "$ticks" <<'PY'
import sys, statistics, collections
raw, reps, ticks = sys.argv[1], sys.argv[2], float(sys.argv[3])
rows = collections.defaultdict(list)
order = []
for line in open(raw):
    load, name, rps, n, cpu = line.rstrip("\n").split("\t")
    n = float(n)
    if name not in order:
        order.append(name)
    rows[(load, name)].append((float(rps), float(cpu) / ticks * 1e6 / n if n else float("nan")))
def cell(xs, fmt):
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}–{fmt.format(max(xs))})"
print(f"medians (min–max) of {reps} interleaved runs, wrk -t2 over https, each server alone on the machine with wrk\n")
print("| server | keep-alive req/s (c64) | CPU µs/req | new connection per request, req/s (c16) | CPU µs/req |")
print("|---|---|---|---|---|")
for name in order:
    k, h = rows[("keepalive", name)], rows[("handshake", name)]
    print(f"| {name} | {cell([x[0] for x in k], '{:,.0f}')} | {cell([x[1] for x in k], '{:.1f}')} "
          f"| {cell([x[0] for x in h], '{:,.0f}')} | {cell([x[1] for x in h], '{:.0f}')} |")
PY
