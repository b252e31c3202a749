#!/usr/bin/env python3
"""Checks the parts of tools/quality that need no PyTorch: the safetensors fallback reader and
writer against the PyPI package, the IDX reader and resize, and report.py's tables and bar on
made-up results. Needs numpy, safetensors and Pillow (tools/quality/check_ci.sh installs them).
"""
import gzip
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fashion_mnist  # noqa: E402
import safetensors_io  # noqa: E402

failures = []


def expect(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}")
    if not ok:
        failures.append(name)


def refused(name, call, error_type):
    try:
        call()
    except error_type as e:
        expect(name, True, str(e))
    else:
        expect(name, False, "accepted")


def check_safetensors(tmp):
    import safetensors.numpy as st
    tensors = {"w": np.arange(24, dtype=np.float32).reshape(2, 3, 4)[:, ::2], "n": np.array(7, dtype=np.int64),
               "h": np.linspace(-2, 2, 5).astype(np.float16)}
    path = os.path.join(tmp, "a.safetensors")
    safetensors_io.save_pure(path, tensors, {"k": 1})
    theirs, ours = st.load_file(path), safetensors_io.load_pure(path)
    for name, arr in tensors.items():
        for reader, got in (("the package", theirs[name]), ("our reader", ours[name])):
            expect(f"safetensors: our writer, {name} read back by {reader}",
                   got.dtype == arr.dtype and got.shape == arr.shape and np.array_equal(got, arr))
    expect("safetensors: metadata", safetensors_io.metadata(path) == {"k": "1"})
    st.save_file(tensors | {"w": np.ascontiguousarray(tensors["w"])}, path)
    ours = safetensors_io.load_pure(path)
    expect("safetensors: the package's file read by our reader",
           all(ours[k].shape == v.shape and np.array_equal(ours[k], v) for k, v in tensors.items()))
    # bf16 is the upper half of an f32: 1.5, -2.25, 3 are exact in it.
    values = np.array([1.5, -2.25, 3.0], dtype=np.float32)
    header = json.dumps({"x": {"dtype": "BF16", "shape": [3], "data_offsets": [0, 6]}}).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + (values.view(np.uint32) >> 16).astype("<u2").tobytes())
    expect("safetensors: bf16 read as f32", np.array_equal(safetensors_io.load_pure(path)["x"], values))
    with open(path, "wb") as f:
        f.write(b"\xff" * 16)
    refused("safetensors: a header length past the file's end is refused", lambda: safetensors_io.load_pure(path),
            safetensors_io.FormatError)
    header = json.dumps({"x": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + b"\0" * 8)
    refused("safetensors: a tensor past the data's end is refused", lambda: safetensors_io.load_pure(path),
            safetensors_io.FormatError)


def write_idx(path, arr):
    with gzip.open(path, "wb") as f:
        f.write(struct.pack(">HBB", 0, 8, arr.ndim) + struct.pack(f">{arr.ndim}I", *arr.shape) + arr.tobytes())


def check_idx(tmp):
    raw = os.path.join(tmp, "FashionMNIST", "raw")
    os.makedirs(raw)
    images = np.random.default_rng(3).integers(0, 256, (5, 28, 28), dtype=np.uint8)
    write_idx(os.path.join(raw, "t10k-images-idx3-ubyte.gz"), images)
    write_idx(os.path.join(raw, "t10k-labels-idx1-ubyte.gz"), np.arange(5, dtype=np.uint8))
    got, labels = fashion_mnist.load(tmp, "test", 28)
    expect("IDX: images and labels from FashionMNIST/raw/",
           np.array_equal(got, images) and list(labels) == [0, 1, 2, 3, 4])
    big, _ = fashion_mnist.load(tmp, "test", 64)
    expect("IDX: resized to 64x64", big.shape == (5, 64, 64) and big.dtype == np.uint8)
    # A constant image stays constant through a bilinear resize.
    flat = np.full((1, 28, 28), 77, dtype=np.uint8)
    expect("resize keeps a constant image", np.all(fashion_mnist.resize(flat, 64) == 77))
    write_idx(os.path.join(raw, "t10k-labels-idx1-ubyte.gz"), np.arange(4, dtype=np.uint8))
    refused("IDX: images and labels of different counts are refused", lambda: fashion_mnist.load(tmp, "test", 28),
            ValueError)
    write_idx(os.path.join(raw, "t10k-labels-idx1-ubyte.gz"), np.zeros((5, 2), dtype=np.uint8))
    refused("IDX: labels with two dimensions are refused", lambda: fashion_mnist.load(tmp, "test", 28), ValueError)
    refused("IDX: a folder without the files is refused", lambda: fashion_mnist.load(tmp, "train", 28),
            FileNotFoundError)


def results_file(tmp, name, o1_fd_factor, o3_diverged, o4_fd_factor=1.2):
    lines = [{"record": "classifier", "image_size": 64, "test_accuracy": 0.92, "epochs": 4, "seed": 0,
              "test_is": 9.0, "test_entropy": 0.99, "real": {"fd": 0.4, "is": 8.9, "entropy": 0.99, "n": 5000}}]
    kinds = [("ganengine", "O0", 1.0), ("ganengine", "O1", o1_fd_factor), ("ganengine", "O2", 1.1),
             ("ganengine", "O3", 1.0), ("ganengine", "O4", o4_fd_factor), ("pytorch", "AMP", 1.0)]
    for impl, level, factor in kinds:
        for seed in (1, 2, 3):
            lines.append({"record": "run", "impl": impl, "opt_level": level, "seed": seed, "rc": 0, "seconds": 9,
                          "epochs_written": 4, "dir": "d", "last_line": "done"})
            for epoch in (3, 4):
                for mode in ("train", "eval"):
                    diverged = o3_diverged and level == "O3" and seed == 2 and epoch == 4
                    lines.append({"record": "score", "impl": impl, "opt_level": level, "seed": seed, "epoch": epoch,
                                  "mode": mode, "finite": not diverged,
                                  "fd": None if diverged else 10.0 * factor + seed * 0.1,
                                  "is": None if diverged else 7.0 + seed * 0.1,
                                  "entropy": None if diverged else 0.95})
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write("".join(json.dumps(r) + "\n" for r in lines))
    return path


def run_report(path, *args):
    proc = subprocess.run([sys.executable, os.path.join(HERE, "report.py"), path, *args], capture_output=True,
                          text=True)
    return proc.returncode, proc.stdout + proc.stderr


def row(text, label):
    return next((line for line in text.splitlines() if line.startswith(f"| {label} |")), "")


def check_report(tmp):
    rc, text = run_report(results_file(tmp, "pass.jsonl", 1.0, o3_diverged=True))
    expect("report: every bar level passes, exit status 0", rc == 0, f"exit {rc}")
    expect("report: O2 at 1.10x the reference distance passes",
           row(text, "ganengine O2").endswith("| 1.10 | 1.00 | pass |"), row(text, "ganengine O2"))
    expect("report: the median and range over seeds", "| 10.2 [10.1-10.3] |" in row(text, "PyTorch AMP"),
           row(text, "PyTorch AMP"))
    expect("report: a diverged O3 run is counted as the worst value",
           "3 of 3 (1 diverged)" in row(text, "ganengine O3") and "[10.1-inf]" in row(text, "ganengine O3"),
           row(text, "ganengine O3"))
    expect("report: O3 is reported, without the bar", row(text, "ganengine O3").endswith("| reported |"))
    expect("report: says when O3 diverged", "ganengine O3 seed 2, train mode: samples not finite from epoch 4" in text)
    expect("report: O4 at 1.09x O2's distance passes the FP8 bar",
           row(text, "ganengine O4").endswith("| pass (1.09x O2) |"), row(text, "ganengine O4"))
    rc, text = run_report(results_file(tmp, "o4_miss.jsonl", 1.0, o3_diverged=False, o4_fd_factor=1.3))
    expect("report: O4 at 1.18x O2's distance fails the FP8 bar, exit status 1",
           rc == 1 and row(text, "ganengine O4").endswith("| FAIL (1.18x O2) |"), row(text, "ganengine O4"))
    rc, text = run_report(results_file(tmp, "miss.jsonl", 1.2, o3_diverged=False))
    expect("report: O1 at 1.20x the reference distance fails, exit status 1",
           rc == 1 and row(text, "ganengine O1").endswith("| FAIL |"), row(text, "ganengine O1"))
    rc, text = run_report(results_file(tmp, "miss.jsonl", 1.2, o3_diverged=False), "--epochs", "3", "--fd-bar", "0.25")
    expect("report: --epochs and --fd-bar", rc == 0 and "### After 3 epochs" in text and "After 4 epochs" not in text,
           f"exit {rc}")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for check in (check_safetensors, check_idx, check_report):
            sub = os.path.join(tmp, check.__name__)
            os.makedirs(sub)
            check(sub)
    if failures:
        print(f"check_tools: {len(failures)} FAILED: {'; '.join(failures)}")
        return 1
    print("check_tools: passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
