#!/usr/bin/env python3
"""Checks that netG/netD files written by `ganengine train` carry exactly the keys, shapes and
dtypes of the example's Generator/Discriminator state_dict.

  check_checkpoint.py --netG out/netG_epoch_0.safetensors --netD out/netD_epoch_0.safetensors \
      [--nz 100 --ngf 64 --ndf 64 --nc 3 --imageSize 64] [--torch]

Needs only the PyPI packages safetensors and numpy; with --torch it also loads the files into
PyTorch modules (strict load_state_dict), which needs torch.
"""
import argparse
import sys

from safetensors.numpy import load_file


def generator_spec(nz, ngf, nc, size):
    spec, layer, mult = {}, 0, size // 8

    def convt(cin, cout):
        nonlocal layer
        spec[f"main.{layer}.weight"] = ((cin, cout, 4, 4), "float32")

    def bn(c):
        for k in ("weight", "bias", "running_mean", "running_var"):
            spec[f"main.{layer + 1}.{k}"] = ((c,), "float32")
        spec[f"main.{layer + 1}.num_batches_tracked"] = ((), "int64")

    convt(nz, ngf * mult)
    bn(ngf * mult)
    layer += 3
    while mult > 1:
        convt(ngf * mult, ngf * mult // 2)
        bn(ngf * mult // 2)
        layer += 3
        mult //= 2
    convt(ngf, nc)
    return spec


def discriminator_spec(ndf, nc, size):
    spec = {"main.0.weight": ((ndf, nc, 4, 4), "float32")}
    layer, mult, s = 2, 1, size // 2
    while s > 4:
        spec[f"main.{layer}.weight"] = ((ndf * mult * 2, ndf * mult, 4, 4), "float32")
        for k in ("weight", "bias", "running_mean", "running_var"):
            spec[f"main.{layer + 1}.{k}"] = ((ndf * mult * 2,), "float32")
        spec[f"main.{layer + 1}.num_batches_tracked"] = ((), "int64")
        layer, mult, s = layer + 3, mult * 2, s // 2
    spec[f"main.{layer}.weight"] = ((1, ndf * mult, 4, 4), "float32")
    return spec


def check(path, spec):
    tensors = load_file(path)
    problems = []
    for k in sorted(set(spec) | set(tensors)):
        if k not in tensors:
            problems.append(f"missing {k}")
        elif k not in spec:
            problems.append(f"unexpected {k}")
        elif tuple(tensors[k].shape) != spec[k][0] or str(tensors[k].dtype) != spec[k][1]:
            problems.append(f"{k}: {tensors[k].dtype}{list(tensors[k].shape)}, expected {spec[k][1]}{list(spec[k][0])}")
    for p in problems:
        print(f"{path}: {p}")
    print(f"{path}: {len(tensors)} tensors, {'OK' if not problems else f'{len(problems)} problems'}")
    return not problems


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--netG")
    ap.add_argument("--netD")
    ap.add_argument("--nz", type=int, default=100)
    ap.add_argument("--ngf", type=int, default=64)
    ap.add_argument("--ndf", type=int, default=64)
    ap.add_argument("--nc", type=int, default=3)
    ap.add_argument("--imageSize", type=int, default=64)
    ap.add_argument("--torch", action="store_true", help="also strict-load into PyTorch modules")
    a = ap.parse_args()
    ok = True
    if a.netG:
        ok &= check(a.netG, generator_spec(a.nz, a.ngf, a.nc, a.imageSize))
    if a.netD:
        ok &= check(a.netD, discriminator_spec(a.ndf, a.nc, a.imageSize))
    if a.torch and ok:
        import safetensors.torch
        sys.path.insert(0, __file__.rsplit("/", 1)[0])
        from make_goldens import Discriminator, Generator
        if a.netG:
            Generator(a.nz, a.ngf, a.nc, a.imageSize).load_state_dict(safetensors.torch.load_file(a.netG))
            print(f"{a.netG}: loads into PyTorch's Generator (strict)")
        if a.netD:
            Discriminator(a.ndf, a.nc, a.imageSize).load_state_dict(safetensors.torch.load_file(a.netD))
            print(f"{a.netD}: loads into PyTorch's Discriminator (strict)")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
