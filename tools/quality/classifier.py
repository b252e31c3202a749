#!/usr/bin/env python3
"""The feature space of the quality metrics: a small CNN trained to classify Fashion-MNIST, at the
GAN's image size and input range (SIZE x SIZE, one channel, [-1, 1]).

  classifier.py --dataroot DIR --cache FILE [--image-size 64] [--epochs 4] [--seed 0]

trains it (seeded: initial weights, shuffling and flips; cuDNN's deterministic algorithms), reports its
test accuracy, and saves its weights to FILE (safetensors, with the image size, accuracy and
seed in the metadata). When FILE already holds a classifier for this image size it is loaded
instead of trained. Prints one JSON line: the accuracy, and the metrics of real images as the
floor a generator can reach (5,000 training images scored against the 10,000 test images as
score.py scores generated ones: Frechet distance, IS analogue, class-histogram entropy).

score.py uses `features` (the 128 activations before the last layer) for the Frechet distance
and the softmax for the IS analogue and the class histogram.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fashion_mnist  # noqa: E402
import metrics  # noqa: E402
import safetensors_io  # noqa: E402

FORMAT = "ganengine-quality-classifier-1"
FEATURES = 128
CLASSES = 10
REAL_SAMPLES = 5000


class Classifier(nn.Module):
    def __init__(self, image_size, nc=1):
        super().__init__()
        if image_size < 16:
            raise ValueError(f"image size {image_size}: the classifier needs at least 16x16")

        def block(cin, cout, pool):
            layers = [nn.Conv2d(cin, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]
            return layers + [nn.MaxPool2d(2)] if pool else layers

        self.body = nn.Sequential(*block(nc, 32, True), *block(32, 64, True), *block(64, 128, True),
                                  *block(128, FEATURES, False), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Linear(FEATURES, FEATURES), nn.ReLU(inplace=True))
        self.head = nn.Sequential(nn.Dropout(0.3), nn.Linear(FEATURES, CLASSES))

    def features(self, x):
        return self.body(x)

    def forward(self, x):
        return self.head(self.body(x))


def pick_device(name=None):
    return torch.device(name or ("cuda" if torch.cuda.is_available() else "cpu"))


@torch.no_grad()
def features_and_probs(model, images, batch=500):
    """float64 numpy (N x 128 features, N x 10 softmax) of [-1, 1] images (a float tensor)."""
    model.eval()
    device = next(model.parameters()).device
    feats, probs = [], []
    for i in range(0, images.shape[0], batch):
        x = images[i:i + batch].to(device, torch.float32)
        f = model.features(x)
        feats.append(f.double().cpu())
        probs.append(F.softmax(model.head(f).double(), dim=1).cpu())
    return torch.cat(feats).numpy(), torch.cat(probs).numpy()


@torch.no_grad()
def accuracy(model, images_u8, labels, device):
    model.eval()
    correct = 0
    for i in range(0, images_u8.shape[0], 1000):
        x = fashion_mnist.to_unit_range(images_u8[i:i + 1000].to(device)).unsqueeze(1)
        correct += (model(x).argmax(1).cpu() == labels[i:i + 1000]).sum().item()
    return correct / images_u8.shape[0]


def train(dataroot, image_size, epochs, seed, device, log=print):
    torch.manual_seed(seed)
    torch.backends.cudnn.deterministic = True
    torch.backends.cudnn.benchmark = False
    images, labels = (torch.from_numpy(a) for a in fashion_mnist.load(dataroot, "train", image_size))
    images, labels = images.to(device), labels.to(device).long()
    model = Classifier(image_size).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    steps_per_epoch = (images.shape[0] + 127) // 128
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=2e-3, total_steps=epochs * steps_per_epoch)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    for epoch in range(epochs):
        model.train()
        start, total, count = time.time(), 0.0, 0
        order = torch.randperm(images.shape[0], generator=gen).to(device)
        for i in range(0, images.shape[0], 128):
            idx = order[i:i + 128]
            x = fashion_mnist.to_unit_range(images[idx]).unsqueeze(1)
            # Left-right flips: a mirrored garment is the same class; it generalises better.
            flip = torch.rand(x.shape[0], generator=gen).to(device) < 0.5
            x = torch.where(flip[:, None, None, None], x.flip(3), x)
            loss = F.cross_entropy(model(x), labels[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * x.shape[0]
            count += x.shape[0]
        log(f"classifier epoch {epoch + 1}/{epochs}: loss {total / count:.4f} ({time.time() - start:.1f} s)")
    return model


def save(model, path, meta):
    state = {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    safetensors_io.save(path, state, meta)


def load(path, image_size, device):
    """The cached classifier for image_size, or None when `path` holds none (or another size)."""
    if not os.path.isfile(path):
        return None, None
    meta = safetensors_io.metadata(path)
    if meta.get("format") != FORMAT or meta.get("image_size") != str(image_size):
        return None, meta
    model = Classifier(image_size)
    state = {k: torch.from_numpy(np.array(v)) for k, v in safetensors_io.load(path).items()}
    model.load_state_dict(state, strict=True)
    return model.to(device).eval(), meta


def load_or_train(dataroot, cache, image_size, epochs=4, seed=0, device=None, log=print):
    """(model, metadata): from the cache when it fits, else trained, scored and cached."""
    device = pick_device(device)
    model, meta = load(cache, image_size, device)
    if model is not None:
        log(f"classifier: {cache} (test accuracy {float(meta['test_accuracy']):.4f})")
        return model, meta
    start = time.time()
    model = train(dataroot, image_size, epochs, seed, device, log)
    test_images, test_labels = (torch.from_numpy(a) for a in fashion_mnist.load(dataroot, "test", image_size))
    acc = accuracy(model, test_images, test_labels.long(), device)
    meta = {"format": FORMAT, "image_size": str(image_size), "test_accuracy": f"{acc:.6f}", "epochs": str(epochs),
            "seed": str(seed), "train_seconds": f"{time.time() - start:.1f}"}
    save(model, cache, meta)
    log(f"classifier: test accuracy {acc:.4f} after {epochs} epochs ({time.time() - start:.1f} s), saved to {cache}")
    return model.eval(), meta


def test_statistics(model, dataroot, image_size):
    """Features and softmax of the 10,000 test images, the reference of every score."""
    images, _ = fashion_mnist.load(dataroot, "test", image_size)
    return features_and_probs(model, fashion_mnist.to_unit_range(torch.from_numpy(images)).unsqueeze(1))


def real_baseline(model, dataroot, image_size, test_features, seed=0):
    """The metrics of REAL_SAMPLES real training images against the test set."""
    images, _ = fashion_mnist.load(dataroot, "train", image_size)
    pick = np.random.default_rng(seed).permutation(images.shape[0])[:REAL_SAMPLES]
    feats, probs = features_and_probs(model, fashion_mnist.to_unit_range(torch.from_numpy(images[pick])).unsqueeze(1))
    is_mean, is_std = metrics.inception_score(probs)
    return {"fd": metrics.frechet_distance_of_features(feats, test_features), "is": is_mean, "is_std": is_std,
            "entropy": metrics.class_histogram_entropy(probs), "n": REAL_SAMPLES}


def log_to_stderr(text):
    print(text, file=sys.stderr, flush=True)  # stdout carries the JSON lines alone


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataroot", required=True, help="folder with the Fashion-MNIST IDX files")
    ap.add_argument("--cache", required=True, help="the classifier's .safetensors file (read if it fits, else written)")
    ap.add_argument("--image-size", type=int, default=64)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default=None, help="cuda | cpu (default: cuda when there is one)")
    args = ap.parse_args()
    model, meta = load_or_train(args.dataroot, args.cache, args.image_size, args.epochs, args.seed, args.device,
                                log_to_stderr)
    test_features, test_probs = test_statistics(model, args.dataroot, args.image_size)
    record = {"record": "classifier", "image_size": args.image_size, "test_accuracy": float(meta["test_accuracy"]),
              "epochs": int(meta["epochs"]), "seed": int(meta["seed"]), "cache": args.cache,
              "test_is": metrics.inception_score(test_probs)[0],
              "test_entropy": metrics.class_histogram_entropy(test_probs),
              "real": real_baseline(model, args.dataroot, args.image_size, test_features)}
    print(json.dumps(record), flush=True)
    if record["test_accuracy"] < 0.85:
        log_to_stderr(f"classifier: test accuracy {record['test_accuracy']:.4f} is below 0.85: its features are "
                      "too weak to judge samples by")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
