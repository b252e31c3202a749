#!/usr/bin/env python3
"""Writes synthetic datasets in the real on-disk formats ganengine reads, for smoke tests and
benchmarks where the real data cannot be downloaded (machines without network access):

  cifar10/cifar-10-batches-bin/data_batch_{1..5}.bin   10000 records of 1 + 3072 bytes each
  mnist/MNIST/raw/train-images-idx3-ubyte.gz            60000 x 28 x 28, IDX, gzipped
  folder/<class>/<n>.jpg                                 JPEGs (Pillow), --folder-images of them
  lsun/bedroom_train_lmdb                                LMDB of WebP images (needs the `lmdb` module)

Images are smooth random blobs, not noise, so JPEG/WebP sizes and decode costs are realistic.
Usage: make_synthetic.py OUT [--only cifar10,mnist,folder,lsun] [--folder-images 5000] [--lsun-images 2000]
"""
import argparse
import gzip
import io
import os
import struct

import numpy as np


def blobs(rng, n, h, w, c):
    """n smooth images: low-resolution noise upsampled, so neighbouring pixels correlate."""
    small = rng.integers(0, 256, size=(n, max(h // 8, 2), max(w // 8, 2), c), dtype=np.uint8).astype(np.float32)
    ys = np.linspace(0, small.shape[1] - 1, h)
    xs = np.linspace(0, small.shape[2] - 1, w)
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1, x1 = np.minimum(y0 + 1, small.shape[1] - 1), np.minimum(x0 + 1, small.shape[2] - 1)
    fy, fx = (ys - y0)[None, :, None, None], (xs - x0)[None, None, :, None]
    top = small[:, y0][:, :, x0] * (1 - fx) + small[:, y0][:, :, x1] * fx
    bot = small[:, y1][:, :, x0] * (1 - fx) + small[:, y1][:, :, x1] * fx
    return np.clip(top * (1 - fy) + bot * fy, 0, 255).astype(np.uint8)


def write_atomic(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".part", "wb") as f:
        f.write(data)
    os.replace(path + ".part", path)


def cifar10(out, rng):
    for b in range(1, 6):
        imgs = blobs(rng, 10000, 32, 32, 3)  # HWC
        planar = imgs.transpose(0, 3, 1, 2).reshape(10000, 3072)
        labels = rng.integers(0, 10, size=(10000, 1), dtype=np.uint8)
        write_atomic(os.path.join(out, "cifar10", "cifar-10-batches-bin", f"data_batch_{b}.bin"),
                     np.concatenate([labels, planar], axis=1).tobytes())
    print("cifar10: 5 x 10000 images")


def mnist(out, rng):
    imgs = blobs(rng, 60000, 28, 28, 1)[..., 0]
    raw = struct.pack(">IIII", 0x803, 60000, 28, 28) + imgs.tobytes()
    write_atomic(os.path.join(out, "mnist", "MNIST", "raw", "train-images-idx3-ubyte.gz"), gzip.compress(raw, 1))
    print("mnist: 60000 images")


def folder(out, rng, n):
    from PIL import Image
    for i in range(n):
        img = blobs(rng, 1, 256, 256, 3)[0]
        path = os.path.join(out, "folder", f"class{i % 4}", f"{i:06d}.jpg")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        Image.fromarray(img).save(path, quality=90)
    print(f"folder: {n} JPEGs of 256x256 in 4 classes")


def lsun(out, rng, n):
    import lmdb
    from PIL import Image
    path = os.path.join(out, "lsun", "bedroom_train_lmdb")
    os.makedirs(path, exist_ok=True)
    env = lmdb.open(path, map_size=1 << 30)
    with env.begin(write=True) as txn:
        for i in range(n):
            buf = io.BytesIO()
            Image.fromarray(blobs(rng, 1, 96, 128, 3)[0]).save(buf, format="WEBP", quality=80)
            txn.put(f"{i:08x}".encode(), buf.getvalue())
    env.close()
    print(f"lsun: {n} WebP images of 128x96")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--only", default="cifar10,mnist,folder,lsun")
    ap.add_argument("--folder-images", type=int, default=5000)
    ap.add_argument("--lsun-images", type=int, default=2000)
    a = ap.parse_args()
    rng = np.random.default_rng(2809)
    only = a.only.split(",")
    if "cifar10" in only:
        cifar10(a.out, rng)
    if "mnist" in only:
        mnist(a.out, rng)
    if "folder" in only:
        folder(a.out, rng, a.folder_images)
    if "lsun" in only:
        lsun(a.out, rng, a.lsun_images)


if __name__ == "__main__":
    main()
