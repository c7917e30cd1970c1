#!/usr/bin/env bash
# Interleaved A/B of an example server: the build at a base revision (A) against the work tree
# (B), on one engine configuration. KIND=http (default): `hello` under wrk, keep-alive at 64 and
# 256 connections and 16-deep pipelining at 64. KIND=ws: `ws_echo` under this repo's `ws_load`
# (a blocking tungstenite client per connection, one message in flight each), 64 connections x
# 32 B and x 16 KiB. KIND=app: `examples/app` (its router and layers: request ids, CORS, JSON)
# answering `GET /api/items` under wrk with a browser's 16 fields (load "browser"). Each run
# starts its server fresh; A and B alternate within every repetition, so drift on this shared
# machine hits both. Beside the rate it reads the server's CPU
# time per request or message (utime + stime of its process, from /proc), which the load
# generator's share of the two cores does not skew the way it skews throughput, and its user
# part alone (what a change of the crate's own code moves; the kernel's send and receive are most
# of the rest), and for HTTP wrk's 99th-percentile latency. Prints a markdown table: medians (min–max)
# and the B/A ratio of the medians.
#
# usage: bench/ab.sh BASE_REV [ENGINE FLAGS...]     e.g. bench/ab.sh HEAD~3 --engine server
#        KIND=ws bench/ab.sh BASE_REV [ENGINE FLAGS...]     KIND=app bench/ab.sh BASE_REV ...
# knobs: REPS (5) DURATION (5) PORT (18190) LOADS (http: "c64 c256 pipelined16", also "close": c64
# with Connection: close, a new connection per request, and "post16k" / "post1m": c64 POSTing a
# 16 KiB or 1 MiB body per request, which the server reads whole, and "browser": c64, each
# request with the 16 fields a browser sends to open a page; ws: "c64x32 c64x16k"; app: "browser")
# BIN_B: a server binary to run as B instead of the work tree's build (bench/polling/one_call.sh
# passes one built against a patched dependency).
# Only 127.0.0.1 is contacted; every server is stopped by its PID.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/target.sh
. "$here/bench/target.sh"
base=${1:?usage: bench/ab.sh BASE_REV [ENGINE FLAGS...]}; shift
flags=("$@")
KIND=${KIND:-http}
features=server; path=/
case $KIND in
  http) example=hello; unit=req; default_loads="c64 c256 pipelined16" ;;
  app) example=app; unit=req; default_loads="browser"; features=server,json; path=/api/items ;;
  ws) example=ws_echo; unit=msg; default_loads="c64x32 c64x16k" ;;
  *) echo "KIND is http, app or ws"; exit 2 ;;
esac
if [ "$KIND" != ws ]; then
  command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
fi
REPS=${REPS:-5}; DURATION=${DURATION:-5}; PORT=${PORT:-18190}; LOADS=${LOADS:-$default_loads}

work=$(mktemp -d)
trap 'git -C "$here" worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
git -C "$here" worktree add --detach "$work/base" "$base" >/dev/null 2>&1
(cd "$work/base" && CARGO_TARGET_DIR="$work/target-a" cargo build -q --release --features "$features" --example "$example")
(cd "$here" && cargo build -q --release --features "$features" --example "$example" --example ws_load)
bin_a=$work/target-a/release/examples/$example
bin_b=${BIN_B:-$release/examples/$example}
load_bin=$release/examples/ws_load

cat > "$work/pipeline.lua" <<'LUA'
-- wrk: send `depth` requests in one write, read their responses, repeat.
init = function(args)
  local depth = tonumber(args[1]) or 16
  local r = {}
  for i = 1, depth do r[i] = wrk.format() end
  req = table.concat(r)
end
request = function() return req end
LUA
cat > "$work/browser.lua" <<'LUA'
-- wrk: each request with the fields a browser sends when it opens a page (Chromium's).
init = function(args)
  local h = {
    ["Connection"] = "keep-alive",
    ["sec-ch-ua"] = '"Chromium";v="131", "Not_A Brand";v="24"',
    ["sec-ch-ua-mobile"] = "?0",
    ["sec-ch-ua-platform"] = '"Linux"',
    ["Upgrade-Insecure-Requests"] = "1",
    ["User-Agent"] = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
    ["Accept"] = "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8",
    ["Sec-Fetch-Site"] = "none",
    ["Sec-Fetch-Mode"] = "navigate",
    ["Sec-Fetch-User"] = "?1",
    ["Sec-Fetch-Dest"] = "document",
    ["Accept-Encoding"] = "gzip, deflate, br, zstd",
    ["Accept-Language"] = "en-US,en;q=0.9",
    ["Cookie"] = "session=3f9a1c0e7b2d4a6f8e1b5c9d0a7e3f21; theme=dark",
    ["Priority"] = "u=0, i",
  }
  req = wrk.format("GET", nil, h)
end
request = function() return req end
LUA
cat > "$work/post.lua" <<'LUA'
-- wrk: POST a body of `size` bytes per request.
init = function(args)
  req = wrk.format("POST", nil, nil, string.rep("x", tonumber(args[1])))
end
request = function() return req end
LUA

ticks=$(getconf CLK_TCK)
# cpu_ticks PID: its user and system time, in ticks.
cpu_ticks() { awk '{print $14, $15}' "/proc/$1/stat"; }

raw=$work/raw
for rep in $(seq 1 "$REPS"); do
  for load in $LOADS; do
    for side in A B; do
      bin=$bin_a; [ "$side" = B ] && bin=$bin_b
      "$bin" --addr "127.0.0.1:$PORT" "${flags[@]}" >/dev/null 2>&1 & pid=$!
      for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.05; done
      args=(-t2 -d"${DURATION}s"); script_arg=16
      case $load in
        c64) args+=(-c64) ;;
        c256) args+=(-c256) ;;
        pipelined16) args+=(-c64 -s "$work/pipeline.lua") ;;
        close) args+=(-c64 -H "Connection: close") ;;
        post16k) args+=(-c64 -s "$work/post.lua"); script_arg=16384 ;;
        post1m) args+=(-c64 -s "$work/post.lua"); script_arg=1048576 ;;
        browser) args+=(-c64 -s "$work/browser.lua") ;;
        c64x32) args=(--conns 64 --size 32) ;;
        c64x16k) args=(--conns 64 --size 16384) ;;
      esac
      read -r user_before sys_before < <(cpu_ticks "$pid")
      p99=nan
      if [ "$KIND" = ws ]; then
        out=$(timeout $((DURATION + 20)) "$load_bin" --addr "127.0.0.1:$PORT" --secs "$DURATION" "${args[@]}" 2>&1 || true)
        n=$(awk '/^ws_load:/ {print $2}' <<<"$out")
        rps=$(awk '/^ws_load:/ {print $(NF-1)}' <<<"$out")
      else
        out=$(timeout $((DURATION + 20)) wrk --latency "${args[@]}" "http://127.0.0.1:$PORT$path" -- "$script_arg" 2>&1 || true)
        n=$(awk '/requests in/ {print $1}' <<<"$out")
        rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
        # wrk's 99th percentile, in ms whatever unit it printed.
        p99=$(awk '$1 == "99%" { v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
          print (u == "us" ? v / 1000 : u == "s" ? v * 1000 : v) }' <<<"$out")
      fi
      read -r user_after sys_after < <(cpu_ticks "$pid")
      kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
      user=$((user_after - user_before))
      printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$load" "$side" "${rps:-0}" "${n:-0}" \
        "$((user + sys_after - sys_before))" "$user" "${p99:-nan}" >> "$raw"
      echo "rep $rep $load $side: ${rps:-0} $unit/s" >&2
    done
  done
done

python3 - "$raw" "$REPS" "$ticks" "$base" "${flags[*]:-}" "$example" "$unit" <<'PY'
import os, sys, statistics, collections
raw, reps, ticks, base, flags, example, unit = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6], sys.argv[7]
rows = collections.defaultdict(list)
for line in open(raw):
    load, side, rps, n, cpu, user, p99 = line.rstrip("\n").split("\t")
    n = float(n)
    per = lambda ticks_: float(ticks_) / ticks * 1e6 / n if n else float("nan")
    rows[(load, side)].append((float(rps), per(cpu), per(user), float(p99)))
def cell(xs, fmt):
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}–{fmt.format(max(xs))})"
def p99_cell(runs):
    # wrk printed a latency of 0 for the pipelined load here: "–" then.
    xs = [x[3] for x in runs if x[3] > 0]
    return cell(xs, '{:.2f}') if len(xs) == len(runs) else "–"
tool = "ws_load" if example == "ws_echo" else "wrk -t2"
b_name = os.environ.get("BIN_B") or "work tree"
print(f"{example} {flags or '(defaults)'}: A = {base}, B = {b_name}; medians (min–max) of {reps} interleaved runs, {tool}.\n")
latency = example != "ws_echo"
head = f"| load | A {unit}/s | B {unit}/s | B/A | A CPU µs/{unit} | B CPU µs/{unit} | B/A | A user µs/{unit} | B user µs/{unit} | B/A |"
print(head + (" A p99 ms | B p99 ms |" if latency else ""))
print("|---" * (12 if latency else 10) + "|")
for load in ("c64", "c256", "pipelined16", "close", "post16k", "post1m", "browser", "c64x32", "c64x16k"):
    a, b = rows[(load, "A")], rows[(load, "B")]
    if not a or not b:
        continue
    ra, rb = [x[0] for x in a], [x[0] for x in b]
    ca, cb = [x[1] for x in a], [x[1] for x in b]
    ua, ub = [x[2] for x in a], [x[2] for x in b]
    print(f"| {load} | {cell(ra, '{:,.0f}')} | {cell(rb, '{:,.0f}')} | {statistics.median(rb)/statistics.median(ra):.2f} "
          f"| {cell(ca, '{:.2f}')} | {cell(cb, '{:.2f}')} | {statistics.median(cb)/statistics.median(ca):.2f} "
          f"| {cell(ua, '{:.2f}')} | {cell(ub, '{:.2f}')} | {statistics.median(ub)/statistics.median(ua):.2f} |"
          + (f" {p99_cell(a)} | {p99_cell(b)} |" if latency else ""))
PY
