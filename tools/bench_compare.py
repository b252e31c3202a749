#!/usr/bin/env python3
"""ganengine vs PyTorch: reads `ganengine bench --json` and `tools/bench_pytorch.py --json` output
(from one run on one GPU) and prints markdown ready for BENCHMARKS.md:

  - a header: GPU, driver, PyTorch / CUDA / cuDNN versions, model sizes;
  - per batch size and precision family, the ratio of ganengine's images/s to the best PyTorch
    configuration of that family and to PyTorch's autocast channels_last eager step (the usual
    "PyTorch AMP done right" baseline):
        fp32   O0        vs PyTorch fp32 (NCHW, channels_last, CUDA graph), TF32 off
        mixed  O1, O2    vs PyTorch autocast + GradScaler (NCHW, channels_last)
        half   O3, O2    vs PyTorch model.half() (NCHW, channels_last, CUDA graph)
    (ratio > 1: ganengine is faster);
  - the raw numbers of both.

  python3 tools/bench_compare.py bench_ganengine.json bench_pytorch.json

Either file may be a JSON list of rows, an object with a list under rows/results/benchmarks/runs
(other keys are metadata), or JSON lines. No third-party modules.
"""
import json
import os
import subprocess
import sys

FAMILIES = [  # family, ganengine opt levels, PyTorch precision
    ("fp32", ["O0"], "fp32"),
    ("mixed", ["O1", "O2"], "amp_fp16"),
    ("half", ["O3", "O2"], "fp16"),
]
ROW_LISTS = ("rows", "results", "benchmarks", "runs")


def load(path):
    """(rows, meta, errors) from one benchmark file; never raises for a missing or bad file."""
    if not path or not os.path.exists(path):
        return [], {}, [f"{path}: not found"]
    try:
        with open(path) as f:
            text = f.read()
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = [json.loads(line) for line in text.splitlines() if line.strip()]
    except Exception as e:  # noqa: BLE001
        return [], {}, [f"{path}: unreadable ({type(e).__name__}: {e})"]
    meta, rows, errors = {}, [], []
    if isinstance(data, dict):
        for key, value in data.items():
            if key in ROW_LISTS and isinstance(value, list):
                rows.extend(value)
            elif key == "meta" and isinstance(value, dict):
                meta.update(value)
            elif key == "errors" and isinstance(value, list):
                errors.extend(str(e.get("error", e)) if isinstance(e, dict) else str(e) for e in value)
            elif not isinstance(value, (list, dict)):
                meta[key] = value
            elif isinstance(value, dict):
                meta[key] = value
        if not rows and "batch" in data:
            rows = [data]
    elif isinstance(data, list):
        rows = data
    good = []
    for r in rows:
        if isinstance(r, dict) and "batch" in r and ("images_per_s" in r or "ms_per_step" in r):
            good.append(r)
        elif isinstance(r, dict):
            meta.update({k: v for k, v in r.items() if not isinstance(v, (list, dict))})
    return good, meta, errors


def ips(r):
    if r.get("images_per_s") is not None:
        return float(r["images_per_s"])
    return float(r["batch"]) * 1000.0 / float(r["ms_per_step"])


def opt_level(r):
    v = str(r.get("opt_level", r.get("config", "?")))
    return v if v.upper().startswith("O") else "O" + v


def pt_label(r):
    return f"{r['config']} {r['layout']}" + (" (CUDA graph)" if r.get("graph") else "")


def fmt_ratio(a, b):
    return f"{a / b:.2f}×" if a and b else "–"


def header(ge_meta, pt_meta):
    lines = []
    gpu = pt_meta.get("gpu") or ge_meta.get("gpu") or ge_meta.get("device")
    driver = pt_meta.get("driver") or ge_meta.get("driver")
    if not gpu or not driver or str(driver).startswith("unknown"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
            if out:
                name, drv = [x.strip() for x in out[0].split(",")[:2]]
                gpu, driver = gpu or name, drv
        except Exception:  # noqa: BLE001
            pass
    lines.append(f"- GPU: {gpu or 'unknown'}" + (f" ({pt_meta['gpu_memory_bytes'] / 2**30:.0f} GiB, "
                                                 f"sm_{str(pt_meta.get('compute_capability', '?')).replace('.', '')})"
                                                 if isinstance(pt_meta.get("gpu_memory_bytes"), int) else ""))
    lines.append(f"- Driver: {driver or 'unknown'}")
    if pt_meta:
        lines.append(f"- PyTorch {pt_meta.get('torch', '?')}, CUDA {pt_meta.get('cuda', '?')}, "
                     f"cuDNN {pt_meta.get('cudnn', '?')}, Python {pt_meta.get('python', '?')}; "
                     f"cudnn.benchmark on, TF32 off; eager Adam: {pt_meta.get('adam_eager', '?')}, "
                     f"graphs: Adam(capturable, foreach)")
        lines.append(f"- DCGAN imageSize {pt_meta.get('imageSize', '?')}, ngf {pt_meta.get('ngf', '?')}, "
                     f"ndf {pt_meta.get('ndf', '?')}, nz {pt_meta.get('nz', '?')}; synthetic data resident on "
                     f"the GPU; G's step computes no D weight gradients"
                     + (" (PyTorch: it does, --d-grads-in-g-step)" if pt_meta.get("d_grads_in_g_step") else ""))
    ge_items = [f"{k} {v}" for k, v in ge_meta.items() if not isinstance(v, (list, dict)) and k not in ("framework",)]
    if ge_items:
        lines.append("- ganengine: " + ", ".join(ge_items[:12]))
    for note in pt_meta.get("notes", []) or []:
        lines.append(f"- {note}")
    return lines


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    ge_rows, ge_meta, ge_err = load(argv[1])
    pt_rows, pt_meta, pt_err = load(argv[2])
    if not ge_rows and not pt_rows:
        print("bench_compare: no rows in either file: " + "; ".join(ge_err + pt_err), file=sys.stderr)
        return 1
    print("## ganengine vs PyTorch: DCGAN training step\n")
    print("\n".join(header(ge_meta, pt_meta)))
    print()
    for e in ge_err:
        print(f"> ganengine: {e}")
    for e in pt_err:
        print(f"> PyTorch: {e}")
    if ge_err or pt_err:
        print()

    batches = sorted({int(r["batch"]) for r in ge_rows} | {int(r["batch"]) for r in pt_rows})
    pt_ref = {int(r["batch"]): r for r in pt_rows
              if r.get("precision") == "amp_fp16" and r.get("layout") == "channels_last" and not r.get("graph")}

    print("### Ratios (ganengine images/s ÷ PyTorch images/s; > 1: ganengine faster)\n")
    print("| batch | family | ganengine | img/s | best PyTorch of the family | img/s | ratio | "
          "PyTorch autocast channels_last eager img/s | ratio |")
    print("| ---: | --- | --- | ---: | --- | ---: | ---: | ---: | ---: |")
    for batch in batches:
        ref = pt_ref.get(batch)
        for family, levels, precision in FAMILIES:
            cands = [r for r in pt_rows if int(r["batch"]) == batch and r.get("precision") == precision]
            best = max(cands, key=ips) if cands else None
            ges = [r for lv in levels for r in ge_rows if int(r["batch"]) == batch and opt_level(r) == lv]
            if not ges:
                ges = [None]
            for g in ges:
                g_ips = ips(g) if g else None
                print(f"| {batch} | {family} | {opt_level(g) if g else ', '.join(levels) + ' (missing)'} | "
                      f"{f'{g_ips:.0f}' if g_ips else '–'} | {pt_label(best) if best else '–'} | "
                      f"{f'{ips(best):.0f}' if best else '–'} | {fmt_ratio(g_ips, ips(best) if best else None)} | "
                      f"{f'{ips(ref):.0f}' if ref else '–'} | {fmt_ratio(g_ips, ips(ref) if ref else None)} |")
    print()

    if ge_rows:
        print("### ganengine\n")
        print("| batch | opt level | ms/step | images/s | TFLOP/s | of GEMM peak | peak memory (MiB) |")
        print("| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
        for r in sorted(ge_rows, key=lambda r: (int(r["batch"]), opt_level(r))):
            tf, frac, mem = r.get("tflops"), r.get("fraction_of_gemm_peak"), r.get("peak_mem_bytes", r.get("peak_alloc_bytes"))
            ms = r.get("ms_per_step")
            print(f"| {r['batch']} | {opt_level(r)} | {f'{float(ms):.3f}' if ms is not None else '–'} | "
                  f"{ips(r):.0f} | {f'{float(tf):.1f}' if tf is not None else '–'} | "
                  f"{f'{100 * float(frac):.1f}%' if frac is not None else '–'} | "
                  f"{f'{float(mem) / 2**20:.0f}' if mem is not None else '–'} |")
        print()
    if pt_rows:
        print("### PyTorch\n")
        print("| batch | config | precision | layout | CUDA graph | ms/step | images/s | peak memory (MiB) |")
        print("| ---: | --- | --- | --- | --- | ---: | ---: | ---: |")
        for r in sorted(pt_rows, key=lambda r: (int(r["batch"]), r.get("precision", ""), r.get("config", ""),
                                                r.get("layout", ""))):
            mem = r.get("peak_mem_bytes")
            print(f"| {r['batch']} | {r.get('config', '?')} | {r.get('precision', '?')} | {r.get('layout', '?')} | "
                  f"{'yes' if r.get('graph') else 'no'} | {float(r['ms_per_step']):.3f} | {ips(r):.0f} | "
                  f"{f'{float(mem) / 2**20:.0f}' if mem is not None else '–'} |")
        print()
        for r in pt_rows:
            if r.get("warning"):
                print(f"> PyTorch {pt_label(r)} batch {r['batch']}: {r['warning']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
