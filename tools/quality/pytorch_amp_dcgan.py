#!/usr/bin/env python3
"""The reference for the quality comparison: the DCGAN of Apex's examples/dcgan/main_amp.py
trained by PyTorch's own mixed precision, torch.autocast(float16) + GradScaler.

  pytorch_amp_dcgan.py --dataroot DIR --outf OUT [--niter 6] [--manualSeed 1] [--scaler single]

What it shares with `ganengine train --dataset fashion-mnist`: the networks (tools/make_goldens.py's
Generator and Discriminator, DCGAN's weights_init), the step in main_amp.py's order (D on real
against 1, D on G(z).detach() against 0, D's step; D on G(z) against 1, G's step) with
BCEWithLogitsLoss, Adam(lr 2e-4, betas (0.5, 0.999)) for each network, batches of 64 shuffled
each epoch with the last, partial batch kept (the example's DataLoader), and the data: the
60,000 training images resized to --imageSize as torchvision's Resize does and normalised to
[-1, 1]. The images stay on the GPU as bytes and each batch is converted there.

Loss scaling (--scaler): `single` (the default) is PyTorch's documented idiom for several
losses and optimizers: one GradScaler, each loss scaled by it, each optimizer stepped through
it, one update() per iteration. `per-optimizer` gives D and G a GradScaler each. Apex's one
dynamic scale per loss (ganengine's O1 and O2) cannot be expressed with GradScaler: D's two
losses add into the same gradients, which one unscale must undo.

Writes OUT/netG_epoch_%d.safetensors after each epoch (%d from 0, as ganengine and the example
name them; fp32 state_dict under the example's names) and prints one line per epoch: mean
losses, the loss scale and seconds (the loss scale is read once an epoch: a read waits for the
GPU).
"""
import argparse
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dcgan_models  # noqa: E402
import fashion_mnist  # noqa: E402
import safetensors_io  # noqa: E402


def make_scaler():
    grad_scaler = getattr(torch.amp, "GradScaler", None)
    if grad_scaler is not None:
        return grad_scaler("cuda")
    return torch.cuda.amp.GradScaler()


def save_generator(net, path):
    state = {k: v.detach().float().cpu().numpy() if v.is_floating_point() else v.detach().cpu().numpy()
             for k, v in net.state_dict().items()}
    safetensors_io.save(path, state, {"format": "pt", "writer": "tools/quality/pytorch_amp_dcgan.py"})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataroot", required=True, help="folder with the Fashion-MNIST IDX files")
    ap.add_argument("--outf", required=True)
    ap.add_argument("--niter", type=int, default=6, help="epochs")
    ap.add_argument("--manualSeed", type=int, default=1)
    ap.add_argument("--batchSize", type=int, default=64)
    ap.add_argument("--imageSize", type=int, default=64)
    ap.add_argument("--nz", type=int, default=100)
    ap.add_argument("--ngf", type=int, default=64)
    ap.add_argument("--ndf", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--beta1", type=float, default=0.5)
    ap.add_argument("--scaler", choices=("single", "per-optimizer"), default="single")
    ap.add_argument("--max-steps", type=int, default=-1, help="stop after N steps (for a quick check)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("pytorch_amp_dcgan.py: needs a CUDA GPU (autocast float16 + GradScaler)")
    device = torch.device("cuda")
    os.makedirs(args.outf, exist_ok=True)

    torch.manual_seed(args.manualSeed)
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False

    start = time.time()
    images, _ = fashion_mnist.load(args.dataroot, "train", args.imageSize)
    data = torch.from_numpy(images).to(device).unsqueeze(1)  # N x 1 x S x S bytes
    n = data.shape[0]
    print(f"data: {n} images of {args.imageSize}x{args.imageSize} ({time.time() - start:.1f} s)", flush=True)

    netG = dcgan_models.Generator(args.nz, args.ngf, 1, args.imageSize).to(device)
    netD = dcgan_models.Discriminator(args.ndf, 1, args.imageSize).to(device)
    netG.apply(dcgan_models.weights_init)
    netD.apply(dcgan_models.weights_init)
    criterion = nn.BCEWithLogitsLoss()
    optD = torch.optim.Adam(netD.parameters(), lr=args.lr, betas=(args.beta1, 0.999))
    optG = torch.optim.Adam(netG.parameters(), lr=args.lr, betas=(args.beta1, 0.999))
    scalerD = make_scaler()
    scalerG = scalerD if args.scaler == "single" else make_scaler()
    shuffle = torch.Generator(device="cpu").manual_seed(args.manualSeed)

    def autocast():
        return torch.autocast("cuda", dtype=torch.float16)

    step = 0
    for epoch in range(args.niter):
        epoch_start = time.time()
        sums = torch.zeros(3, device=device)  # errD, errG, D(x)
        order = torch.randperm(n, generator=shuffle).to(device)
        batches = 0
        for i in range(0, n, args.batchSize):
            real = fashion_mnist.to_unit_range(data[order[i:i + args.batchSize]])
            b = real.shape[0]
            ones = torch.ones(b, device=device)
            zeros = torch.zeros(b, device=device)

            netD.zero_grad(set_to_none=True)
            with autocast():
                out_real = netD(real)
                errD_real = criterion(out_real, ones)
            scalerD.scale(errD_real).backward()
            noise = torch.randn(b, args.nz, 1, 1, device=device)
            with autocast():
                fake = netG(noise)
                errD_fake = criterion(netD(fake.detach()), zeros)
            scalerD.scale(errD_fake).backward()
            scalerD.step(optD)
            if scalerG is not scalerD:
                scalerD.update()

            netG.zero_grad(set_to_none=True)
            with autocast():
                errG = criterion(netD(fake), ones)
            scalerG.scale(errG).backward()
            scalerG.step(optG)
            scalerG.update()  # with one scaler: once per iteration, after both steps

            sums += torch.stack([(errD_real + errD_fake).detach().float(), errG.detach().float(),
                                 torch.sigmoid(out_real.detach().float()).mean()])
            batches += 1
            step += 1
            if 0 < args.max_steps <= step:
                break
        mean = (sums / batches).tolist()
        path = os.path.join(args.outf, f"netG_epoch_{epoch}.safetensors")
        save_generator(netG, path)
        finite = all(np.isfinite(mean))
        scales = f"{scalerD.get_scale():g}" if args.scaler == "single" else \
            f"{scalerD.get_scale():g} {scalerG.get_scale():g}"
        print(f"[{epoch}/{args.niter}] Loss_D: {mean[0]:.4f} Loss_G: {mean[1]:.4f} D(x): {mean[2]:.4f} "
              f"scale: {scales} steps: {batches} ({time.time() - epoch_start:.1f} s) -> {path}",
              flush=True)
        if not finite:
            print("pytorch_amp_dcgan.py: the losses are not finite: training diverged", flush=True)
            return 3
        if 0 < args.max_steps <= step:
            break
    print(f"done: {step} steps in {time.time() - start:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
