#!/usr/bin/env python3
"""Writes the fuzz target's seed corpus (fuzz/corpus/exchange/) from the requests the
integration tests send: every byte-string literal in tests/*.rs that starts with a request
line, each with a few scripts (all at once; byte by byte; pipelined twice with each handler
outcome; a deadline in the middle). Input layout: see src/fuzz/mod.rs. Run from the repository's
root: python3 fuzz/seeds.py"""
import ast, glob, hashlib, os, re

METHODS = (b"GET ", b"POST ", b"HEAD ", b"PUT ", b"DELETE ", b"OPTIONS ", b"PATCH ", b"CONNECT ")
LIT = re.compile(rb'b"((?:[^"\\]|\\.)*)"')

def requests():
    seen = []
    for path in sorted(glob.glob("tests/*.rs")):
        src = open(path, "rb").read()
        for m in LIT.finditer(src):
            try:
                raw = ast.literal_eval("b\"" + m.group(1).decode("latin-1") + "\"")
            except Exception:
                continue
            if raw.startswith(METHODS) and raw not in seen and len(raw) < 4096:
                seen.append(raw)
    return seen

def seed(script, data):
    script = bytes(script[:255])
    return bytes([len(script)]) + script + data

def scripts(req):
    yield b""                                   # all at once
    yield bytes([0] * min(len(req), 255))       # one byte a read
    for outcome in range(7):                    # choose the outcome, then all of it, twice
        yield bytes([5 | (outcome << 3), 3 | (31 << 3), 3 | (31 << 3)])
    yield bytes([2 | (7 << 3), 4])              # 8 bytes, then the deadline passes
    yield bytes([6, 3 | (31 << 3)])             # shutting down

def main():
    out = "fuzz/corpus/exchange"
    os.makedirs(out, exist_ok=True)
    n = 0
    for req in requests():
        for script in scripts(req):
            data = req * 2 if len(script) == 3 else req
            s = seed(script, data)
            name = hashlib.sha1(s).hexdigest()
            with open(os.path.join(out, name), "wb") as f:
                f.write(s)
            n += 1
    print(f"{n} seeds from {len(requests())} requests in {out}")

main()
