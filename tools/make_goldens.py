#!/usr/bin/env python3
"""Writes tests/goldens/golden_*.safetensors: reference results computed by PyTorch.

Run on a machine with PyTorch (`tools/gpu_suite.sh` does it on a GPU machine). Never a run-time or
CI dependency: the files it writes are committed, and the C++ tests read them.

  golden_ops.safetensors      per-op cases (conv, conv-transpose, batchnorm, activations, BCE),
                              inputs f32, results computed in float64 then stored f32
  golden_dcgan.safetensors    Generator and Discriminator (64x64, ngf=ndf=4, batch 2) forward and
                              backward in float64, weights from DCGAN's weights_init
  golden_adam.safetensors     three torch.optim.Adam steps (fp32)
  golden_train_inputs.safetensors / golden_train_O*.safetensors
                              20 DCGAN training steps (64x64, ngf=ndf=8, batch 4) at O0, O1, O2
                              with Apex's per-loss dynamic loss scaling emulated exactly, plus an
                              O1 run with forced overflows (test hook), as the reference trajectory
  golden_loss_scale.safetensors
                              Apex's dynamic loss scaler over thousands of steps that cross its
                              growth window, with and without overflows; checked here against
                              PyTorch's own scaler update (torch._amp_update_scale_) below the cap
  golden_grid.safetensors     torchvision.utils.save_image's pixels (make_grid, normalize=True) for
                              random batches of 1 and 3 channels, f32 and f16

  --only NAME[,NAME]          writes only these (ops, dcgan, adam, train, loss_scale, grid)
"""
import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from safetensors.torch import save_file

torch.backends.cudnn.allow_tf32 = False
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.deterministic = True
torch.backends.cudnn.benchmark = False


def save(path, tensors, meta=None):
    tensors = {k: v.detach().contiguous().cpu() for k, v in tensors.items()}
    tmp = path + ".tmp"
    save_file(tensors, tmp, metadata=meta or {})
    os.replace(tmp, path)
    print(f"wrote {path} ({os.path.getsize(path) / 1e6:.2f} MB, {len(tensors)} tensors)")


def f32(t):
    return t.to(torch.float32)


# ---------------------------------------------------------------- per-op cases
def op_goldens(path, g):
    out, meta = {}, {}

    def rnd(*shape, scale=1.0):
        return (torch.rand(*shape, generator=g, dtype=torch.float32) * 2 - 1) * scale

    conv_cases = [  # N, C, H, W, K, kernel, stride, pad
        (1, 3, 64, 64, 8, 4, 2, 1),    # D's first layer
        (2, 8, 16, 16, 16, 4, 2, 1),   # a D middle block
        (2, 32, 4, 4, 1, 4, 1, 0),     # D's last layer
        (3, 5, 7, 9, 4, 3, 1, 1),
        (2, 4, 9, 9, 6, 3, 2, 0),
    ]
    for i, (N, C, H, W, K, k, s, p) in enumerate(conv_cases):
        x, w = rnd(N, C, H, W), rnd(K, C, k, k, scale=0.3)
        xd, wd = x.double().requires_grad_(), w.double().requires_grad_()
        y = F.conv2d(xd, wd, stride=s, padding=p)
        dy = rnd(*y.shape)
        y.backward(dy.double())
        pre = f"conv{i}."
        out.update({pre + "x": x, pre + "w": w, pre + "dy": dy, pre + "y": f32(y), pre + "dx": f32(xd.grad),
                    pre + "dw": f32(wd.grad)})
        meta[f"conv{i}"] = f"{s},{p}"
    convt_cases = [  # N, Cin, H, W, Cout, kernel, stride, pad
        (2, 100, 1, 1, 32, 4, 1, 0),   # G's first layer
        (2, 32, 4, 4, 16, 4, 2, 1),    # a G middle block
        (1, 8, 32, 32, 3, 4, 2, 1),    # G's last layer
        (3, 5, 6, 7, 4, 3, 2, 1),
    ]
    for i, (N, C, H, W, K, k, s, p) in enumerate(convt_cases):
        x, w = rnd(N, C, H, W), rnd(C, K, k, k, scale=0.3)
        xd, wd = x.double().requires_grad_(), w.double().requires_grad_()
        y = F.conv_transpose2d(xd, wd, stride=s, padding=p)
        dy = rnd(*y.shape)
        y.backward(dy.double())
        pre = f"convt{i}."
        out.update({pre + "x": x, pre + "w": w, pre + "dy": dy, pre + "y": f32(y), pre + "dx": f32(xd.grad),
                    pre + "dw": f32(wd.grad)})
        meta[f"convt{i}"] = f"{s},{p}"
    for i, shape in enumerate([(4, 16, 8, 8), (2, 8, 16, 16), (5, 3, 2, 3)]):
        C = shape[1]
        x = rnd(*shape, scale=2.0) + 0.5
        gamma, beta = 1 + 0.1 * rnd(C), 0.1 * rnd(C)
        rm, rv = 0.1 * rnd(C), 1 + 0.2 * rnd(C).abs()
        xd, gd, bd = x.double().requires_grad_(), gamma.double().requires_grad_(), beta.double().requires_grad_()
        rmd, rvd = rm.double().clone(), rv.double().clone()
        y = F.batch_norm(xd, rmd, rvd, gd, bd, training=True, momentum=0.1, eps=1e-5)
        dy = rnd(*shape)
        y.backward(dy.double())
        y_eval = F.batch_norm(x.double(), rm.double(), rv.double(), gamma.double(), beta.double(), training=False,
                              eps=1e-5)
        pre = f"bn{i}."
        out.update({pre + "x": x, pre + "gamma": gamma, pre + "beta": beta, pre + "running_mean": rm,
                    pre + "running_var": rv, pre + "dy": dy, pre + "y": f32(y), pre + "dx": f32(xd.grad),
                    pre + "dgamma": f32(gd.grad), pre + "dbeta": f32(bd.grad), pre + "running_mean_after": f32(rmd),
                    pre + "running_var_after": f32(rvd), pre + "y_eval": f32(y_eval)})
    acts = {"relu": lambda t: F.relu(t), "leaky_relu": lambda t: F.leaky_relu(t, 0.2), "tanh": torch.tanh}
    for name, fn in acts.items():
        x = rnd(3, 4, 5, 6, scale=3.0)
        xd = x.double().requires_grad_()
        y = fn(xd)
        dy = rnd(3, 4, 5, 6)
        y.backward(dy.double())
        pre = f"{name}."
        out.update({pre + "x": x, pre + "y": f32(y), pre + "dy": dy, pre + "dx": f32(xd.grad)})
    for i, n in enumerate([1, 7, 64, 1000]):
        logits = rnd(n, scale=8.0)
        if n >= 7:
            logits[0], logits[1] = 60.0, -60.0  # saturated logits stay finite
        for target in (0.0, 1.0):
            for scale in (1.0, 1024.0):
                ld = logits.double().requires_grad_()
                loss = F.binary_cross_entropy_with_logits(ld, torch.full_like(ld, target))
                (loss * scale).backward()
                pre = f"bce{i}_t{int(target)}_s{int(scale)}."
                out.update({pre + "logits": logits.clone(), pre + "loss": f32(loss.reshape(1)),
                            pre + "mean_sigmoid": f32(torch.sigmoid(ld.detach()).mean().reshape(1)),
                            pre + "dlogits": f32(ld.grad)})
    save(path, out, meta)


# ---------------------------------------------------------------- the networks
class Generator(nn.Module):
    def __init__(self, nz, ngf, nc, image_size=64):
        super().__init__()
        mult = image_size // 8
        layers = [nn.ConvTranspose2d(nz, ngf * mult, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * mult), nn.ReLU(True)]
        while mult > 1:
            layers += [nn.ConvTranspose2d(ngf * mult, ngf * mult // 2, 4, 2, 1, bias=False),
                       nn.BatchNorm2d(ngf * mult // 2), nn.ReLU(True)]
            mult //= 2
        layers += [nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False), nn.Tanh()]
        self.main = nn.Sequential(*layers)

    def forward(self, x):
        return self.main(x)


class Discriminator(nn.Module):
    def __init__(self, ndf, nc, image_size=64):
        super().__init__()
        layers = [nn.Conv2d(nc, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True)]
        mult, size = 1, image_size // 2
        while size > 4:
            layers += [nn.Conv2d(ndf * mult, ndf * mult * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * mult * 2),
                       nn.LeakyReLU(0.2, inplace=True)]
            mult, size = mult * 2, size // 2
        layers += [nn.Conv2d(ndf * mult, 1, 4, 1, 0, bias=False)]
        self.main = nn.Sequential(*layers)

    def forward(self, x):
        return self.main(x).view(-1, 1).squeeze(1)


def weights_init(m):
    name = m.__class__.__name__
    if name.find("Conv") != -1:
        m.weight.data.normal_(0.0, 0.02)
    elif name.find("BatchNorm") != -1:
        m.weight.data.normal_(1.0, 0.02)
        m.bias.data.fill_(0)


def dcgan_goldens(path, ngf=4, ndf=4):
    torch.manual_seed(1234)
    nz, nc, N = 100, 3, 2
    G, D = Generator(nz, ngf, nc).double(), Discriminator(ndf, nc).double()
    G.apply(weights_init)
    D.apply(weights_init)
    out = {}
    for prefix, net in (("G.", G), ("D.", D)):
        for k, v in net.state_dict().items():
            out[prefix + "init." + k] = v.clone() if v.dtype == torch.int64 else f32(v)
    # Weights as stored (f32) are what both sides use.
    for net in (G, D):
        for p in net.parameters():
            p.data = p.data.float().double()
    z = torch.randn(N, nz, 1, 1)
    zd = z.double().requires_grad_()
    fake = G(zd)
    dfake = torch.rand(fake.shape) * 2 - 1
    fake.backward(dfake.double())
    out.update({"G.z": z, "G.y": f32(fake), "G.dy": dfake, "G.dz": f32(zd.grad)})
    for k, p in G.named_parameters():
        out["G.grad." + k] = f32(p.grad)
    for k, v in G.state_dict().items():
        if "running" in k:
            out["G.after." + k] = f32(v)
    x = torch.rand(N, nc, 64, 64) * 2 - 1
    xd = x.double().requires_grad_()
    logits = D(xd)
    dlogits = torch.rand(logits.shape) * 2 - 1
    logits.backward(dlogits.double())
    out.update({"D.x": x, "D.y": f32(logits), "D.dy": dlogits, "D.dx": f32(xd.grad)})
    for k, p in D.named_parameters():
        out["D.grad." + k] = f32(p.grad)
    for k, v in D.state_dict().items():
        if "running" in k:
            out["D.after." + k] = f32(v)
    save(path, out, {"nz": str(nz), "ngf": str(ngf), "ndf": str(ndf), "nc": str(nc), "batch": str(N)})


def adam_goldens(path):
    torch.manual_seed(99)
    params = [torch.randn(10, 7), torch.randn(5)]
    out = {f"p{i}.init": p.clone() for i, p in enumerate(params)}
    ps = [p.clone().requires_grad_() for p in params]
    opt = torch.optim.Adam(ps, lr=2e-4, betas=(0.5, 0.999), eps=1e-8, foreach=False)
    for step in range(1, 4):
        for i, p in enumerate(ps):
            g = torch.randn(p.shape) * (10.0 ** (i - step))  # gradients over several magnitudes
            out[f"p{i}.grad{step}"] = g
            p.grad = g.clone()
        opt.step()
        for i, p in enumerate(ps):
            st = opt.state[p]
            out[f"p{i}.value{step}"] = p.detach().clone()
            out[f"p{i}.exp_avg{step}"] = st["exp_avg"].clone()
            out[f"p{i}.exp_avg_sq{step}"] = st["exp_avg_sq"].clone()
    save(path, out, {"lr": "2e-4", "beta1": "0.5", "beta2": "0.999", "eps": "1e-8"})


# ---------------------------------------------------------------- training trajectories
class ApexScaler:
    """apex.amp.scaler.LossScaler's dynamic policy, one per loss."""

    def __init__(self, dynamic, init=2.0 ** 16, window=2000, max_scale=2.0 ** 24, min_scale=2.0 ** -16):
        self.dynamic, self.scale, self.window = dynamic, (init if dynamic else 1.0), window
        self.max_scale, self.min_scale, self.unskipped = max_scale, min_scale, 0

    def update(self, overflow):
        """Returns should_skip: only a dynamic scaler ever skips a step (Apex's update_scale)."""
        if overflow and self.dynamic:
            self.scale = max(self.min_scale, self.scale / 2.0)
            self.unskipped = 0
        else:
            self.unskipped += 1
        if self.unskipped == self.window and self.dynamic:
            self.scale = min(self.max_scale, self.scale * 2.0)
            self.unskipped = 0
        return overflow and self.dynamic


def loss_scale_goldens(path):
    """Sequences of found_inf flags and the (scale, clean steps) Apex's scaler holds after each.

    "grow": from 2^16, 9,000 steps with rare random overflows and overflows placed on the step
    that would have grown the scale and right after a growth; "cap": from 2^23,
    5,000 clean steps (one growth to 2^24, then none). Below the cap Apex's rule is PyTorch's
    GradScaler rule, so PyTorch's kernel must give the same scales (asserted)."""
    out, meta = {}, {}
    gen = torch.Generator().manual_seed(11)
    sequences = {"grow": (2.0 ** 16, 9000), "cap": (2.0 ** 23, 5000)}
    for name, (init, steps) in sequences.items():
        if name == "grow":
            # Random overflows outside [2005, 8006); inside it, an overflow at 4004 (the 2000th
            # clean step after the one at 2004, which would have grown the scale), a growth at
            # 6004 and an overflow right after it, then a growth at 8005.
            flags = (torch.rand(steps, generator=gen) < 1.0 / 1500).tolist()
            for at in range(2005, 8006):
                flags[at] = False
            for at in (3, 4, 2004, 4004, 6005):
                flags[at] = True
        else:
            flags = [False] * steps
        scaler = ApexScaler(True, init=init)
        scales, counts = [], []
        for f in flags:
            scaler.update(bool(f))
            scales.append(scaler.scale)
            counts.append(scaler.unskipped)
        if name == "grow":
            dev = "cuda" if torch.cuda.is_available() else "cpu"
            ts = torch.tensor([init], dtype=torch.float32, device=dev)
            tracker = torch.zeros(1, dtype=torch.int32, device=dev)
            for i, f in enumerate(flags):
                found = torch.tensor([1.0 if f else 0.0], device=dev)
                torch._amp_update_scale_(ts, tracker, found, 2.0, 0.5, 2000)
                assert ts.item() == scales[i] and tracker.item() == counts[i], (i, ts.item(), scales[i])
        out[name + ".found_inf"] = torch.tensor([1.0 if f else 0.0 for f in flags], dtype=torch.float32)
        out[name + ".scale"] = torch.tensor(scales, dtype=torch.float32)
        out[name + ".clean_steps"] = torch.tensor(counts, dtype=torch.float32)
        meta[name + ".init_scale"] = repr(init)
        print(name, "growths:", sum(1 for a, b in zip([init] + scales, scales) if b > a),
              "overflows:", sum(flags), "final scale:", scales[-1])
    meta["growth_interval"] = "2000"
    save(path, out, meta)


def grid_goldens(path):
    """save_image(images, normalize=True): make_grid (nrow 8, padding 2, min-max over the batch),
    then x * 255 + 0.5, clamped, truncated to u8, as torchvision writes the PNG."""
    import torchvision.utils as vutils
    out = {}
    gen = torch.Generator().manual_seed(5)
    cases = {"rgb_f32": (11, 3, 9, 7, torch.float32), "grey_f32": (3, 1, 6, 6, torch.float32),
             "rgb_f16": (10, 3, 8, 8, torch.float16)}
    for name, (n, c, h, w, dtype) in cases.items():
        images = (torch.rand(n, c, h, w, generator=gen) * 3.0 - 1.2).to(dtype)
        grid = vutils.make_grid(images, nrow=8, padding=2, normalize=True)
        pixels = grid.mul(255).add_(0.5).clamp_(0, 255).permute(1, 2, 0).to("cpu", torch.uint8)
        out[name + ".images"] = images
        out[name + ".pixels"] = pixels.to(torch.float32)  # (H, W, 3) as the PNG holds them
    save(path, out)


def dump_state(path, level, G, D, mG, mD, optG, optD, scalers, step):
    """PyTorch's state before `step`, in ganengine's training-state format (training_state.h),
    so the C++ tests can take one step from exactly this state."""
    out = {}
    for prefix, net, masters, opt in (("G.", G, mG, optG), ("D.", D, mD, optD)):
        adam_step = 0.0
        for (name, p), m in zip(net.named_parameters(), masters):
            key = prefix + name
            out[key + ".value"] = p.detach().clone()
            if m is not p:
                out[key + ".master"] = m.detach().clone()
            st = opt.state.get(m, {})
            out[key + ".exp_avg"] = st["exp_avg"].clone() if st else torch.zeros_like(m)
            out[key + ".exp_avg_sq"] = st["exp_avg_sq"].clone() if st else torch.zeros_like(m)
            if st:
                adam_step = float(st["step"])
        for name, b in net.named_buffers():
            out[prefix + name] = b.detach().clone()
        out[prefix + "adam_step"] = torch.tensor([adam_step], dtype=torch.float32)
    for i, sc in enumerate(scalers):
        out[f"scaler{i}"] = torch.tensor([sc.scale, float(sc.unskipped)], dtype=torch.float32)
    out["fixed_noise"] = torch.zeros(4, 100, 1, 1)
    meta = {"format": "ganengine-training-state-1", "dataset": "golden", "opt_level": level, "half": "f16",
            "batchSize": "4", "imageSize": "64", "nz": "100", "ngf": "8", "ndf": "8", "nc": "3", "manualSeed": "0",
            "epoch": "0", "iteration": str(step), "global_step": str(step)}
    save(path, out, meta)


def train_trajectory(level, inputs, init_G, init_D, device, force=(), dump_dir=None):
    """20 steps of main_amp.py's loop with Apex semantics for `level`; returns per-step records."""
    nz, ngf, ndf, nc = 100, 8, 8, 3
    G, D = Generator(nz, ngf, nc).to(device), Discriminator(ndf, nc).to(device)
    G.load_state_dict(init_G)
    D.load_state_dict(init_D)
    half = level == "O2"
    if half:  # O2: half model, BatchNorm kept fp32, fp32 master weights in the optimizer
        for net in (G, D):
            net.half()
            for m in net.modules():
                if isinstance(m, nn.BatchNorm2d):
                    m.float()
    def masters_of(net):
        return [p.detach().clone().float().requires_grad_() if p.dtype == torch.float16 else p
                for p in net.parameters()]
    mG, mD = (masters_of(G), masters_of(D)) if half else (list(G.parameters()), list(D.parameters()))
    optD = torch.optim.Adam(mD, lr=2e-4, betas=(0.5, 0.999), eps=1e-8, foreach=False)
    optG = torch.optim.Adam(mG, lr=2e-4, betas=(0.5, 0.999), eps=1e-8, foreach=False)
    dynamic = level in ("O1", "O2")
    scalers = [ApexScaler(dynamic) for _ in range(3)]
    crit = nn.BCEWithLogitsLoss()
    autocast = torch.autocast("cuda", dtype=torch.float16, enabled=(level == "O1"))

    def run(net, x):
        with autocast:
            out = net(x.half() if half else x)
        return out.float() if half else out

    def scaled_backward(loss, loss_id, step, params, masters, accumulate):
        """Apex scale_loss: backward of loss*scale into fresh model grads, then unscale into the
        fp32 (master) grads, adding what earlier losses of this optimizer left; check only the new."""
        for p in params:
            p.grad = None
        (loss.float() * scalers[loss_id].scale).backward()
        if (loss_id, step) in force:  # test hook: an inf in this loss's gradients
            next(p for p in params if p.grad is not None).grad.view(-1)[0] = float("inf")
        overflow = False
        for p, m in zip(params, masters):
            if p.grad is None:
                continue
            g = p.grad.float()
            overflow |= not torch.isfinite(g).all().item()
            new = g * (1.0 / scalers[loss_id].scale)
            if m is p:
                p.grad = new + m.stash if accumulate else new
            else:
                m.grad = new + m.stash if accumulate else new
        return scalers[loss_id].update(overflow)

    records = []
    for step in range(inputs["noise"].shape[0]):
        if dump_dir:
            dump_state(os.path.join(dump_dir, f"state_{step:02d}.safetensors"), level, G, D, mG, mD, optD=optD,
                       optG=optG, scalers=scalers, step=step)
        # The real batches are reused in turn: step s sees batch s mod (number of batches).
        batch = inputs["real"][step % inputs["real"].shape[0]]
        real = (batch.to(device).float() / 255.0 - 0.5) / 0.5
        noise = inputs["noise"][step].to(device)
        # (1) D: real (loss 0), then fake.detach() (loss 1)
        out = run(D, real)
        errD_real = crit(out.float(), torch.full_like(out.float(), 1.0))
        D_x = torch.sigmoid(out.float()).mean().item()
        ovf0 = scaled_backward(errD_real, 0, step, list(D.parameters()), mD, False)
        for p, m in zip(D.parameters(), mD):
            m.stash = (m.grad if m is not p else p.grad).clone()
        with autocast:
            fake = G(noise.half() if half else noise)
        fake = fake.float() if half else fake
        out = run(D, fake.detach())
        errD_fake = crit(out.float(), torch.full_like(out.float(), 0.0))
        D_G_z1 = torch.sigmoid(out.float()).mean().item()
        ovf1 = scaled_backward(errD_fake, 1, step, list(D.parameters()), mD, True)
        skipD = ovf0 or ovf1
        if not skipD:
            optD.step()
            if half:
                with torch.no_grad():
                    for p, m in zip(D.parameters(), mD):
                        if m is not p:
                            p.copy_(m)
        # (2) G: D on fake after D's update (loss 2)
        out = run(D, fake)
        errG = crit(out.float(), torch.full_like(out.float(), 1.0))
        D_G_z2 = torch.sigmoid(out.float()).mean().item()
        for p in D.parameters():
            p.requires_grad_(False)  # G's step computes no weight gradients for D
        ovf2 = scaled_backward(errG, 2, step, list(G.parameters()), mG, False)
        for p in D.parameters():
            p.requires_grad_(True)
        if not ovf2:
            optG.step()
            if half:
                with torch.no_grad():
                    for p, m in zip(G.parameters(), mG):
                        if m is not p:
                            p.copy_(m)
        records.append([errD_real.item(), errD_fake.item(), errG.item(), D_x, D_G_z1, D_G_z2,
                        float(ovf0), float(ovf1), float(ovf2), scalers[0].scale, scalers[1].scale, scalers[2].scale])
        for net, opt in ((D, optD), (G, optG)):
            for p in net.parameters():
                p.grad = None
            for m in opt.param_groups[0]["params"]:
                m.grad = None
    final = {}
    for prefix, net in (("G.", G), ("D.", D)):
        for k, v in net.state_dict().items():
            final[prefix + k] = v.float() if v.is_floating_point() else v
    return torch.tensor(records, dtype=torch.float64), final


def train_goldens(dirpath, device, teacher_dir=None):
    torch.manual_seed(2809)
    # GAN training is chaotic: rounding-level differences grow step by step, at a rate that
    # depends on the trajectory. From this start (batch 4) an fp32 perturbation stays at the
    # 1e-7 level for 20 steps, so the O0 run can be compared free-running; fp16 runs are also
    # compared step by step from PyTorch's own state (--teacher-dir).
    steps, N, batches = 20, 4, 20
    inputs = {"real": torch.randint(0, 256, (batches, N, 3, 64, 64), dtype=torch.uint8),
              "noise": torch.randn(steps, N, 100, 1, 1)}
    G, D = Generator(100, 8, 3), Discriminator(8, 3)
    G.apply(weights_init)
    D.apply(weights_init)
    init_G, init_D = G.state_dict(), D.state_dict()
    tensors = dict(inputs)
    tensors.update({"G." + k: v for k, v in init_G.items()})
    tensors.update({"D." + k: v for k, v in init_D.items()})
    save(os.path.join(dirpath, "golden_train_inputs.safetensors"), tensors,
         {"nz": "100", "ngf": "8", "ndf": "8", "nc": "3", "imageSize": "64", "batch": str(N), "steps": str(steps),
          "normalise": "real = (u8 / 255 - 0.5) / 0.5 in f32"})
    columns = "errD_real,errD_fake,errG,D_x,D_G_z1,D_G_z2,overflow0,overflow1,overflow2,scale0,scale1,scale2"
    runs = [("O0", ()), ("O1", ()), ("O2", ()), ("O1_forced", ((1, 3), (2, 5), (0, 5)))]
    for name, force in runs:
        level = name.split("_")[0]
        dump = None
        if teacher_dir and not force:
            dump = os.path.join(teacher_dir, level)
            os.makedirs(dump, exist_ok=True)
        records, final = train_trajectory(level, inputs, init_G, init_D, device, force, dump)
        out = {"records": records}
        if level == "O0":
            out.update(final)  # final weights: the CPU test also compares these
        save(os.path.join(dirpath, f"golden_train_{name}.safetensors"), out,
             {"columns": columns, "opt_level": level,
              "forced_overflows": ";".join(f"loss{l}@step{s}" for l, s in force)})
        print(name, "losses step 0:", records[0, :3].tolist(), "step 19:", records[-1, :3].tolist(),
              "overflows:", int(records[:, 6:9].sum().item()))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "goldens"))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--teacher-dir", help="also write PyTorch's state before every training step here "
                                          "(not committed: the GPU suite's step-by-step comparison reads them)")
    ap.add_argument("--only", default="ops,dcgan,adam,train,loss_scale,grid",
                    help="comma-separated: which goldens to write (default: all)")
    args = ap.parse_args()
    only = set(args.only.split(","))
    os.makedirs(args.out, exist_ok=True)
    g = torch.Generator().manual_seed(7)
    if "ops" in only:
        op_goldens(os.path.join(args.out, "golden_ops.safetensors"), g)
    if "dcgan" in only:
        dcgan_goldens(os.path.join(args.out, "golden_dcgan.safetensors"))
    if "adam" in only:
        adam_goldens(os.path.join(args.out, "golden_adam.safetensors"))
    if "train" in only:
        train_goldens(args.out, args.device, args.teacher_dir)
    if "loss_scale" in only:
        loss_scale_goldens(os.path.join(args.out, "golden_loss_scale.safetensors"))
    if "grid" in only:
        grid_goldens(os.path.join(args.out, "golden_grid.safetensors"))
    if args.teacher_dir and "train" in only:  # the example's full-width networks, too large to commit
        dcgan_goldens(os.path.join(args.teacher_dir, "golden_dcgan_full.safetensors"), ngf=64, ndf=64)


if __name__ == "__main__":
    main()
