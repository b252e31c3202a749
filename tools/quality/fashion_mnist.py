"""Fashion-MNIST as `ganengine train --dataset fashion-mnist` sees it: the IDX files (gzipped or
not, in DIR/FashionMNIST/raw/ or flat in DIR, as Debian's dataset-fashion-mnist installs them),
each 28x28 image resized to SIZE x SIZE as torchvision's Resize(SIZE) does on a PIL image
(Pillow's bilinear filter; ganengine's resize matches it byte for byte), then mapped to [-1, 1]
by the example's ToTensor + Normalize((0.5,), (0.5,)).

  load(dataroot, "train" | "test", size) -> (uint8 N x size x size, uint8 labels N)
  to_unit_range(u8 tensor) -> float32 tensor in [-1, 1]   (torch; the callers have it)
"""
import gzip
import os
import struct

import numpy as np

_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
          "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def find_file(dataroot, name):
    for folder in (os.path.join(dataroot, "FashionMNIST", "raw"), dataroot):
        for candidate in (name, name + ".gz"):
            path = os.path.join(folder, candidate)
            if os.path.isfile(path):
                return path
    raise FileNotFoundError(f"{dataroot}: no {name}[.gz] in it or in its FashionMNIST/raw/ "
                            "(apt-get install dataset-fashion-mnist puts them in /usr/share/datasets/fashion-mnist)")


def read_idx(path, dims):
    """An IDX file of unsigned bytes with `dims` dimensions (3: images, 1: labels)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 + 4 * dims:
        raise ValueError(f"{path}: too short for an IDX header")
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08 or ndim != dims:
        raise ValueError(f"{path}: not an IDX file of unsigned bytes in {dims}-D "
                         f"(magic {data[:4].hex()})")
    shape = struct.unpack(f">{dims}I", data[4:4 + 4 * dims])
    count = int(np.prod(shape, dtype=np.int64))
    if len(data) - 4 - 4 * dims != count:
        raise ValueError(f"{path}: header says {shape} ({count} bytes), the file holds {len(data) - 4 - 4 * dims}")
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape).copy()


def resize(images, size):
    """uint8 N x H x W -> uint8 N x size x size, as torchvision's Resize(size) for square images."""
    if images.shape[1:] == (size, size):
        return images
    try:
        from PIL import Image
    except ImportError:
        return _resize_torch(images, size)
    out = np.empty((images.shape[0], size, size), dtype=np.uint8)
    for i, img in enumerate(images):
        out[i] = np.asarray(Image.fromarray(img).resize((size, size), Image.BILINEAR))
    return out


def _resize_torch(images, size):
    # Without Pillow: PyTorch's antialiased bilinear, rounded to bytes. It can differ from
    # Pillow's fixed-point result by one grey level in a few pixels.
    import torch
    import torch.nn.functional as F
    x = torch.from_numpy(images).unsqueeze(1).float()
    y = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False, antialias=True)
    return y.round().clamp(0, 255).to(torch.uint8).squeeze(1).numpy()


def load(dataroot, split, size):
    image_name, label_name = _FILES[split]
    images = read_idx(find_file(dataroot, image_name), 3)
    labels = read_idx(find_file(dataroot, label_name), 1)
    if images.shape[0] != labels.shape[0]:
        raise ValueError(f"{dataroot}: {images.shape[0]} {split} images but {labels.shape[0]} labels")
    return resize(images, size), labels


def to_unit_range(u8):
    """ToTensor (x / 255) then Normalize(0.5, 0.5), in float32 as torchvision computes it."""
    return (u8.float() / 255.0 - 0.5) / 0.5
