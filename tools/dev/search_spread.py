#!/usr/bin/env python3
"""The cache entries in which fresh searches differed, beside each process's step times.

  search_spread.py DIR        (DIR: tools/dev/gpu_search_spread.sh's $OUT/spread)

For every process i, reads b<i>.log (its `ganengine bench` lines) and c<i>.txt (its cuDNN
algorithm cache file); prints the processes by step time, then each cache key whose choice was
not the same in all of them, with every process's choice: which choice goes with the slow steps.
"""
import pathlib
import re
import sys


def step_times(log):
    times = {}
    for line in log.read_text().splitlines():
        m = re.match(r"(O\d) graph +batch +(\d+) +([\d.]+) ms/step", line)
        if m:
            times[f"{m.group(1)} {m.group(2)}"] = float(m.group(3))
    return times


def choices(cache):
    out = {}
    for line in cache.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        key, _, choice = line.partition(" ")
        out[key.split("|")[-1]] = choice  # the convolution (kernels/cuda/conv.cu, make_key)
    return out


def main():
    d = pathlib.Path(sys.argv[1])
    runs = sorted(int(p.stem[1:]) for p in d.glob("c*.txt"))
    times = {i: step_times(d / f"b{i}.log") for i in runs if (d / f"b{i}.log").exists()}
    picks = {i: choices(d / f"c{i}.txt") for i in runs}
    columns = sorted({k for t in times.values() for k in t})
    order = sorted(runs, key=lambda i: [times.get(i, {}).get(c, 0) for c in columns])
    print("process  " + "  ".join(f"{c:>9}" for c in columns))
    for i in order:
        print(f"{i:7}  " + "  ".join(f"{times.get(i, {}).get(c, float('nan')):9.3f}" for c in columns))
    keys = sorted({k for p in picks.values() for k in p})
    for k in keys:
        seen = {picks[i].get(k) for i in runs}
        if len(seen) < 2:
            continue
        print(f"\n{k}  (pass, dtype, x/w/y formats, N, C, H, W, K, R, S, stride, pad, tf32, deterministic)")
        for i in order:
            print(f"  {i:5}  {picks[i].get(k, '-')}")


if __name__ == "__main__":
    main()
