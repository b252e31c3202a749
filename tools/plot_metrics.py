#!/usr/bin/env python3
"""Draws a `ganengine train` run's metrics.jsonl as OUTF/losses.png.

    python tools/plot_metrics.py OUTF [--out FILE] [--title TEXT]

Top panel: Loss_D, Loss_G, D(x) and D(G(z)) (before and after G's step) against the global step,
with a mark at every logged step whose gradients overflowed (that optimizer's step was skipped).
Bottom panel: the three loss scales (log scale), each overflow halving one. Needs matplotlib.
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt  # noqa: E402

LOSSES = ("errD_real", "errD_fake", "errG")


def read_metrics(path):
    records = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as e:
                sys.exit(f"plot_metrics: {path} line {number} is not JSON: {e}")
    if not records:
        sys.exit(f"plot_metrics: {path} holds no records: was the run logged?")
    records.sort(key=lambda r: r["step"])
    return records


def plot(records, out, title):
    steps = [r["step"] for r in records]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    top.plot(steps, [r["loss_D"] for r in records], label="Loss_D", linewidth=1)
    top.plot(steps, [r["loss_G"] for r in records], label="Loss_G", linewidth=1)
    top.plot(steps, [r["D_x"] for r in records], label="D(x)", linewidth=1)
    top.plot(steps, [r["D_G_z1"] for r in records], label="D(G(z)) before G's step", linewidth=1)
    top.plot(steps, [r["D_G_z2"] for r in records], label="D(G(z)) after", linewidth=1, linestyle="--")
    skipped = [r["step"] for r in records if any(r["overflow"])]
    if skipped:
        top.scatter(skipped, [0] * len(skipped), marker="v", color="red", zorder=3, label="overflow: step skipped")
    top.set_ylabel("loss / probability")
    top.grid(alpha=0.3)
    top.legend(fontsize=8, ncol=3, loc="upper right")
    if title:
        top.set_title(title)
    for i, name in enumerate(LOSSES):
        bottom.plot(steps, [r["loss_scale"][i] for r in records], label=f"loss scale {name}", linewidth=1)
        marks = [r["step"] for r in records if r["overflow"][i]]
        if marks:
            bottom.scatter(marks, [r["loss_scale"][i] for r in records if r["overflow"][i]], marker="v", s=12,
                           color="red", zorder=3)
    bottom.set_yscale("log", base=2)
    bottom.set_xlabel("step")
    bottom.set_ylabel("loss scale")
    bottom.grid(alpha=0.3)
    bottom.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    tmp = out + ".tmp"
    fig.savefig(tmp, dpi=80, format="png")
    os.replace(tmp, out)  # whole or not at all
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("outf", help="the run's --outf folder (holds metrics.jsonl)")
    parser.add_argument("--out", help="the picture to write (default OUTF/losses.png)")
    parser.add_argument("--title", default="", help="a title over the top panel")
    args = parser.parse_args()
    metrics = os.path.join(args.outf, "metrics.jsonl")
    if not os.path.exists(metrics):
        sys.exit(f"plot_metrics: {metrics} does not exist (expected a `ganengine train --outf` folder)")
    out = args.out or os.path.join(args.outf, "losses.png")
    records = read_metrics(metrics)
    plot(records, out, args.title)
    print(f"plot_metrics: {len(records)} records -> {out}")


if __name__ == "__main__":
    main()
