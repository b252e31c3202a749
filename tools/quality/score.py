#!/usr/bin/env python3
"""Scores generators: 5,000 samples from each against the 10,000 Fashion-MNIST test images, in
the feature space of tools/quality/classifier.py.

  score.py --dataroot DIR --classifier FILE --netG out/netG_epoch_5.safetensors [more ...]
           [--num 5000] [--noise-seed 1234] [--modes train,eval] [--tag JSON] [--out results.jsonl]

Each --netG file (ganengine's netG_epoch_%d.safetensors, or a PyTorch state_dict saved as
.safetensors or .pth) is loaded strictly into the example's Generator (tools/make_goldens.py's
twin; ganengine's weights give its outputs within 2e-7) and draws --num samples in fp32 from one
fixed noise (the same for every file), in batches of 64:
  train  BatchNorm normalises with each batch's statistics, as the example draws its samples
         (momentum 0, and the stored running statistics restored after drawing)
  eval   BatchNorm uses the stored running statistics
Prints one JSON line per file and mode: fd (Frechet distance of the classifier's 128 features),
is / is_std (exp E[KL(p(y|x) || p(y))] over 10 splits), entropy (of the predicted-class
histogram, 1 = uniform), pixel_mean / pixel_std, finite (false when a sample is NaN or inf, and
then no metric), epoch (epochs trained: netG_epoch_K holds K + 1), with the --tag fields merged
in. --out also appends the lines to a file.
"""
import argparse
import json
import os
import re
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import classifier as classifier_mod  # noqa: E402
import dcgan_models  # noqa: E402
import metrics  # noqa: E402
import safetensors_io  # noqa: E402

DRAW_BATCH = 64


def load_state_dict(path):
    if path.endswith(".pth") or path.endswith(".pt"):
        state = torch.load(path, map_location="cpu", weights_only=True)
        return {k: v.float() if v.is_floating_point() else v for k, v in state.items()}
    return {k: torch.from_numpy(np.array(v)) for k, v in safetensors_io.load(path).items()}


def epochs_trained(path):
    m = re.search(r"netG_epoch_(\d+)\.", os.path.basename(path))
    return int(m.group(1)) + 1 if m else None


def batchnorms(net):
    return [m for m in net.modules() if isinstance(m, torch.nn.BatchNorm2d)]


@torch.no_grad()
def draw(net, noise, num, mode):
    """num samples (float32, on the device), drawn DRAW_BATCH at a time."""
    if mode == "train":
        net.train()
        for bn in batchnorms(net):
            bn.momentum = 0.0  # running = (1 - momentum) running + momentum batch: unchanged
    else:
        net.eval()
    # Restored afterwards all the same: 0 x a NaN batch statistic is NaN, and eval mode must see the
    # statistics as stored.
    stored = {k: v.clone() for k, v in net.state_dict().items()}
    images = torch.cat([net(noise[i:i + DRAW_BATCH]) for i in range(0, noise.shape[0], DRAW_BATCH)])[:num]
    net.load_state_dict(stored)
    return images.float()


def score_images(images, clf, test_mu, test_sigma):
    finite = bool(torch.isfinite(images).all().item())
    out = {"finite": finite, "pixel_mean": None, "pixel_std": None, "fd": None, "is": None, "is_std": None,
           "entropy": None}
    if not finite:
        out["nonfinite_fraction"] = float((~torch.isfinite(images)).float().mean().item())
        return out
    feats, probs = classifier_mod.features_and_probs(clf, images)
    mu, sigma = metrics.feature_statistics(feats)
    is_mean, is_std = metrics.inception_score(probs)
    out.update({"pixel_mean": float(images.mean().item()), "pixel_std": float(images.std().item()),
                "fd": metrics.frechet_distance(mu, sigma, test_mu, test_sigma), "is": is_mean, "is_std": is_std,
                "entropy": metrics.class_histogram_entropy(probs)})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--netG", nargs="+", required=True, help="generator weights (.safetensors or .pth)")
    ap.add_argument("--dataroot", required=True, help="folder with the Fashion-MNIST IDX files")
    ap.add_argument("--classifier", required=True, help="classifier.py's cached weights (trained there if absent)")
    ap.add_argument("--num", type=int, default=5000, help="samples per generator")
    ap.add_argument("--noise-seed", type=int, default=1234)
    ap.add_argument("--modes", default="train,eval", help="train (batch statistics), eval (running statistics)")
    ap.add_argument("--tag", default="{}", help="a JSON object merged into every line (run, seed, ...)")
    ap.add_argument("--out", default=None, help="also append the lines to this file")
    ap.add_argument("--device", default=None, help="cuda | cpu (default: cuda when there is one)")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    if not modes or any(m not in ("train", "eval") for m in modes):
        ap.error(f"--modes {args.modes}: expected train, eval or both, comma separated")
    try:
        tag = json.loads(args.tag)
        assert isinstance(tag, dict)
    except (ValueError, AssertionError):
        ap.error(f"--tag {args.tag}: expected a JSON object")
    if args.num < 10:
        ap.error("--num must be at least 10 (the IS analogue splits the samples in 10)")

    torch.backends.cudnn.allow_tf32 = False  # the generator in true fp32, as ganengine's O0
    torch.backends.cuda.matmul.allow_tf32 = False
    device = classifier_mod.pick_device(args.device)
    log = classifier_mod.log_to_stderr
    clf = None
    test_stats = {}
    status = 0
    for path in args.netG:
        start = time.time()
        record = dict(tag, record="score", file=path, epoch=epochs_trained(path), num=args.num,
                      noise_seed=args.noise_seed)
        try:
            net, nz = dcgan_models.generator_from_state_dict(load_state_dict(path))
            net.to(device)
            image_size = dcgan_models.generator_shape(net.state_dict())[3]
            if clf is None or clf.image_size != image_size:
                clf, _ = classifier_mod.load_or_train(args.dataroot, args.classifier, image_size, device=device,
                                                      log=log)
                clf.image_size = image_size
            if image_size not in test_stats:
                feats, _ = classifier_mod.test_statistics(clf, args.dataroot, image_size)
                test_stats[image_size] = metrics.feature_statistics(feats)
            gen = torch.Generator(device="cpu").manual_seed(args.noise_seed)
            batches = (args.num + DRAW_BATCH - 1) // DRAW_BATCH  # every batch full, as the example's 64
            noise = torch.randn(batches * DRAW_BATCH, nz, 1, 1, generator=gen).to(device)
            results = []
            for mode in modes:
                images = draw(net, noise, args.num, mode)
                results.append(dict(record, mode=mode, **score_images(images, clf, *test_stats[image_size])))
        except Exception as e:  # noqa: BLE001  (one bad file is reported, the others still scored)
            results = [dict(record, mode=m, error=f"{type(e).__name__}: {e}") for m in modes]
            log(f"score: {path}: {type(e).__name__}: {e}")
            status = 1
        for r in results:
            r["seconds"] = round(time.time() - start, 2)
            line = json.dumps(r)
            print(line, flush=True)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(line + "\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
