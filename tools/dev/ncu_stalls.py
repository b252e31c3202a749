#!/usr/bin/env python3
"""Per-source-line warp stall samples from an ncu source page, the lines with the most first.

  ncu -i detail.ncu-rep --page source --csv --print-source cuda,sass > detail_source.csv
  ncu_stalls.py detail_source.csv [FUNCTION_SUBSTRING] [LINES]

(gpu_call_lib.sh's gpu_call_ncu_detail writes that CSV.) For the functions whose name contains
FUNCTION_SUBSTRING: the total samples by stall reason, then per source line its share of all
samples, the shared-memory wavefronts and instructions executed there, and its largest reasons.
"""
import collections
import csv
import sys


def main():
    path = sys.argv[1]
    wanted = sys.argv[2] if len(sys.argv) > 2 else ""
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 25
    file = func = header = None
    per_line = collections.defaultdict(collections.Counter)
    text = {}
    totals = collections.Counter()
    with open(path) as f:
        for row in csv.reader(f):
            if len(row) == 2 and row[0] == "File Path":
                file = row[1].split("/")[-1]
            elif len(row) == 2 and row[0] == "Function Name":
                func = row[1]
            elif row and row[0] == "Line No":
                header = row
            elif header and row and row[0] and wanted in (func or ""):
                key = (file, int(row[0]))
                text[key] = row[1]
                for name, value in zip(header, row):
                    if name.startswith("stall_") and "(Not" not in name and value.isdigit():
                        per_line[key][name[6:]] += int(value)
                        totals[name[6:]] += int(value)
                    elif name in ("L1 Wavefronts Shared", "Instructions Executed") and value.isdigit():
                        per_line[key]["#" + name] += int(value)
    total = sum(totals.values()) or 1
    print("total", total, " ".join(f"{k}={100 * v / total:.1f}%" for k, v in totals.most_common(9)))
    stalls = lambda c: sum(v for k, v in c.items() if not k.startswith("#"))
    for key, c in sorted(per_line.items(), key=lambda kv: -stalls(kv[1]))[:count]:
        reasons = " ".join(f"{k}={v}" for k, v in c.most_common() if not k.startswith("#"))[:80]
        print(f"{100 * stalls(c) / total:5.1f}% {key[0]}:{key[1]} {text[key][:50]:<50} "
              f"smem_wavefronts={c['#L1 Wavefronts Shared']} inst={c['#Instructions Executed']} {reasons}")


if __name__ == "__main__":
    main()
