#!/usr/bin/env python3
"""Summarise `ncu --csv` rows (one row per kernel and metric) of one training step: time per
kernel name, share of the step, and the Tensor Core pipes' activity weighted by time; with
--launches, every launch in the order ncu ran them (which layer a kernel served follows from
its place in the step: a replayed graph carries no NVTX ranges); with --layers, the kernel time
grouped by the layer whose NVTX range launched it (rows from `ncu --nvtx` of an eager step,
`bench --cuda-graph off`): the convolutions with at least 8 channels on each side (O4's FP8
layers), the other convolutions (the image layers, D's head), the BatchNorms, and the rest
(losses, optimizers, scalers); with --diff, two such eager steps side by side (say O2's and O4's,
or two builds'), the kernel time of each pass's layer range in both and the difference, largest
first (--kernels: each kernel of a range apart).
Usage: ncu_summary.py [--launches] [--layers] ncu.csv
       ncu_summary.py --diff [--kernels] before.csv after.csv"""
import csv
import io
import re
import sys
from collections import defaultdict


def read_kernels(path):
    text = open(path, encoding="utf-8", errors="replace").read()
    start = text.find('"ID"')  # ncu prints its own log lines before the CSV header
    if start < 0:
        sys.exit(f"{path}: no ncu CSV rows (the profiled program printed:\n{text[-2000:]})")
    kernels = defaultdict(dict)  # launch id -> metric -> value, plus the name
    for row in csv.DictReader(io.StringIO(text[start:])):
        k = kernels[row["ID"]]
        k["name"] = row["Kernel Name"]
        k["nvtx"] = " ".join(v for c, v in row.items() if c and "Range" in c and v)
        try:
            value = float(row["Metric Value"].replace(",", ""))
        except ValueError:
            continue
        unit = row.get("Metric Unit", "")
        if row["Metric Name"] == "gpu__time_duration.sum":
            scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6,
                     "second": 1e6}
            if unit not in scale:
                sys.exit(f"{path}: unknown time unit {unit!r} for gpu__time_duration.sum")
            value *= scale[unit]
        k[row["Metric Name"]] = value
    return kernels


def print_kernels(kernels):
    groups = defaultdict(lambda: [0, 0.0, 0.0])  # name -> launches, us, us * tensor%
    for k in kernels.values():
        us = k.get("gpu__time_duration.sum", 0.0)
        tensor = tensor_activity(k)
        g = groups[k["name"][:90]]
        g[0] += 1
        g[1] += us
        g[2] += us * tensor
    total = sum(g[1] for g in groups.values())
    print(f"{len(kernels)} kernel launches, {total / 1e3:.3f} ms of kernel time (serialised by ncu)")
    print(f"{'us':>10} {'share':>6} {'n':>4} {'TC%':>6}  kernel")
    for name, (n, us, weighted) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        print(f"{us:10.1f} {100 * us / max(total, 1e-9):5.1f}% {n:4d} {weighted / max(us, 1e-9):6.1f}  {name}")
    tc = sum(g[2] for g in groups.values()) / max(total, 1e-9)
    print(f"time-weighted Tensor Core pipe activity over the step: {tc:.1f}%")


def tensor_activity(k):
    return max(k.get("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active", 0.0),
               k.get("sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", 0.0))


# The innermost layer range of a launch: "main.2 Conv2d(64, 128, 4, 2, 1, bias=False) forward".
LAYER_RANGE = re.compile(r"main\.\d+ (\w+)\(([^)]*)\) (?:forward|backward)")
LAYER_GROUPS = ("convolutions, >= 8 channels a side (O4's FP8 layers)", "other convolutions (image layers, D's head)",
                "BatchNorm layers", "outside the layers (losses, optimizers, scalers)")


def layer_group(nvtx):
    found = LAYER_RANGE.findall(nvtx)
    if not found:
        return LAYER_GROUPS[3]
    kind, args = found[-1]
    if kind.startswith("Conv"):
        channels = [int(a) for a in args.split(",")[:2]]
        return LAYER_GROUPS[0] if min(channels) >= 8 else LAYER_GROUPS[1]
    return LAYER_GROUPS[2] if kind.startswith("BatchNorm") else LAYER_GROUPS[3]


def require_nvtx(kernels, option):
    if not any(k.get("nvtx") for k in kernels.values()):
        sys.exit(f"{option} needs NVTX ranges in the rows: profile with ncu --nvtx, bench --cuda-graph off")


def print_layers(kernels):
    require_nvtx(kernels, "--layers")
    time = defaultdict(float)
    launches = defaultdict(int)
    for k in kernels.values():
        group = layer_group(k.get("nvtx", ""))
        time[group] += k.get("gpu__time_duration.sum", 0.0)
        launches[group] += 1
    total = sum(time.values())
    print(f"\n{'us':>10} {'share':>6} {'n':>4}  launched by")
    for group in LAYER_GROUPS:
        print(f"{time[group]:10.1f} {100 * time[group] / max(total, 1e-9):5.1f}% {launches[group]:4d}  {group}")


# The ranges a launch sits in, outermost first, without the outermost (the whole train_step):
# "D_real / main.2 Conv2d(64, 128, 4, 2, 1, bias=False) forward".
RANGE = re.compile(r"<default domain>:([^:]*):none")


def pass_range(nvtx):
    ranges = RANGE.findall(nvtx)
    return " / ".join(ranges[1:]) if len(ranges) > 1 else (ranges[0] if ranges else "(no range)")


def range_times(kernels, by_kernel):
    time = defaultdict(float)
    launches = defaultdict(int)
    for k in kernels.values():
        key = pass_range(k.get("nvtx", "")) + (" | " + k["name"][:60] if by_kernel else "")
        time[key] += k.get("gpu__time_duration.sum", 0.0)
        launches[key] += 1
    return time, launches


def print_diff(before, after, by_kernel):
    require_nvtx(before, "--diff")
    require_nvtx(after, "--diff")
    (ta, na), (tb, nb) = range_times(before, by_kernel), range_times(after, by_kernel)
    print(f"kernel time: {sum(ta.values()) / 1e3:.3f} ms before, {sum(tb.values()) / 1e3:.3f} ms after")
    print(f"{'before us':>10} {'after us':>10} {'diff us':>9} {'n':>7}  range")
    for key in sorted(set(ta) | set(tb), key=lambda key: -abs(tb[key] - ta[key])):
        print(f"{ta[key]:10.1f} {tb[key]:10.1f} {tb[key] - ta[key]:+9.1f} {na[key]:3d}/{nb[key]:<3d}  {key}")


if __name__ == "__main__":
    args = sys.argv[1:]
    flags = {"--launches", "--layers", "--diff", "--kernels"}
    paths = [a for a in args if a not in flags]
    if "--diff" in args:
        if len(paths) != 2 or "--launches" in args or "--layers" in args:
            sys.exit(__doc__)
        print_diff(read_kernels(paths[0]), read_kernels(paths[1]), "--kernels" in args)
        sys.exit(0)
    launches = "--launches" in args
    layers = "--layers" in args
    if len(paths) != 1 or "--kernels" in args:
        sys.exit(__doc__)
    kernels = read_kernels(paths[0])
    print_kernels(kernels)
    if layers:
        print_layers(kernels)
    if launches:
        print(f"\n{'launch':>6} {'us':>8} {'TC%':>5}  kernel")
        for launch_id in sorted(kernels, key=int):
            k = kernels[launch_id]
            print(f"{launch_id:>6} {k.get('gpu__time_duration.sum', 0.0):8.1f} {tensor_activity(k):5.1f}  {k['name'][:90]}")
