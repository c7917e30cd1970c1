#!/usr/bin/env bash
# Builds every peer the benchmarks compare twinhttp against, with the libraries' default settings:
# this Cargo workspace (hyper, actix-web, may_minihttp, tiny_http, ehttpd; tungstenite,
# tokio-tungstenite, fastwebsockets; the TLS peers; idle_hold;
# twinhttp-report, which draws the charts) into bench/peers/target/release ($CARGO_TARGET_DIR/release
# when that is set; a relative one is taken from the repository, as the other bench scripts do),
# and the Go module bench/peers-go (net/http, gorilla/websocket, gobwas/ws) into
# bench/peers-go/bin. About 4 minutes the first time on 2 cores; seconds after.
# Go: `go` on PATH or /usr/local/go/bin/go; without it the Go peers are skipped, with a note.
set -euo pipefail
peers=$(cd "$(dirname "$0")" && pwd)
(cd "$peers/../.." && cargo build --release --manifest-path "$peers/Cargo.toml")
go=$(command -v go || echo /usr/local/go/bin/go)
if [ -x "$go" ]; then
  (cd "$peers/../peers-go" && "$go" build -mod=readonly -o bin/ ./...)
else
  echo "build.sh: no Go toolchain (go on PATH or /usr/local/go/bin/go): Go peers not built" >&2
fi
