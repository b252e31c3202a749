#!/usr/bin/env python3
"""Markdown tables from run_protocol.sh's results.jsonl (Python's standard library only).

  report.py results.jsonl [--epochs 4,6] [--fd-bar 0.15] [--is-bar 0.10] [--bar-levels O0,O1,O2]
                          [--fp8-levels O4]

For each chosen epoch (default: the last one scored) and each way of drawing (BatchNorm in
training mode, as the example draws, and in eval mode): per run kind (ganengine at each opt
level, PyTorch AMP) the median and range over seeds of the Frechet distance, the IS analogue
and the class-histogram entropy, their ratios to PyTorch AMP's medians, and the bar: a level of
--bar-levels passes when its median distance is at most (1 + fd-bar) x PyTorch AMP's and its
median IS analogue at least (1 - is-bar) x PyTorch AMP's (lower distance and higher IS are
better, so being better than the reference by any margin passes); a level of --fp8-levels (FP8
training) passes when its median distance is at most (1 + fd-bar) x ganengine O2's. A run whose samples are not
finite counts as distance inf and IS 1 (the worst values) in the medians. Then the median
distance of every kind at every epoch, and each run that failed, timed out or diverged.
Exits 1 when a bar level fails or lacks results, else 0.
"""
import argparse
import json
import math
import statistics
import sys
from collections import defaultdict

REFERENCE = ("pytorch", "AMP")
MODES = (("train", "BatchNorm in training mode (batch statistics, batches of 64), as the example draws"),
         ("eval", "BatchNorm in eval mode (running statistics)"))


def kind_label(kind):
    return "PyTorch AMP" if kind == REFERENCE else f"{kind[0]} {kind[1]}"


def kind_order(kind):
    return (kind == REFERENCE, kind)


def fmt_fd(v):
    if v is None:
        return "-"
    if math.isinf(v):
        return "inf"
    return f"{v:.0f}" if v >= 100 else f"{v:.1f}" if v >= 10 else f"{v:.2f}" if v >= 1 else f"{v:.3f}"


def fmt(v, digits):
    return "-" if v is None else "inf" if math.isinf(v) else f"{v:.{digits}f}"


def summary(values, formatter):
    if not values:
        return "-"
    return f"{formatter(statistics.median(values))} [{formatter(min(values))}-{formatter(max(values))}]"


def load(path):
    env, clf, runs, scores, bad = None, None, [], [], 0
    with open(path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                bad += 1
                continue
            kind = r.get("record")
            if kind == "env":
                env = r
            elif kind == "classifier":
                clf = r
            elif kind == "run":
                runs.append(r)
            elif kind == "score":
                scores.append(r)
    return env, clf, runs, scores, bad


def metric_values(rows, key):
    """The seeds' values; a diverged run (samples not finite) counts as the worst value."""
    worst = {"fd": math.inf, "is": 1.0, "entropy": 0.0}[key]
    out = []
    for r in rows:
        if r.get("error"):
            continue
        out.append(r[key] if r.get("finite") and r.get(key) is not None else worst)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("results")
    ap.add_argument("--epochs", default=None, help="epochs to tabulate, comma separated (default: the last scored)")
    ap.add_argument("--fd-bar", type=float, default=0.15)
    ap.add_argument("--is-bar", type=float, default=0.10)
    ap.add_argument("--bar-levels", default="O0,O1,O2")
    ap.add_argument("--fp8-levels", default="O4")
    args = ap.parse_args()
    env, clf, runs, scores, bad = load(args.results)
    bar_levels = [lvl for lvl in args.bar_levels.split(",") if lvl]
    fp8_levels = [lvl for lvl in args.fp8_levels.split(",") if lvl]

    # (kind, mode, epoch) -> rows, one per seed
    table = defaultdict(list)
    for s in scores:
        table[((s.get("impl"), s.get("opt_level")), s.get("mode"), s.get("epoch"))].append(s)
    kinds = sorted({k for k, _, _ in table} | {(r["impl"], r["opt_level"]) for r in runs}, key=kind_order)
    all_epochs = sorted({e for _, _, e in table if e is not None})
    if args.epochs:
        chosen = [int(e) for e in args.epochs.split(",") if e]
    else:
        chosen = all_epochs[-1:]
    seeds_of = defaultdict(set)
    for r in runs:
        seeds_of[(r["impl"], r["opt_level"])].add(r["seed"])

    p = print
    p("## Training quality: ganengine against PyTorch AMP (Fashion-MNIST)")
    p()
    if env:
        p(f"`{env.get('command', 'tools/quality/run_protocol.sh')}` on {env.get('gpu', '?')} "
          f"(PyTorch {env.get('torch', '?')}, CUDA {env.get('cuda', '?')}); scored from epoch "
          f"{env.get('first_epoch', '?')}.")
        p()
    if clf:
        real = clf.get("real", {})
        real_n = f"{real['n']:,}" if isinstance(real.get("n"), int) else "?"
        p(f"Feature classifier: test accuracy {clf['test_accuracy']:.4f} ({clf['image_size']}x{clf['image_size']}, "
          f"{clf['epochs']} epochs). Real images ({real_n} training images against the 10,000 test "
          f"images, the floor a generator can reach): distance {fmt_fd(real.get('fd'))}, IS analogue "
          f"{fmt(real.get('is'), 2)}, entropy {fmt(real.get('entropy'), 3)} (test set: IS analogue "
          f"{fmt(clf.get('test_is'), 2)}).")
        p()
    if bad:
        p(f"({bad} lines of {args.results} were not JSON and were left out.)")
        p()

    failed_bar = []
    for epoch in chosen:
        for mode, mode_text in MODES:
            ref = table.get((REFERENCE, mode, epoch), [])
            ref_fd = statistics.median(metric_values(ref, "fd")) if metric_values(ref, "fd") else None
            ref_is = statistics.median(metric_values(ref, "is")) if metric_values(ref, "is") else None
            o2 = metric_values(table.get((("ganengine", "O2"), mode, epoch), []), "fd")
            o2_fd = statistics.median(o2) if o2 else None
            p(f"### After {epoch} epochs, {mode_text}")
            p()
            p("| run | seeds scored | distance, median [range] | IS analogue | class entropy | distance / AMP "
              "| IS / AMP | bar |")
            p("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
            for kind in kinds:
                rows = table.get((kind, mode, epoch), [])
                fds, iss, ents = metric_values(rows, "fd"), metric_values(rows, "is"), metric_values(rows, "entropy")
                diverged = sum(1 for r in rows if not r.get("error") and not r.get("finite"))
                expected = len(seeds_of.get(kind, ())) or len(rows)
                count = f"{len(fds)} of {expected}" + (f" ({diverged} diverged)" if diverged else "")
                fd_ratio = is_ratio = None
                if fds and iss and ref_fd and ref_is:
                    med_fd = statistics.median(fds)
                    fd_ratio = med_fd / ref_fd
                    is_ratio = statistics.median(iss) / ref_is
                if kind == REFERENCE:
                    verdict = "reference"
                elif kind[0] == "ganengine" and kind[1] in bar_levels:
                    if not ref_fd or not ref_is or math.isinf(ref_fd):
                        verdict = "FAIL (no finite PyTorch AMP result)"
                    elif len(fds) < expected:
                        verdict = f"FAIL ({len(fds)} of {expected} seeds scored)"
                    else:
                        ok = fd_ratio <= 1 + args.fd_bar and is_ratio >= 1 - args.is_bar
                        verdict = "pass" if ok else "FAIL"
                    if verdict != "pass":
                        failed_bar.append(f"{kind_label(kind)} after {epoch} epochs, {mode} mode: {verdict}")
                elif kind[0] == "ganengine" and kind[1] in fp8_levels:
                    if not o2_fd or math.isinf(o2_fd):
                        verdict = "FAIL (no finite ganengine O2 result)"
                    elif len(fds) < expected:
                        verdict = f"FAIL ({len(fds)} of {expected} seeds scored)"
                    else:
                        o2_ratio = statistics.median(fds) / o2_fd
                        verdict = ("pass" if o2_ratio <= 1 + args.fd_bar else "FAIL") + f" ({o2_ratio:.2f}x O2)"
                    if not verdict.startswith("pass"):
                        failed_bar.append(f"{kind_label(kind)} after {epoch} epochs, {mode} mode: {verdict}")
                else:
                    verdict = "reported"
                p(f"| {kind_label(kind)} | {count} | {summary(fds, fmt_fd)} | {summary(iss, lambda v: fmt(v, 2))} "
                  f"| {summary(ents, lambda v: fmt(v, 3))} | {fmt(fd_ratio, 2)} | {fmt(is_ratio, 2)} | {verdict} |")
            p()
    p(f"Bar for {', '.join(bar_levels)}: median distance at most {1 + args.fd_bar:.2f}x PyTorch AMP's and median "
      f"IS analogue at least {1 - args.is_bar:.2f}x PyTorch AMP's, after the same number of epochs and drawn the "
      "same way." + (f" Bar for {', '.join(fp8_levels)}: median distance at most {1 + args.fd_bar:.2f}x ganengine O2's."
                     if fp8_levels else ""))
    p()

    if all_epochs:
        p("### Median distance by epoch (training-mode / eval-mode BatchNorm)")
        p()
        p("| run | " + " | ".join(str(e) for e in all_epochs) + " |")
        p("| --- |" + " ---: |" * len(all_epochs))
        for kind in kinds:
            cells = []
            for e in all_epochs:
                pair = []
                for mode, _ in MODES:
                    values = metric_values(table.get((kind, mode, e), []), "fd")
                    pair.append(fmt_fd(statistics.median(values)) if values else "-")
                cells.append(" / ".join(pair))
            p(f"| {kind_label(kind)} | " + " | ".join(cells) + " |")
        p()

    problems = []
    for r in sorted(runs, key=lambda r: (kind_order((r["impl"], r["opt_level"])), r["seed"])):
        if r["rc"] != 0:
            why = "timed out" if r["rc"] in (124, 137) else f"exited with status {r['rc']}"
            problems.append(f"{kind_label((r['impl'], r['opt_level']))} seed {r['seed']}: training {why} after "
                            f"{r['seconds']} s, epochs written: {r['epochs_written']} (last line: "
                            f"`{r.get('last_line', '')[:160]}`)")
    by_run = defaultdict(list)
    for s in scores:
        by_run[((s.get("impl"), s.get("opt_level")), s.get("seed"), s.get("mode"))].append(s)
    for (kind, seed, mode), rows in sorted(by_run.items(), key=lambda kv: (kind_order(kv[0][0]), kv[0][1:])):
        errors = [r for r in rows if r.get("error")]
        for r in errors:
            problems.append(f"{kind_label(kind)} seed {seed}, {mode} mode: {r.get('file')} not scored: {r['error']}")
        nonfinite = sorted(r["epoch"] for r in rows if not r.get("error") and not r.get("finite")
                           and r.get("epoch") is not None)
        if nonfinite:
            problems.append(f"{kind_label(kind)} seed {seed}, {mode} mode: samples not finite from epoch "
                            f"{nonfinite[0]} (epochs {', '.join(map(str, nonfinite))})")
    if problems:
        p("### Runs that failed or diverged")
        p()
        for line in problems:
            p(f"- {line}")
        p()
    if failed_bar:
        p("Bar missed: " + "; ".join(failed_bar) + ".")
        return 1
    if not chosen:
        p("No scores in the results.")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
