#!/usr/bin/env python3
"""Checks a `ganengine train` run's TensorBoard event files with TensorBoard's own reader.

    python tools/check_tensorboard.py OUTF

OUTF is the run's --outf. Every scalar tag TensorBoard reads from OUTF/tb must hold, at every
step, the value of metrics.jsonl's record of that step (as the float32 the event stores), every
logged step must be there once, the events' wall times must be the records' "time", and the last
sample grid of each epoch must be that epoch's fake_samples_epoch_NNN.png, byte for byte. Needs
the `tensorboard` package (PyPI); exits 1 with a line per difference.
"""
import argparse
import json
import os
import struct
import sys

from tensorboard.backend.event_processing import event_accumulator

# TensorBoard tag -> (metrics.jsonl key, index into its array or None); src/train/logged_step.cpp
# writes both.
TAG_KEYS = {
    "Loss_D": ("loss_D", None),
    "Loss_G": ("loss_G", None),
    "errD_real": ("errD_real", None),
    "errD_fake": ("errD_fake", None),
    "D_x": ("D_x", None),
    "D_G_z1": ("D_G_z1", None),
    "D_G_z2": ("D_G_z2", None),
    "loss_scale/errD_real": ("loss_scale", 0),
    "loss_scale/errD_fake": ("loss_scale", 1),
    "loss_scale/errG": ("loss_scale", 2),
    "overflow/errD_real": ("overflow", 0),
    "overflow/errD_fake": ("overflow", 1),
    "overflow/errG": ("overflow", 2),
    "images_per_s": ("images_per_s", None),
    "lr/G": ("lr_G", None),
    "lr/D": ("lr_D", None),
}
IMAGE_TAG = "fake_samples"


def as_float32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def check(outf):
    problems = []
    records = {}
    with open(os.path.join(outf, "metrics.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            records[r["step"]] = r
    with open(os.path.join(outf, "run.json")) as f:
        per_epoch = json.load(f)["resolved"]["batches_per_epoch"]

    acc = event_accumulator.EventAccumulator(
        os.path.join(outf, "tb"), size_guidance={event_accumulator.SCALARS: 0, event_accumulator.IMAGES: 0}
    )
    acc.Reload()
    tags = acc.Tags()
    missing = sorted(set(TAG_KEYS) - set(tags["scalars"]))
    extra = sorted(set(tags["scalars"]) - set(TAG_KEYS))
    if missing or extra:
        problems.append(f"scalar tags: missing {missing}, unexpected {extra}")
    compared = 0
    for tag in sorted(set(TAG_KEYS) & set(tags["scalars"])):
        key, index = TAG_KEYS[tag]
        events = acc.Scalars(tag)
        steps = [e.step for e in events]
        if sorted(steps) != sorted(records) or len(set(steps)) != len(steps):
            problems.append(f"{tag}: steps {steps} but metrics.jsonl logs {sorted(records)}")
        for e in events:
            r = records.get(e.step)
            if r is None:
                continue
            want = r[key] if index is None else r[key][index]
            if e.value != as_float32(float(want)):
                problems.append(f"{tag} at step {e.step}: {e.value!r} in the events, {want!r} in metrics.jsonl")
            if abs(e.wall_time - r["time"]) > 1e-5:
                problems.append(f"{tag} at step {e.step}: wall time {e.wall_time} but the record's time {r['time']}")
            compared += 1

    if IMAGE_TAG not in tags["images"]:
        problems.append(f"no {IMAGE_TAG} images")
        images = []
    else:
        images = acc.Images(IMAGE_TAG)
    last_of_epoch = {}
    for im in images:  # in step order: each epoch's last grid is what its PNG holds
        last_of_epoch[im.step // per_epoch] = im
    for epoch, im in sorted(last_of_epoch.items()):
        path = os.path.join(outf, "fake_samples_epoch_%03d.png" % epoch)
        with open(path, "rb") as f:
            png = f.read()
        if im.encoded_image_string != png:
            problems.append(f"{IMAGE_TAG} at step {im.step}: not the bytes of {path}")
        width, height = struct.unpack(">II", png[16:24])
        if (im.width, im.height) != (width, height):
            problems.append(f"{IMAGE_TAG} at step {im.step}: {im.width}x{im.height}, the PNG is {width}x{height}")
    return problems, compared, len(images)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("outf", help="the run's --outf folder")
    args = parser.parse_args()
    problems, compared, images = check(args.outf)
    for p in problems:
        print("check_tensorboard:", p, file=sys.stderr)
    if problems:
        sys.exit(1)
    print(f"check_tensorboard: {args.outf}: {compared} scalar values and {images} images agree with "
          "metrics.jsonl and the PNGs")


if __name__ == "__main__":
    main()
