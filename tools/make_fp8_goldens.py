#!/usr/bin/env python3
"""Writes tests/goldens/golden_fp8.safetensors: float32 values and their FP8 encodings, E4M3
(float8_e4m3fn) and E5M2 (float8_e5m2), as the saturating cast computes them:
x.clamp(-max, max).to(fp8) (NaN stays NaN).

Inputs: every float16 value; for every positive FP8 value of either format the midpoint to the
next one and the floats just beside it (the ties and near-ties of round-to-nearest-even); values
beyond the largest finite and infinities; random floats over the whole FP8 range.

The encodings come from PyTorch's torch.float8_e4m3fn / torch.float8_e5m2 casts where PyTorch is
installed (the GPU host), else from the ml_dtypes package (PyPI; JAX's FP8 types, the same OCP
formats); --check FILE compares an existing golden with this machine's casts, bit for bit.

  python3 tools/make_fp8_goldens.py --out tests/goldens [--check tests/goldens/golden_fp8.safetensors]
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from quality.safetensors_io import load, save  # noqa: E402

MAX = {"e4m3": 448.0, "e5m2": 57344.0}


def encoder():
    """Returns (name, encode(values f32, fmt) -> u8 codes) of the best library available."""
    try:
        import torch

        types = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}

        def encode(x, fmt):
            t = torch.from_numpy(x).clamp(-MAX[fmt], MAX[fmt])
            return t.to(types[fmt]).view(torch.uint8).numpy()

        return f"torch {torch.__version__}", encode
    except ImportError:
        import ml_dtypes

        types = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}

        def encode(x, fmt):
            with np.errstate(invalid="ignore"):
                clamped = np.clip(x, -MAX[fmt], MAX[fmt])
            return clamped.astype(types[fmt]).view(np.uint8)

        return f"ml_dtypes {ml_dtypes.__version__}", encode


def decode_table(fmt):
    """The float value of each positive finite code, from the format's definition."""
    mbits, bias = (3, 7) if fmt == "e4m3" else (2, 15)
    values = []
    for code in range(0x80):
        e, m = code >> mbits, code & ((1 << mbits) - 1)
        if (fmt == "e4m3" and code == 0x7F) or (fmt == "e5m2" and e == 31):
            break
        values.append(m * 2.0 ** (1 - bias - mbits) if e == 0 else (1 + m / 2 ** mbits) * 2.0 ** (e - bias))
    return values


def inputs(rng):
    halves = np.arange(65536, dtype=np.uint16).view(np.float16).astype(np.float32)
    edges = []
    for fmt in MAX:
        table = decode_table(fmt)
        for lo, hi in zip(table, table[1:] + [2 * table[-1]]):
            mid = np.float32((lo + hi) / 2)
            edges += [mid, np.nextafter(mid, np.float32(0)), np.nextafter(mid, np.float32(np.inf)), np.float32(lo)]
        edges += [MAX[fmt] * 1.0001, MAX[fmt] * 2, table[1] / 2, table[1] / 4, table[1] * 0.75]
    edges += [1e30, 3.4028235e38, np.inf, -np.inf, np.nan, 2.0 ** -40, 0.0, -0.0]
    edges = np.array(edges, dtype=np.float32)
    edges = np.concatenate([edges, -edges])
    randoms = (rng.standard_normal(10000) * np.exp2(rng.uniform(-20, 18, 10000))).astype(np.float32)
    return np.concatenate([halves, edges, randoms]).astype(np.float32)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "goldens"))
    ap.add_argument("--check", help="compare this golden's encodings with this machine's casts instead")
    args = ap.parse_args()
    name, encode = encoder()
    if args.check:
        golden = load(args.check)
        for fmt in MAX:
            got = encode(golden["inputs"].copy(), fmt)
            nan = np.isnan(golden["inputs"])
            differ = int(np.count_nonzero((got != golden[fmt]) & ~nan))
            print(f"{fmt}: {differ} of {got.size} encodings differ from {args.check} ({name})")
            if differ:
                raise SystemExit(1)
        return
    x = inputs(np.random.default_rng(3))
    tensors = {"inputs": x}
    for fmt in MAX:
        tensors[fmt] = encode(x.copy(), fmt)
    path = os.path.join(args.out, "golden_fp8.safetensors")
    save(path, tensors, {"made_by": name})
    print(f"wrote {path}: {x.size} values ({name})")


if __name__ == "__main__":
    main()
