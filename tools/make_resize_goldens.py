#!/usr/bin/env python3
"""Goldens for the image transforms and decoders (tests/data/test_image_transform.cpp).

Runs on any machine with Pillow and numpy (`pip install pillow numpy safetensors`); no PyTorch.
torchvision's Resize(size) and CenterCrop(size) on a PIL image are, in torchvision's code:
    Resize:     new_short = size, new_long = int(size * long / short);
                img.resize((new_w, new_h), Image.BILINEAR)
    CenterCrop: top = int(round((h - size) / 2.0)), left = int(round((w - size) / 2.0))
and that is what this script applies, with Pillow doing the resampling.

Writes tests/goldens/golden_resize.safetensors holding, per case,
    <case>/resize<S>  and  <case>/crop<S>     for S in 16, 32, 64 (u8 HWC, H x W x C; RGB
                                              cases keep the resize at 16 only, for size)
    free/<case>_<W>x<H>                       PIL resize to an arbitrary size
    pillow12/<key>                            where Pillow 13 runs the vertical pass first,
                                              Pillow <= 12's horizontal-first result
    input/<case>                              the input of one case, to check the pattern
The inputs are not stored (the big one would not fit the size budget): both sides compute
    pattern(x, y, c) = (3x^2 + 5y^2 + 7xy + (c + 1)(11x + 17y) + 13 (x xor y)) mod 256
and tests compare input/rgb37x23 to their own pattern first.

It also writes small image files into tests/goldens and PIL's decode of each (what torchvision's
loader, Image.open(path).convert('RGB'), returns):
    golden_photo.jpg (4:2:0), golden_photo_grey.jpg, golden_photo_cmyk.jpg (Adobe CMYK),
    golden_photo.webp (lossy), golden_grey16.png (16-bit grey), golden_maxval1000.pgm,
    golden_maxval100.ppm  ->  decode/<file name>
and photo_pipeline/resize32_crop32: Resize(32) + CenterCrop(32) of golden_photo.jpg.
"""
import json
import struct
from pathlib import Path

import numpy as np
import PIL
from PIL import Image, features

DATA = Path(__file__).resolve().parents[1] / "tests" / "data"
SIZES = (16, 32, 64)
# name -> (width, height, PIL mode)
CASES = {
    "rgb37x23": (37, 23, "RGB"),
    "grey64x48": (64, 48, "L"),
    "rgb300x200": (300, 200, "RGB"),
    "rgb17x91": (17, 91, "RGB"),
}
# Arbitrary-size resizes: both axes, one axis only, upscaling, a single pixel.
FREE = [("rgb37x23", 5, 7), ("rgb37x23", 80, 50), ("grey64x48", 64, 20), ("rgb300x200", 30, 20), ("rgb37x23", 20, 23),
        ("rgb17x91", 1, 1), ("rgb17x91", 40, 13)]


def pattern(width, height, channels):
    y, x = np.mgrid[0:height, 0:width].astype(np.int64)
    planes = [(3 * x * x + 5 * y * y + 7 * x * y + (c + 1) * (11 * x + 17 * y) + 13 * (x ^ y)) % 256
              for c in range(channels)]
    return np.stack(planes, axis=-1).astype(np.uint8)


def to_pil(hwc, mode):
    img = Image.fromarray(hwc[:, :, 0] if mode == "L" else hwc)
    assert img.mode == mode
    return img


def to_hwc(img):
    a = np.asarray(img, dtype=np.uint8)
    return a[:, :, None] if a.ndim == 2 else a


def tv_resize_size(img, size):
    w, h = img.size
    short, long = (w, h) if w <= h else (h, w)
    new_short, new_long = size, int(size * long / short)
    return (new_short, new_long) if w <= h else (new_long, new_short)


def tv_resize(img, size):
    return img.resize(tv_resize_size(img, size), Image.BILINEAR)


def resize_horizontal_first(img, size):
    """Pillow <= 12's order, on any Pillow: a width-only resize (one horizontal pass) and then
    a height-only one (one vertical pass) are exactly its two passes."""
    w, h = size
    return img.resize((w, img.size[1]), Image.BILINEAR).resize((w, h), Image.BILINEAR)


def pillow13_goes_vertical_first(img, size):
    """Pillow 13's ImagingResampleInner rule: the height loses more than twice the width's pixels."""
    lost_rows = img.size[1] - size[1]
    return lost_rows > 0 and lost_rows > (img.size[0] - size[0]) * 2


def tv_center_crop(img, size):
    w, h = img.size
    top = int(round((h - size) / 2.0))
    left = int(round((w - size) / 2.0))
    return img.crop((left, top, left + size, top + size))


def photo(width, height):
    """Something JPEG-like: smooth gradients, a hard edge and a little texture."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float64)
    r = 128 + 100 * np.sin(x / 7.0) * np.cos(y / 9.0)
    g = 255 * x / width
    b = np.where((x - width / 2) ** 2 + (y - height / 2) ** 2 < (height / 3) ** 2, 220.0, 30.0)
    texture = 20 * np.sin(x * 1.3 + y * 0.7)
    return np.clip(np.stack([r + texture, g, b - texture], axis=-1), 0, 255).astype(np.uint8)


def write_and_decode(name, img, **save_args):
    path = DATA / name
    img.save(path, **save_args)
    return to_hwc(Image.open(path).convert("RGB"))


def write_pnm(name, magic, width, height, maxval, samples):
    """PNM by hand: Pillow would not write these maxvals."""
    header = f"{magic}\n# made by make_resize_goldens.py\n{width} {height}\n{maxval}\n".encode()
    body = samples.astype(">u2" if maxval > 255 else "u1").tobytes()
    (DATA / name).write_bytes(header + body)
    return to_hwc(Image.open(DATA / name).convert("RGB"))


def save_safetensors(path, tensors, metadata):
    """The safetensors layout, by hand: 8-byte header size, JSON header, then the bytes."""
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for key in sorted(tensors):
        a = np.ascontiguousarray(tensors[key], dtype=np.uint8)
        header[key] = {"dtype": "U8", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        blobs.append(a.tobytes())
        offset += a.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    assert int(PIL.__version__.split(".")[0]) >= 13, "the goldens are Pillow 13's (its pass order)"
    tensors = {}
    inputs = {name: to_pil(pattern(w, h, 1 if mode == "L" else 3), mode) for name, (w, h, mode) in CASES.items()}
    tensors["input/rgb37x23"] = to_hwc(inputs["rgb37x23"])
    for name, img in inputs.items():
        for s in SIZES:
            resized = tv_resize(img, s)
            if s == 16 or img.mode == "L":  # larger RGB resize outputs would not fit the size budget
                tensors[f"{name}/resize{s}"] = to_hwc(resized)
            tensors[f"{name}/crop{s}"] = to_hwc(tv_center_crop(resized, s))
    for name, w, h in FREE:
        tensors[f"free/{name}_{w}x{h}"] = to_hwc(inputs[name].resize((w, h), Image.BILINEAR))
    # Where Pillow 13 runs the vertical pass first, Pillow <= 12's horizontal-first bytes too.
    for name, img in inputs.items():
        for s in SIZES:
            if pillow13_goes_vertical_first(img, tv_resize_size(img, s)):
                tensors[f"pillow12/{name}/resize{s}"] = to_hwc(resize_horizontal_first(img, tv_resize_size(img, s)))
    for name, w, h in FREE:
        if pillow13_goes_vertical_first(inputs[name], (w, h)):
            tensors[f"pillow12/free/{name}_{w}x{h}"] = to_hwc(resize_horizontal_first(inputs[name], (w, h)))

    pic = Image.fromarray(photo(44, 36))
    decoded = {
        "golden_photo.jpg": write_and_decode("golden_photo.jpg", pic, quality=85, subsampling="4:2:0"),
        "golden_photo_grey.jpg": write_and_decode("golden_photo_grey.jpg", pic.convert("L"), quality=85),
        "golden_photo_cmyk.jpg": write_and_decode("golden_photo_cmyk.jpg", pic.convert("CMYK"), quality=85),
        "golden_photo.webp": write_and_decode("golden_photo.webp", pic, quality=80),
        "golden_grey16.png": write_and_decode(
            "golden_grey16.png", Image.fromarray(pattern(8, 6, 1)[:, :, 0].astype(np.uint16) * 3)),
        "golden_maxval1000.pgm": write_pnm("golden_maxval1000.pgm", "P5", 8, 6, 1000,
                                           pattern(8, 6, 1).astype(np.uint16) * 3 + 100),
        "golden_maxval100.ppm": write_pnm("golden_maxval100.ppm", "P6", 8, 6, 100, pattern(8, 6, 3) % 101),
    }
    for file_name, hwc in decoded.items():
        tensors[f"decode/{file_name}"] = hwc
    photo_rgb = Image.open(DATA / "golden_photo.jpg").convert("RGB")
    tensors["photo_pipeline/resize32_crop32"] = to_hwc(tv_center_crop(tv_resize(photo_rgb, 32), 32))

    metadata = {"pillow": PIL.__version__, "libjpeg_turbo": str(features.version("libjpeg_turbo")),
                "libwebp": str(features.version("webp")), "pattern": __doc__.split("both sides compute")[1].split("\n")[1].strip()}
    out = DATA / "golden_resize.safetensors"
    save_safetensors(out, tensors, metadata)
    total = sum(p.stat().st_size for p in DATA.glob("golden_*") if p.name.startswith(("golden_resize", "golden_photo", "golden_grey16", "golden_maxval")))
    print(f"wrote {out} ({out.stat().st_size} bytes; {len(tensors)} tensors); image goldens total {total} bytes")


if __name__ == "__main__":
    main()
