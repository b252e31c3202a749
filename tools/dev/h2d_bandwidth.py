# Pinned host-to-device copy bandwidth on the GPU host (PyTorch), for reading `bench --dataset --data-on host`:
#   python3 tools/dev/h2d_bandwidth.py
import torch, time
for mb in (3, 50):
    n = int(mb * 1e6 / 4)
    h = torch.empty(n, pin_memory=True); d = torch.empty(n, device='cuda')
    for _ in range(3): d.copy_(h, non_blocking=True)
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(20): d.copy_(h, non_blocking=True)
    torch.cuda.synchronize(); dt = (time.perf_counter() - t) / 20
    print(f"pinned H2D {mb} MB: {dt*1e3:.3f} ms, {mb/1e3/dt:.1f} GB/s")
