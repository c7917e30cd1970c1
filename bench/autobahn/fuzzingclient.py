#!/usr/bin/env python3
"""Runs Autobahn|Testsuite's fuzzingclient against one WebSocket echo server that is already
listening on the loopback, then summarizes its report.

usage: fuzzingclient.py WSTEST URL AGENT OUTDIR [--timeout S] [--exclude 12.*,13.*]

Writes OUTDIR/spec-AGENT.json (every case but the excluded ones: by default the
permessage-deflate groups 12 and 13, which twinhttp does not offer), runs `WSTEST -m
fuzzingclient` in OUTDIR (its log: OUTDIR/wstest-AGENT.log; its report: OUTDIR/index.html and
index.json), and prints one line:

    AGENT: N cases: OK a, NON-STRICT b, INFORMATIONAL c, UNIMPLEMENTED d, FAILED f

then each FAILED case. Exit status: 0 no case FAILED; 1 a case FAILED, or the report holds fewer
cases than wstest planned (the server went away mid-run); 2 usage, a non-loopback URL, or wstest
failed or timed out.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import urllib.parse

PASSING = ("OK", "NON-STRICT", "INFORMATIONAL", "UNIMPLEMENTED")


def case_key(case_id):
    return tuple(int(p) if p.isdigit() else 0 for p in case_id.split("."))


def summarize(report, agent, planned):
    """The summary lines and whether the run passed."""
    cases = report.get(agent, {})
    counts = dict.fromkeys(PASSING, 0)
    failed = []
    for case_id in sorted(cases, key=case_key):
        behavior = cases[case_id].get("behavior")
        if behavior in counts:
            counts[behavior] += 1
        else:
            failed.append("  FAILED %s (behavior %s, close %s)"
                          % (case_id, behavior, cases[case_id].get("behaviorClose")))
    lines = ["%s: %d cases: %s, FAILED %d" % (
        agent, len(cases), ", ".join("%s %d" % (b, counts[b]) for b in PASSING), len(failed))]
    lines += failed
    complete = planned is None or len(cases) == planned
    if not complete:
        lines.append("  incomplete: %d cases in the report, %d planned" % (len(cases), planned))
    return lines, complete and not failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("wstest")
    ap.add_argument("url")
    ap.add_argument("agent")
    ap.add_argument("outdir")
    ap.add_argument("--timeout", type=int, default=900)
    ap.add_argument("--exclude", default="12.*,13.*")
    args = ap.parse_args()

    host = urllib.parse.urlsplit(args.url).hostname or ""
    if not (host.startswith("127.") or host in ("localhost", "::1")):
        print("fuzzingclient: %s is not a loopback address" % args.url, file=sys.stderr)
        return 2
    os.makedirs(args.outdir, exist_ok=True)
    outdir = os.path.abspath(args.outdir)
    spec_path = os.path.join(outdir, "spec-%s.json" % args.agent)
    spec = {
        "outdir": outdir,
        "servers": [{"agent": args.agent, "url": args.url}],
        "cases": ["*"],
        "exclude-cases": [c for c in args.exclude.split(",") if c],
        "exclude-agent-cases": {},
    }
    with open(spec_path, "w") as f:
        json.dump(spec, f, indent=2)
    index = os.path.join(outdir, "index.json")
    if os.path.exists(index):
        os.remove(index)

    log_path = os.path.join(outdir, "wstest-%s.log" % args.agent)
    with open(log_path, "w") as log:
        try:
            rc = subprocess.run([args.wstest, "-m", "fuzzingclient", "-s", spec_path],
                                cwd=outdir, stdout=log, stderr=subprocess.STDOUT,
                                timeout=args.timeout).returncode
        except subprocess.TimeoutExpired:
            print("fuzzingclient: wstest ran past %d s (log: %s)" % (args.timeout, log_path),
                  file=sys.stderr)
            return 2
    if rc != 0 or not os.path.exists(index):
        print("fuzzingclient: wstest exited %d without a report (log: %s)" % (rc, log_path),
              file=sys.stderr)
        return 2
    with open(log_path) as f:
        planned = re.search(r"will run (\d+) test cases", f.read())
    with open(index) as f:
        report = json.load(f)
    lines, passed = summarize(report, args.agent, int(planned.group(1)) if planned else None)
    print("\n".join(lines))
    print("report: %s" % os.path.join(outdir, "index.html"))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
