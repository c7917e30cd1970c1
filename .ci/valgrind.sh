#!/usr/bin/env bash
# The crate runs under the tools users debug with: `hello` under valgrind's memcheck on every
# engine configuration, serving a few requests from curl (keep-alive, a POST with a body the
# handler does not read, a chunked POST, HEAD, a 404, a handler that waits on the pool), then
# stopped with SIGINT by its PID. Fails when valgrind reports an error (memcheck's errors and
# definitely lost blocks: --error-exitcode), when the server dies or exits non-zero, or when a
# request fails.
#
# usage: .ci/valgrind.sh HELLO_BINARY      (a build of examples/hello.rs with --features server)
# Only 127.0.0.1 is contacted; every process is stopped by its PID.
set -euo pipefail
hello=${1:?usage: .ci/valgrind.sh HELLO_BINARY}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
pid=
cleanup() {
  if [ -n "$pid" ]; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

# Suppressions for errors outside this crate, each explained in the file; none are needed today.
supp=()
if [ -s "$here/valgrind.supp" ]; then supp=(--suppressions="$here/valgrind.supp"); fi

head -c 70000 /dev/urandom >"$work/body"
failed=0
for flags in "--engine server" "--engine reactor --dispatch inline" "--engine reactor --dispatch pool"; do
  log="$work/log"
  # shellcheck disable=SC2086
  valgrind --tool=memcheck --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite \
    "${supp[@]}" "$hello" --addr 127.0.0.1:0 $flags >"$log" 2>&1 &
  pid=$!
  url=
  for _ in $(seq 1 600); do
    url=$(sed -n 's/^hello: listening on \(http:[^ ]*\).*/\1/p' "$log")
    [ -n "$url" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  ok=1
  if [ -z "$url" ]; then
    echo "FAIL ($flags): hello did not start under valgrind"; ok=0
  else
    # Three requests on one connection, then a POST whose 70 kB body the handler leaves unread,
    # a chunked POST, HEAD, a 404 and a handler that takes a while (the pool's path).
    connects=$(curl -sS --fail -w '%{num_connects}\n' -o /dev/null "$url/" -o /dev/null "$url/" \
      -o /dev/null "$url/" | paste -sd' ') || { echo "FAIL ($flags): keep-alive requests"; ok=0; }
    [ "$connects" = "1 0 0" ] || { echo "FAIL ($flags): keep-alive: new connections per request: $connects"; ok=0; }
    [ "$(curl -sS --fail --data-binary @"$work/body" "$url/")" = "Hello, World!" ] || { echo "FAIL ($flags): POST"; ok=0; }
    [ "$(curl -sS --fail -H 'Transfer-Encoding: chunked' --data-binary @"$work/body" "$url/")" = "Hello, World!" ] || { echo "FAIL ($flags): chunked POST"; ok=0; }
    curl -sS --fail -I "$url/" >/dev/null || { echo "FAIL ($flags): HEAD"; ok=0; }
    [ "$(curl -sS -o /dev/null -w '%{http_code}' "$url/nothing-here")" = 404 ] || { echo "FAIL ($flags): 404"; ok=0; }
    [ "$(curl -sS --fail "$url/sleep?ms=20")" = "slept" ] || { echo "FAIL ($flags): /sleep"; ok=0; }
  fi
  kill -INT "$pid" 2>/dev/null || true
  rc=0
  wait "$pid" || rc=$?
  pid=
  summary=$(grep -E 'ERROR SUMMARY' "$log" || true)
  echo "$flags: exit $rc, ${summary#==*== }"
  if [ "$rc" -ne 0 ] || [ "$ok" -ne 1 ]; then
    [ "$rc" -eq 99 ] && echo "FAIL ($flags): valgrind reported errors"
    [ "$rc" -ne 0 ] && [ "$rc" -ne 99 ] && echo "FAIL ($flags): exit status $rc"
    cat "$log"
    failed=1
  fi
done
[ "$failed" -eq 0 ] || exit 1
echo "valgrind: every engine configuration served its requests with no memcheck errors"
