#!/usr/bin/env python3
"""A WebSocket echo check with an independent client (the `websockets` package), beside the
fuzzingclient: C connections at once, each with up to W messages in flight.

usage: ws_smoke.py URL [--connections 8] [--window 32] [--count 256] [--timeout 20]

Each connection opens (offering permessage-deflate, as browsers do: a server without it must
decline), sends COUNT messages, text and binary in turn, of 0, 1, 125, 126, 127, 65535, 65536
and 100000 bytes (every payload-length encoding; text with 2-, 3- and 4-byte UTF-8), keeping up
to WINDOW unanswered, and checks that each comes back in order with its type and bytes; then a
ping must get its pong, and a close with 1000 must be answered with 1000. Prints one line at the
end. Exit status: 0 every connection passed; 1 one did not; 2 usage or a non-loopback URL.
"""
import argparse
import sys
import threading
import urllib.parse
from collections import deque

from websockets.sync.client import connect

SIZES = (0, 1, 125, 126, 127, 65535, 65536, 100000)
TEXT = "h\u00e9\u20ac\U0001F600"  # 1 + 2 + 3 + 4 bytes of UTF-8


def message(conn, i):
    """Message i of connection conn: text on even i, binary on odd, SIZES[i % 8] bytes."""
    size = SIZES[i % len(SIZES)]
    if i % 2:
        return bytes((conn + i + k) % 251 for k in range(size))
    unit = TEXT.encode()
    whole, rest = divmod(size, len(unit))
    return TEXT * whole + "x" * rest


def run(url, conn, count, window, timeout):
    """One connection's exchange; None if it passed, else what went wrong."""
    with connect(url, open_timeout=timeout, close_timeout=timeout, max_size=2**20) as ws:
        in_flight = deque()
        sent = 0
        for _ in range(count):
            while sent < count and len(in_flight) < window:
                m = message(conn, sent)
                ws.send(m)
                in_flight.append(m)
                sent += 1
            want = in_flight.popleft()
            got = ws.recv(timeout=timeout)
            if type(got) is not type(want) or got != want:
                return "message %d: a %s of %d came back as a %s of %d" % (
                    sent - len(in_flight) - 1, type(want).__name__, len(want),
                    type(got).__name__, len(got))
        if not ws.ping(b"smoke").wait(timeout):
            return "no pong within %s s" % timeout
        ws.close(1000)
        code = ws.protocol.close_rcvd.code if ws.protocol.close_rcvd else None
        if code != 1000:
            return "close answered with %s, not 1000" % code
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("url")
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--window", type=int, default=32)
    ap.add_argument("--count", type=int, default=256)
    ap.add_argument("--timeout", type=float, default=20)
    args = ap.parse_args()
    host = urllib.parse.urlsplit(args.url).hostname or ""
    if not (host.startswith("127.") or host in ("localhost", "::1")):
        print("ws_smoke: %s is not a loopback address" % args.url, file=sys.stderr)
        return 2

    problems = [None] * args.connections

    def worker(i):
        try:
            problems[i] = run(args.url, i, args.count, args.window, args.timeout)
        except Exception as e:  # a refused handshake, a reset, a timeout: all are failures
            problems[i] = "%s: %s" % (type(e).__name__, e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(args.connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failed = [(i, p) for i, p in enumerate(problems) if p]
    for i, p in failed:
        print("ws_smoke: connection %d: %s" % (i, p))
    print("ws_smoke: %d connections x %d messages, window %d: %s" % (
        args.connections, args.count, args.window,
        "%d failed" % len(failed) if failed else "ok"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
