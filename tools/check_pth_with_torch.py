#!/usr/bin/env python3
"""Checks ganengine's .pth reading against PyTorch itself, on a host with PyTorch:

1. torch.load reads every .pth golden of tests/goldens/ (torch.save's, tools/make_pth_goldens.py)
   to the tensors of its safetensors twin, exactly;
2. state_dicts that torch.save itself writes, in the ZIP format and the legacy one, from
   PyTorch's own DCGAN Generator and Discriminator (tools/make_goldens.py), convert with
   `ganengine convert` to safetensors holding the same tensors, exactly.

  python3 tools/check_pth_with_torch.py PATH/TO/ganengine
Exit status 0 when every check passed.
"""
import os
import subprocess
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_goldens import Discriminator, Generator, weights_init  # noqa: E402
from quality.safetensors_io import load  # noqa: E402


def load_file(path):
    return {k: torch.from_numpy(v) for k, v in load(path).items()}


GOLDENS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "goldens")
PAIRS = [("pth_netD_nc3.pth", "pth_netD_nc3.safetensors"), ("pth_netG_nc1.pth", "pth_netG_nc1.safetensors"),
         ("pth_netG_nc1_dataparallel.pth", "pth_netG_nc1.safetensors"),
         ("pth_netG_nc3_legacy.pth", "pth_netG_nc3.safetensors")]


def same(a, b, what):
    a = {k[len("module."):] if k.startswith("module.") else k: v for k, v in a.items()}
    ok = sorted(a) == sorted(b) and all(a[k].dtype == b[k].dtype and torch.equal(a[k].cpu(), b[k]) for k in a)
    print(f"{'ok' if ok else 'DIFFERENT'}: {what} ({len(a)} tensors)")
    return ok


def main():
    binary = sys.argv[1]
    ok = True
    for pth, twin in PAIRS:
        ok &= same(torch.load(os.path.join(GOLDENS, pth), weights_only=True),
                   load_file(os.path.join(GOLDENS, twin)), f"torch.load({pth}) vs {twin}")
    torch.manual_seed(1)
    nets = {"G": Generator(8, 4, 3, 16), "D": Discriminator(4, 3, 16)}
    with tempfile.TemporaryDirectory() as tmp:
        for name, net in nets.items():
            net.apply(weights_init)
            net(torch.randn(2, 8, 1, 1) if name == "G" else torch.randn(2, 3, 16, 16))  # running stats move
            for legacy in (False, True):
                pth = os.path.join(tmp, f"net{name}{'_legacy' if legacy else ''}.pth")
                torch.save(net.state_dict(), pth, _use_new_zipfile_serialization=not legacy)
                out = pth + ".safetensors"
                r = subprocess.run([binary, "convert", pth, out], capture_output=True, text=True)
                if r.returncode != 0:
                    print(f"FAILED: ganengine convert {os.path.basename(pth)}: {r.stdout}{r.stderr}")
                    ok = False
                    continue
                ok &= same(net.state_dict(), load_file(out), f"torch.save -> ganengine convert: {os.path.basename(pth)}")
    print("pth checks:", "passed" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
