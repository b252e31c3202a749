"""The example's Generator, Discriminator and weights_init, taken from tools/make_goldens.py (the
PyTorch twins that the golden tests hold ganengine to), and a Generator built from a state_dict.

make_goldens.py pins cuDNN to deterministic algorithms when imported, for its goldens; importing
it here restores the flags it found, so training and scoring keep the caller's settings.
"""
import os
import sys
import types

import torch

_TOOLS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _import_make_goldens():
    try:
        import safetensors.torch  # noqa: F401  (make_goldens imports save_file at import time)
    except ImportError:
        st, stt = types.ModuleType("safetensors"), types.ModuleType("safetensors.torch")

        def _missing(*args, **kwargs):
            raise RuntimeError("safetensors is not installed")

        stt.save_file = _missing
        st.torch = stt
        sys.modules.setdefault("safetensors", st)
        sys.modules["safetensors.torch"] = stt
    flags = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32,
             torch.backends.cuda.matmul.allow_tf32)
    if _TOOLS not in sys.path:
        sys.path.insert(0, _TOOLS)
    import make_goldens
    (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark, torch.backends.cudnn.allow_tf32,
     torch.backends.cuda.matmul.allow_tf32) = flags
    return make_goldens


_mg = _import_make_goldens()
Generator = _mg.Generator
Discriminator = _mg.Discriminator
weights_init = _mg.weights_init


def generator_shape(state_dict):
    """(nz, ngf, nc, image_size) of the Generator that wrote `state_dict`."""
    convs = sorted((int(k.split(".")[1]), v.shape) for k, v in state_dict.items()
                   if k.startswith("main.") and k.endswith(".weight") and len(v.shape) == 4)
    if not convs or convs[0][0] != 0:
        raise ValueError("not a DCGAN Generator state_dict: no main.0.weight of 4 dimensions")
    nz, first_out = int(convs[0][1][0]), int(convs[0][1][1])
    ngf, nc = int(convs[-1][1][0]), int(convs[-1][1][1])
    image_size = 4 * 2 ** (len(convs) - 1)  # 4x4 after the first layer, each further layer doubles
    if image_size < 8 or first_out != ngf * image_size // 8:
        raise ValueError(f"not a DCGAN Generator state_dict: {len(convs)} transposed convolutions, "
                         f"first {tuple(convs[0][1])}, last {tuple(convs[-1][1])}")
    return nz, ngf, nc, image_size


def generator_from_state_dict(state_dict):
    """A Generator holding `state_dict` ({name: torch.Tensor}), loaded strictly."""
    nz, ngf, nc, image_size = generator_shape(state_dict)
    net = Generator(nz, ngf, nc, image_size)
    net.load_state_dict(state_dict, strict=True)
    return net, nz
