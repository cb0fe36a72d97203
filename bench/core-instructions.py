#!/usr/bin/env python3
"""The portable engine's instructions per data frame, counted exactly.

Runs me_core_bench (tests/unit/core_bench.cpp: two nodes in one process,
no kernel, no stack) under valgrind's callgrind twice, for a short and a
longer time, and divides the difference in instructions by the
difference in frames: the setup (allocating and filling the nodes'
memory) cancels out, and two builds compare to the instruction where a
guest under TCG differs by tens of percent between runs.  The bench runs
on its virtual clock (NS_PER_FRAME per frame handled, about the native
pace, so some 14 acks per MB at 64 KiB and MTU 1500 as in the module):
on the real clock valgrind's slowdown, which follows the host's load,
set how often the engine's timed acks came (13 to 76 per MB between two
runs of one binary), and with them the count.  Prints the total per
frame and the functions costing most per frame (self cost; the
harness's own work and libc's, the payload's copies and the harness's
frame allocations, are included, named as such); the acks per MB are
printed.

    bench/core-instructions.py [--top N] [--size BYTES] [--mtu MTU]
                               [--inflight N] [BENCH...]

BENCH: me_core_bench binaries to compare (default build/bin/me_core_bench);
defaults 64 KiB writes, MTU 1500, 8 in flight, top 15.  Needs valgrind.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

SHORT_S, LONG_S = 0.2, 0.6	# virtual seconds
NS_PER_FRAME = 2000
HARNESS = ("core_bench.cpp", "sim.cpp", "/usr/include/c++")


def run(bench, secs, args, tmp):
    out = os.path.join(tmp, f"cg.{secs}")
    p = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", bench,
                        str(secs), str(args.size), str(args.mtu), str(args.inflight),
                        str(NS_PER_FRAME)],
                       capture_output=True, text=True)
    m = re.search(r"; (\d+) frames", p.stdout)
    acks = re.search(r"frames \([\d.]+ per MB\), \d+ acks \(([\d.]+) per MB\)", p.stdout)
    if p.returncode or not m or not acks:
        sys.exit(f"core-instructions: {bench} failed under valgrind:\n{p.stdout}{p.stderr}")
    ann = subprocess.run(["callgrind_annotate", "--threshold=100", out],
                         capture_output=True, text=True, check=True).stdout
    total, funcs = 0, {}
    for line in ann.splitlines():
        t = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+PROGRAM TOTALS", line)
        if t:
            total = int(t.group(1).replace(",", ""))
            continue
        f = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(\S+?):(\S.*?)( \[.*\])?$", line)
        if f:
            name = f.group(3)
            if any(h in f.group(2) for h in HARNESS):
                name += " (harness)"
            elif "libc.so" in (f.group(4) or ""):
                name += " (libc)"
            funcs[name] = funcs.get(name, 0) + int(f.group(1).replace(",", ""))
    return int(m.group(1)), total, funcs, float(acks.group(1))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--size", type=int, default=65536)
    ap.add_argument("--mtu", type=int, default=1500)
    ap.add_argument("--inflight", type=int, default=8)
    ap.add_argument("bench", nargs="*", default=["build/bin/me_core_bench"])
    args = ap.parse_args()
    if not shutil.which("valgrind") or not shutil.which("callgrind_annotate"):
        sys.exit("core-instructions: valgrind not found (Debian package valgrind)")
    for b in args.bench:
        if not os.access(b, os.X_OK):
            sys.exit(f"core-instructions: {b}: not an executable (make builds build/bin/me_core_bench)")
    print(f"{args.size} B writes, MTU {args.mtu}, {args.inflight} in flight; "
          f"instructions per data frame ({LONG_S} s run minus {SHORT_S} s run, virtual clock)")
    results = []
    for b in args.bench:
        with tempfile.TemporaryDirectory() as tmp:
            f1, t1, s1, _ = run(b, SHORT_S, args, tmp)
            f3, t3, s3, acks = run(b, LONG_S, args, tmp)
        if f3 <= f1:
            sys.exit(f"core-instructions: {b}: the longer run sent no more frames ({f3} vs {f1})")
        frames = f3 - f1
        per = {k: (s3.get(k, 0) - s1.get(k, 0)) / frames for k in set(s1) | set(s3)}
        results.append((b, (t3 - t1) / frames, per))
        print(f"\n{b}: {(t3 - t1) / frames:.0f} per frame "
              f"({frames} frames between the runs, {acks:.1f} acks per MB)")
        for k, v in sorted(per.items(), key=lambda kv: -kv[1])[:args.top]:
            print(f"  {v:8.1f}  {k}")
    if len(results) > 1:
        base = results[0][1]
        print("\nagainst the first: " + ", ".join(
            f"{os.path.basename(b) or b} {t / base:.3f}x" for b, t, _ in results[1:]))


if __name__ == "__main__":
    main()
