#!/usr/bin/env python3
"""Writes the .pth goldens of tests/goldens/ with PyTorch itself, and their safetensors twins.

Each .pth file is torch.save(net.state_dict(), path) of a small DCGAN network of the example
(tools/make_goldens.py's Generator and Discriminator at 16x16 images, nz = 8, ngf = ndf = 4):
in the ZIP format (torch.save's default), in the legacy format
(_use_new_zipfile_serialization=False), and as a DataParallel state_dict ("module." names). The
weights are drawn as the example's weights_init draws them, then one training-mode forward pass
moves BatchNorm's running statistics and batch counter, so that no tensor keeps its initial
value. Each .safetensors twin holds the same tensors under the plain names: the C++ tests read
both and require the same bytes (tests/io/test_pth_reader.cpp), and
tools/check_pth_with_torch.py checks them again with torch.load.

Usage (PyTorch installed; never a dependency of the engine or of CI):
  python3 tools/make_pth_goldens.py --out tests/goldens
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_goldens import Discriminator, Generator, weights_init  # noqa: E402
from quality.safetensors_io import save  # noqa: E402


def trained_net(net, batch):
    """net with the example's initial weights, after one training-mode forward pass on batch."""
    net.apply(weights_init)
    net.train()
    with torch.no_grad():
        net(batch)
    return net


def save_pth(sd, path, legacy=False):
    torch.save(sd, path, _use_new_zipfile_serialization=not legacy)
    print("%s: %d bytes" % (os.path.basename(path), os.path.getsize(path)))


def save_twin(sd, path):
    save(path, {name: t.detach().cpu().numpy() for name, t in sd.items()})
    print("%s: %d bytes" % (os.path.basename(path), os.path.getsize(path)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="tests/goldens")
    args = parser.parse_args()
    torch.manual_seed(2809)
    netg1 = trained_net(Generator(8, 4, 1, 16), torch.randn(4, 8, 1, 1))
    netg3 = trained_net(Generator(8, 4, 3, 16), torch.randn(4, 8, 1, 1))
    netd3 = trained_net(Discriminator(4, 3, 16), torch.rand(4, 3, 16, 16) * 2 - 1)
    out = args.out
    save_pth(netg1.state_dict(), os.path.join(out, "pth_netG_nc1.pth"))
    save_pth(torch.nn.DataParallel(netg1).state_dict(), os.path.join(out, "pth_netG_nc1_dataparallel.pth"))
    save_twin(netg1.state_dict(), os.path.join(out, "pth_netG_nc1.safetensors"))
    save_pth(netg3.state_dict(), os.path.join(out, "pth_netG_nc3_legacy.pth"), legacy=True)
    save_twin(netg3.state_dict(), os.path.join(out, "pth_netG_nc3.safetensors"))
    save_pth(netd3.state_dict(), os.path.join(out, "pth_netD_nc3.pth"))
    save_twin(netd3.state_dict(), os.path.join(out, "pth_netD_nc3.safetensors"))


if __name__ == "__main__":
    main()
