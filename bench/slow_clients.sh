#!/usr/bin/env bash
# What slow clients cost each engine configuration: N connections that sent half a request head
# (of SIZE bytes) are held open, the server's RSS is read before and after (KiB per connection),
# and a new client's request is timed while they are held. Then the same with N connections that
# sent nothing. Prints a markdown table.
#
# usage: bench/slow_clients.sh      knobs: N (2000) SIZES ("100 16384") PORT (18170)
# Only 127.0.0.1 is contacted; every server is stopped by its PID; the clients close with the script.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=bench/target.sh
. "$here/bench/target.sh"
N=${N:-2000}; SIZES=${SIZES:-"100 16384"}; PORT=${PORT:-18170}
(cd "$here" && cargo build -q --release --features server --example hello)
hello=$release/examples/hello
configs=("server|--engine server" "reactor-inline|--engine reactor --dispatch inline" "reactor-pool|--engine reactor --dispatch pool")
ulimit -n "$(ulimit -Hn)"

echo "| engine | held | per connection | RSS before → after (MiB) | KiB per connection | new client answered in |"
echo "|---|---|---|---|---|---|"
for cfg in "${configs[@]}"; do
  name=${cfg%%|*}; flags=${cfg#*|}
  for size in 0 $SIZES; do
    # shellcheck disable=SC2086
    "$hello" --addr "127.0.0.1:$PORT" $flags >/dev/null 2>&1 & pid=$!
    for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.05; done
    python3 - "$PORT" "$N" "$size" "$pid" "$name" <<'PY'
import socket, sys, time
port, n, size, pid, name = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
def rss_kib():
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
def served():
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
    return s.recv(1024).startswith(b"HTTP/1.1 200")
served()  # warm: buffers and threads exist before the baseline
time.sleep(0.5)
before = rss_kib()
head = (b"GET / HTTP/1.1\r\nHost: t\r\nX-Pad: " + b"a" * size)[:size] if size else b""
held = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    if head:
        s.sendall(head)
    held.append(s)
time.sleep(1.0)  # the server reads what came (no reply is expected before the deadline)
after = rss_kib()
t = time.perf_counter()
ok = served()
ms = (time.perf_counter() - t) * 1000
what = f"half a head, {size} B" if size else "nothing"
print(f"| {name} | {n} | {what} | {before/1024:.1f} → {after/1024:.1f} | {(after-before)/n:.2f} | "
      f"{ms:.1f} ms{'' if ok else ' (NOT served)'} |")
PY
    kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
  done
done
