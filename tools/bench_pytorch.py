#!/usr/bin/env python3
"""The PyTorch twin of `ganengine bench`: one DCGAN training step, timed, in several PyTorch
configurations on the same GPU, so ganengine's numbers can be reported as ratios.

The step is ganengine's (and Apex's main_amp.py's, in its order):
  D on real (BCE-with-logits vs 1), backward; G forward; D on fake.detach() (vs 0), backward;
  optD.step(); D on fake (vs 1), backward into G; optG.step().
Both optimizers are Adam(lr 2e-4, betas (0.5, 0.999)). The data are synthetic and already on
the GPU: one real batch uniform in [-1, 1] and one noise batch, reused every step.
One documented difference from main_amp.py, shared with ganengine: G's step computes no weight
gradients for D (D's parameters are frozen around that forward/backward; main_amp.py computes
and discards them). --d-grads-in-g-step restores main_amp.py's behaviour.

Configurations (each for every --batch-sizes entry; cudnn.benchmark on, TF32 off everywhere):
  fp32            fp32 weights and activations, NCHW and channels_last
  autocast        torch.autocast(fp16) + GradScaler, NCHW and channels_last. One GradScaler per
                  optimizer (scalerD covers D's two losses, scalerG G's loss) is what GradScaler
                  supports: Apex's one dynamic scaler per *loss* (num_losses=3) cannot be
                  expressed with it (GradScaler.unscale_/step work per optimizer, and a second
                  scale() before step() reuses the same scale).
  half            model.half() (BatchNorm too, like O3), half inputs, BCE on .float() logits,
                  no loss scaling; NCHW and channels_last
  graph_half      the whole step captured in ONE CUDA graph (torch.cuda.graph), model.half()
                  channels_last, Adam(capturable=True, foreach=True); timing replays the graph
  graph_fp32      the same for fp32 channels_last
GradScaler cannot be captured in a CUDA graph (its step() reads found_inf on the host), so
there is no graph+autocast configuration.

Timing: warm-up steps, then --windows windows of --window-steps steps timed with CUDA events;
the median ms/step is reported, images/s = batch / that, and the peak of
torch.cuda.max_memory_allocated over the timed steps (and, for graphs, the capture, which
allocates the graph's private pool): data, weights, optimizer state, activations, workspaces.
cudnn.benchmark's algorithm search during the warm-up is excluded from peak_mem_bytes (it tries
far larger workspaces) and included in peak_mem_incl_algo_search_bytes.

model.half() (and graph_half) run Adam on fp16 parameters with eps 1e-8, which is 0 in fp16: the
losses turn NaN within the timed steps (the row says so in "warning"); NaNs should not change the speed. It
is the configuration PyTorch users get from .half(), as Apex O3 without master weights.

  python3 tools/bench_pytorch.py --batch-sizes 64,1024 --json bench_pytorch.json

--device cpu times the same step on the CPU (the twin of `ganengine bench --device cpu`):
  fp32            fp32, NCHW and channels_last (PyTorch's CPU convolutions run on its oneDNN)
  autocast_bf16   torch.autocast("cpu", bfloat16), no loss scaling (bf16 needs none)
with --threads compute threads (torch.set_num_threads), timed on the host clock; no memory
figures. tools/bench_cpu.sh runs both benches side by side.
"""
import argparse
import contextlib
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

try:
    import torch  # noqa: E402
    import torch.nn as nn  # noqa: E402
except ImportError as e:
    sys.exit(f"bench_pytorch.py needs PyTorch with CUDA ({e}): run it with the Python that has it "
             "(pip install torch torchvision), e.g. PATH=/path/to/venv/bin:$PATH tools/bench_suite.sh")

warnings.filterwarnings("ignore", message=".*allow_tf32.*")
warnings.filterwarnings("ignore", message=".*fp32_precision.*")

# name, precision, layout, graph
CONFIGS = [
    ("fp32", "fp32", "NCHW", False),
    ("fp32", "fp32", "channels_last", False),
    ("autocast", "amp_fp16", "NCHW", False),
    ("autocast", "amp_fp16", "channels_last", False),
    ("half", "fp16", "NCHW", False),
    ("half", "fp16", "channels_last", False),
    # Graph configurations last: a failure inside a capture can leave the CUDA context unusable,
    # and then only they are lost.
    ("graph_half", "fp16", "channels_last", True),
    ("graph_fp32", "fp32", "channels_last", True),
]
# The CPU's configurations (--device cpu): eager only.
CPU_CONFIGS = [
    ("fp32", "fp32", "NCHW", False),
    ("fp32", "fp32", "channels_last", False),
    ("autocast_bf16", "amp_bf16", "NCHW", False),
]
GRAPH_SCALER_NOTE = ("GradScaler cannot be captured in a CUDA graph (GradScaler.step reads found_inf on the host), "
                     "so autocast+GradScaler runs eager only; graph configurations use no loss scaling.")
SCALER_NOTE = ("autocast uses one GradScaler per optimizer (what GradScaler supports); Apex's one dynamic scaler "
               "per loss (3 losses) cannot be expressed with GradScaler.")


def import_networks():
    """Generator, Discriminator, weights_init: tools/make_goldens.py's reference networks, as the
    quality tools import them (without safetensors installed, and leaving cuDNN's flags as found)."""
    from quality.dcgan_models import Discriminator, Generator, weights_init
    return Generator, Discriminator, weights_init


def set_backends():
    # The benchmark's cuDNN settings: autotuned algorithms, no TF32 (PyTorch's fp32 is true fp32).
    torch.backends.cudnn.deterministic = False
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False


def versions():
    meta = {"framework": "pytorch", "torch": torch.__version__, "cuda": torch.version.cuda,
            "python": platform.python_version(), "host": platform.node()}
    for key, fn in (("cudnn", lambda: torch.backends.cudnn.version()),
                    ("gpu", lambda: torch.cuda.get_device_name(0)),
                    ("gpu_memory_bytes", lambda: torch.cuda.get_device_properties(0).total_memory),
                    ("compute_capability", lambda: "%d.%d" % torch.cuda.get_device_capability(0)),
                    ("cudnn_allow_tf32", lambda: torch.backends.cudnn.allow_tf32),
                    ("matmul_allow_tf32", lambda: torch.backends.cuda.matmul.allow_tf32),
                    ("cudnn_benchmark", lambda: torch.backends.cudnn.benchmark)):
        try:
            meta[key] = fn()
        except Exception as e:  # noqa: BLE001
            meta[key] = f"unknown ({e})"
    try:
        meta["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                        capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
    except Exception as e:  # noqa: BLE001
        meta["driver"] = f"unknown ({e})"
    return meta


class Bench:
    """One configuration at one batch size: models, optimizers, data and the step function."""

    def __init__(self, args, nets, precision, layout, graph, batch):
        G_cls, D_cls, weights_init = nets
        dev = torch.device(args.device)
        self.device = args.device
        torch.manual_seed(1234)
        self.G = G_cls(args.nz, args.ngf, args.nc, args.image_size).to(dev)
        self.D = D_cls(args.ndf, args.nc, args.image_size).to(dev)
        self.G.apply(weights_init)
        self.D.apply(weights_init)
        half = precision == "fp16"
        dtype = torch.float16 if half else torch.float32
        if half:
            self.G.half()
            self.D.half()
        mf = torch.channels_last if layout == "channels_last" else torch.contiguous_format
        self.G.to(memory_format=mf)
        self.D.to(memory_format=mf)
        s = args.image_size
        self.real = (torch.rand(batch, args.nc, s, s, device=dev) * 2 - 1).to(dtype).contiguous(memory_format=mf)
        self.noise = torch.randn(batch, args.nz, 1, 1, device=dev).to(dtype).contiguous(memory_format=mf)
        self.ones = torch.ones(batch, device=dev)
        self.zeros = torch.zeros(batch, device=dev)
        if graph:
            kw = {"capturable": True, "foreach": True}
        elif args.adam == "fused":
            kw = {"fused": True}
        else:
            kw = {"foreach": True}
        self.optD = torch.optim.Adam(self.D.parameters(), lr=2e-4, betas=(0.5, 0.999), **kw)
        self.optG = torch.optim.Adam(self.G.parameters(), lr=2e-4, betas=(0.5, 0.999), **kw)
        self.crit = nn.BCEWithLogitsLoss()
        self.amp = precision == "amp_fp16"
        self.amp_bf16 = precision == "amp_bf16"
        if self.amp:
            GradScaler = getattr(torch.amp, "GradScaler", None) or torch.cuda.amp.GradScaler
            try:
                self.scD, self.scG = GradScaler("cuda"), GradScaler("cuda")
            except TypeError:
                self.scD, self.scG = GradScaler(), GradScaler()
        self.d_grads_in_g = args.d_grads_in_g_step
        self.graph = None
        self.losses = None

    def autocast(self):
        if self.amp_bf16:
            return torch.autocast(self.device, dtype=torch.bfloat16)
        return torch.autocast("cuda", dtype=torch.float16) if self.amp else contextlib.nullcontext()

    def backward(self, loss, scaler):
        (scaler.scale(loss) if self.amp else loss).backward()

    def opt_step(self, opt, scaler):
        if self.amp:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()

    def step(self):
        D, G, crit = self.D, self.G, self.crit
        # (1) D: real, then fake.detach(); one optimizer step for both losses
        self.optD.zero_grad(set_to_none=True)
        with self.autocast():
            out = D(self.real)
            errD_real = crit(out.float(), self.ones)
        self.backward(errD_real, getattr(self, "scD", None))
        with self.autocast():
            fake = G(self.noise)
            out = D(fake.detach())
            errD_fake = crit(out.float(), self.zeros)
        self.backward(errD_fake, getattr(self, "scD", None))
        self.opt_step(self.optD, getattr(self, "scD", None))
        # (2) G: D on fake after D's update. D's parameters are frozen before the forward, so
        # autograd computes no weight gradients for D (ganengine's step; see --d-grads-in-g-step).
        self.optG.zero_grad(set_to_none=True)
        freeze = not self.d_grads_in_g
        if freeze:
            for p in D.parameters():
                p.requires_grad_(False)
        try:
            with self.autocast():
                out = D(fake)
                errG = crit(out.float(), self.ones)
            self.backward(errG, getattr(self, "scG", None))
        finally:
            if freeze:
                for p in D.parameters():
                    p.requires_grad_(True)
        self.opt_step(self.optG, getattr(self, "scG", None))
        return errD_real.detach(), errD_fake.detach(), errG.detach()

    def side_stream_warmup(self, warmup):
        """PyTorch's whole-network capture recipe, part 1: warm up on a side stream
        (cudnn.benchmark's search, Adam's lazy state, autograd's caches)."""
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(max(3, warmup)):
                self.step()
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()

    def capture(self):
        """Part 2: capture one whole step into one CUDA graph."""
        # Gradients start as None so the captured backward allocates them in the graph's pool;
        # each replay then writes them afresh (the step's zero_grad is a no-op inside the capture).
        self.optD.zero_grad(set_to_none=True)
        self.optG.zero_grad(set_to_none=True)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            self.losses = self.step()
        torch.cuda.synchronize()
        self.graph = g

    def run_one(self):
        if self.graph is not None:
            self.graph.replay()
        else:
            self.losses = self.step()


def schedule(args, batch):
    auto_small = batch < 512
    warmup = args.warmup if args.warmup is not None else (10 if auto_small else 5)
    steps = args.window_steps if args.window_steps is not None else (20 if auto_small else 10)
    return warmup, args.windows, steps


def run_cpu_config(args, nets, name, precision, layout, batch):
    """One configuration on the CPU: eager steps timed on the host clock (CPU ops are synchronous)."""
    warmup, windows, steps = schedule(args, batch)
    t0 = time.time()
    b = Bench(args, nets, precision, layout, False, batch)
    for _ in range(warmup):
        b.run_one()
    per_step = []
    for _ in range(windows):
        start = time.perf_counter()
        for _ in range(steps):
            b.run_one()
        per_step.append((time.perf_counter() - start) * 1000.0 / steps)
    ms = statistics.median(per_step)
    losses = [float(x) for x in b.losses]
    row = {"framework": "pytorch", "device": "cpu", "threads": torch.get_num_threads(), "config": name,
           "precision": precision, "layout": layout, "graph": False, "batch": batch, "ms_per_step": ms,
           "images_per_s": batch * 1000.0 / ms, "peak_mem_bytes": 0, "window_ms_per_step": per_step,
           "warmup_steps": warmup, "steps_per_window": steps, "losses_errD_real_errD_fake_errG": losses,
           "wall_s": round(time.time() - t0, 2)}
    if not all(x == x and abs(x) != float("inf") for x in losses):
        row["warning"] = "non-finite loss after the timed steps"
    return row


def run_config(args, nets, name, precision, layout, graph, batch):
    if args.device == "cpu":
        return run_cpu_config(args, nets, name, precision, layout, batch)
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    warmup, windows, steps = schedule(args, batch)
    t0 = time.time()
    b = Bench(args, nets, precision, layout, graph, batch)
    try:
        if graph:
            b.side_stream_warmup(warmup)
        else:
            for _ in range(warmup):
                b.run_one()
        torch.cuda.synchronize()
        # Peak memory is the steady state's: cudnn.benchmark's algorithm search (during the
        # warm-up) tries workspaces far larger than the chosen algorithms need. For a graph, the
        # capture allocates what one step needs (its private pool), so it is counted.
        peak_search = torch.cuda.max_memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        if graph:
            b.capture()
            for _ in range(3):  # a few replays before timing
                b.run_one()
            torch.cuda.synchronize()
        per_step = []
        for _ in range(windows):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(steps):
                b.run_one()
            end.record()
            end.synchronize()
            per_step.append(start.elapsed_time(end) / steps)
        torch.cuda.synchronize()
        ms = statistics.median(per_step)
        losses = [float(x) for x in b.losses]
        row = {"framework": "pytorch", "config": name, "precision": precision, "layout": layout, "graph": graph,
               "batch": batch, "ms_per_step": ms, "images_per_s": batch * 1000.0 / ms,
               "peak_mem_bytes": int(torch.cuda.max_memory_allocated()),
               "peak_mem_incl_algo_search_bytes": int(max(peak_search, torch.cuda.max_memory_allocated())),
               "window_ms_per_step": per_step, "warmup_steps": warmup, "steps_per_window": steps,
               "losses_errD_real_errD_fake_errG": losses, "wall_s": round(time.time() - t0, 2)}
        if not all(x == x and abs(x) != float("inf") for x in losses):
            row["warning"] = "non-finite loss after the timed steps"
        return row
    finally:
        if b.graph is not None:
            try:
                b.graph.reset()
            except Exception:  # noqa: BLE001
                pass
        del b
        gc.collect()
        torch.cuda.empty_cache()


def write_json(path, meta, rows, errors):
    if not path:
        return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"meta": meta, "rows": rows, "errors": errors}, f, indent=1)
    os.replace(tmp, path)


def print_table(rows):
    hdr = f"{'config':<11} {'precision':<9} {'layout':<13} {'graph':<5} {'batch':>5} {'ms/step':>9} " \
          f"{'images/s':>10} {'peak MiB':>9}"
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        print(f"{r['config']:<11} {r['precision']:<9} {r['layout']:<13} {str(r['graph']):<5} {r['batch']:>5} "
              f"{r['ms_per_step']:>9.3f} {r['images_per_s']:>10.0f} {r['peak_mem_bytes'] / 2**20:>9.0f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batch-sizes", default="64,1024")
    ap.add_argument("--imageSize", "--image-size", dest="image_size", type=int, default=64)
    ap.add_argument("--ngf", type=int, default=64)
    ap.add_argument("--ndf", type=int, default=64)
    ap.add_argument("--nz", type=int, default=100)
    ap.add_argument("--nc", type=int, default=3)
    ap.add_argument("--configs", default="all",
                    help="comma list of config names (fp32,autocast,half,graph_half,graph_fp32) or 'all'")
    ap.add_argument("--layouts", default="NCHW,channels_last", help="layouts for the eager configs")
    ap.add_argument("--warmup", type=int, default=None, help="warm-up steps (default 10; 5 for batch >= 512)")
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--window-steps", type=int, default=None, help="steps per window (default 20; 10 for batch >= 512)")
    ap.add_argument("--adam", choices=("foreach", "fused"), default="foreach",
                    help="Adam implementation of the eager configs (graphs always use capturable foreach)")
    ap.add_argument("--d-grads-in-g-step", action="store_true",
                    help="compute D's weight gradients in G's step too, as main_amp.py does (and discard them)")
    ap.add_argument("--time-budget", type=float, default=420.0,
                    help="seconds; configurations not started by then are skipped (0: no limit)")
    ap.add_argument("--json", help="write {meta, rows, errors} here (rewritten after every configuration)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cuda (the default) or cpu: the CPU's configurations, timed on the host clock")
    ap.add_argument("--threads", type=int, default=0,
                    help="with --device cpu: compute threads (default 0: PyTorch's own choice, OMP_NUM_THREADS)")
    args = ap.parse_args()

    if args.device == "cpu":
        return main_cpu(args)
    if not torch.cuda.is_available():
        print("bench_pytorch: no CUDA device visible to PyTorch", file=sys.stderr)
        return 2
    nets = import_networks()
    set_backends()
    batches = [int(x) for x in args.batch_sizes.split(",") if x.strip()]
    wanted = None if args.configs == "all" else {c.strip() for c in args.configs.split(",")}
    layouts = {x.strip() for x in args.layouts.split(",")}
    plan = [c for c in CONFIGS if (wanted is None or c[0] in wanted) and (c[3] or c[2] in layouts)]
    if wanted is not None:  # in the order asked for, so a time budget cuts the least wanted
        order = [c.strip() for c in args.configs.split(",")]
        plan.sort(key=lambda c: order.index(c[0]))

    meta = versions()
    meta.update({"imageSize": args.image_size, "ngf": args.ngf, "ndf": args.ndf, "nz": args.nz, "nc": args.nc,
                 "adam_eager": args.adam, "d_grads_in_g_step": args.d_grads_in_g_step,
                 "notes": [SCALER_NOTE, GRAPH_SCALER_NOTE]})
    print(f"PyTorch {meta['torch']} CUDA {meta['cuda']} cuDNN {meta['cudnn']} on {meta['gpu']} "
          f"(driver {meta['driver']}); TF32 off, cudnn.benchmark on")
    print(f"DCGAN imageSize {args.image_size} ngf {args.ngf} ndf {args.ndf} nz {args.nz}; batches {batches}")
    print("note:", SCALER_NOTE)
    print("note:", GRAPH_SCALER_NOTE)
    sys.stdout.flush()

    rows, errors = [], []
    t_start = time.time()
    for name, precision, layout, graph in plan:
        for batch in batches:
            label = f"{name}/{precision}/{layout}/{'graph' if graph else 'eager'}/batch {batch}"
            if args.time_budget and time.time() - t_start > args.time_budget:
                print(f"SKIPPED {label}: time budget of {args.time_budget:.0f} s spent", flush=True)
                errors.append({"config": name, "precision": precision, "layout": layout, "graph": graph,
                               "batch": batch, "error": "skipped: time budget spent"})
                continue
            try:
                row = run_config(args, nets, name, precision, layout, graph, batch)
                rows.append(row)
                print(f"{label}: {row['ms_per_step']:.3f} ms/step, {row['images_per_s']:.0f} images/s, "
                      f"peak {row['peak_mem_bytes'] / 2**20:.0f} MiB (windows "
                      f"{', '.join(f'{t:.3f}' for t in row['window_ms_per_step'])}; {row['wall_s']} s)"
                      + (f" WARNING: {row['warning']}" if "warning" in row else ""), flush=True)
            except Exception as e:  # noqa: BLE001
                print(f"ERROR {label}: {type(e).__name__}: {e}", flush=True)
                traceback.print_exc()
                sys.stderr.flush()
                errors.append({"config": name, "precision": precision, "layout": layout, "graph": graph,
                               "batch": batch, "error": f"{type(e).__name__}: {e}"})
                try:
                    torch.cuda.synchronize()
                except Exception as e2:  # noqa: BLE001
                    print(f"  CUDA context after the error: {type(e2).__name__}: {e2}", flush=True)
            write_json(args.json, meta, rows, errors)
    print()
    rows_sorted = sorted(rows, key=lambda r: (r["batch"], CONFIGS.index((r["config"], r["precision"], r["layout"],
                                                                          r["graph"]))))
    print_table(rows_sorted)
    print(f"\n{len(rows)} configurations measured, {len(errors)} failed or skipped, "
          f"{time.time() - t_start:.0f} s")
    for e in errors:
        print(f"  failed: {e['config']}/{e['precision']}/{e['layout']} batch {e['batch']}: {e['error']}")
    write_json(args.json, meta, rows_sorted, errors)
    if args.json:
        print(f"wrote {args.json}")
    return 0 if rows else 1


def main_cpu(args):
    """--device cpu: the CPU configurations, one line each, the same step as on the GPU."""
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    nets = import_networks()
    batches = [int(x) for x in args.batch_sizes.split(",") if x.strip()]
    wanted = None if args.configs == "all" else {c.strip() for c in args.configs.split(",")}
    layouts = {x.strip() for x in args.layouts.split(",")}
    plan = [c for c in CPU_CONFIGS if (wanted is None or c[0] in wanted) and c[2] in layouts]
    meta = {"framework": "pytorch", "device": "cpu", "torch": torch.__version__, "threads": torch.get_num_threads(),
            "mkldnn": torch.backends.mkldnn.is_available(), "python": platform.python_version(),
            "imageSize": args.image_size, "ngf": args.ngf, "ndf": args.ndf, "nz": args.nz, "nc": args.nc}
    print(f"PyTorch {meta['torch']} on the CPU, {meta['threads']} threads (oneDNN: {meta['mkldnn']})")
    print(f"DCGAN imageSize {args.image_size} ngf {args.ngf} ndf {args.ndf} nz {args.nz}; batches {batches}")
    sys.stdout.flush()
    rows, errors = [], []
    for name, precision, layout, _ in plan:
        for batch in batches:
            label = f"{name}/{precision}/{layout}/cpu/batch {batch}"
            try:
                row = run_cpu_config(args, nets, name, precision, layout, batch)
                rows.append(row)
                print(f"{label}: {row['ms_per_step']:.2f} ms/step, {row['images_per_s']:.1f} images/s (windows "
                      f"{', '.join(f'{t:.2f}' for t in row['window_ms_per_step'])}; {row['wall_s']} s)"
                      + (f" WARNING: {row['warning']}" if "warning" in row else ""), flush=True)
            except Exception as e:  # noqa: BLE001
                print(f"ERROR {label}: {type(e).__name__}: {e}", flush=True)
                errors.append({"config": name, "precision": precision, "layout": layout, "batch": batch,
                               "error": f"{type(e).__name__}: {e}"})
            write_json(args.json, meta, rows, errors)
    return 0 if rows and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
