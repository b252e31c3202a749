#!/usr/bin/env python3
"""Writes the .pth goldens of tests/goldens/ and their safetensors twins.

The .pth files are what torch.save(net.state_dict(), path) writes for small DCGAN networks of
the PyTorch example (16x16 images, ngf = ndf = 4): the ZIP format (torch.save's default), the
legacy format (_use_new_zipfile_serialization=False) and a DataParallel state_dict ("module."
names). Each .safetensors twin holds the same tensors under the plain names; the C++ tests read
both and require the same bytes.

How they are made: without PyTorch. This script reproduces torch.save's output with Python's own
pickle (protocol 2, as torch.save uses): fake modules named torch and torch._utils stand in for
the classes and the function the pickle names (torch.FloatStorage, torch.LongStorage,
torch._utils._rebuild_tensor_v2), storages are persistent ids ('storage', type, key, location,
numel), and the container is laid out as PyTorch's writer lays it out: stored ZIP entries
"<name>/data.pkl", "<name>/byteorder", "<name>/data/<key>" (each storage's little-endian bytes,
entries padded to 64-byte alignment), "<name>/version"; or, in the legacy format, five pickles
and the raw storages. With PyTorch installed, `torch.load` reads every .pth written here, which
is how the files were checked against the real reader.

Usage: python3 tools/make_pth_goldens.py --out tests/goldens
"""
import argparse
import collections
import io
import json
import os
import pickle
import random
import struct
import sys
import types
import zipfile

# ---- stand-ins for the names the pickle refers to


def _install_fake_torch():
    torch = types.ModuleType("torch")
    utils = types.ModuleType("torch._utils")
    for name in ("FloatStorage", "LongStorage"):
        cls = type(name, (), {})
        cls.__module__ = "torch"
        setattr(torch, name, cls)

    def _rebuild_tensor_v2(*args):  # never called: only its name is pickled
        raise RuntimeError("stand-in")

    _rebuild_tensor_v2.__module__ = "torch._utils"
    _rebuild_tensor_v2.__qualname__ = "_rebuild_tensor_v2"
    utils._rebuild_tensor_v2 = _rebuild_tensor_v2
    torch._utils = utils
    sys.modules["torch"] = torch
    sys.modules["torch._utils"] = utils
    return torch, utils


TORCH, UTILS = _install_fake_torch()


class Storage:
    def __init__(self, type_name, fmt, values):
        self.type_name = type_name
        self.values = values
        self.data = struct.pack("<%d%s" % (len(values), fmt), *values)


class Tensor:
    """A contiguous tensor: what torch.Tensor.__reduce_ex__ gives for a state_dict entry."""

    def __init__(self, shape, storage):
        self.shape = tuple(shape)
        self.storage = storage

    def strides(self):
        out, step = [], 1
        for d in reversed(self.shape):
            out.append(step)
            step *= d
        return tuple(reversed(out))

    def __reduce_ex__(self, protocol):
        return (UTILS._rebuild_tensor_v2,
                (self.storage, 0, self.shape, self.strides(), False, collections.OrderedDict()))


def make_pickler(buffer, legacy):
    keys = {}

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if not isinstance(obj, Storage):
                return None
            key = keys.setdefault(id(obj), (str(len(keys)) if not legacy else str(140000000 + 64 * len(keys)), obj))[0]
            pid = ("storage", getattr(TORCH, obj.type_name), key, "cpu", len(obj.values))
            return pid + (None,) if legacy else pid

    return Pickler(buffer, protocol=2), keys


# ---- the networks' state_dicts (PyTorch's names and shapes, BatchNorm's version 2 metadata)


def state_dict(layers, rng, prefix=""):
    """layers: (index, kind, shape args). Returns an OrderedDict with torch's _metadata."""
    sd = collections.OrderedDict()
    meta = collections.OrderedDict()
    meta[prefix.rstrip(".")] = {"version": 1}
    meta[prefix + "main"] = {"version": 1}
    for index, kind, args in layers:
        name = "%smain.%d" % (prefix, index)
        if kind == "conv":
            n = 1
            for d in args:
                n *= d
            sd[name + ".weight"] = Tensor(args, Storage("FloatStorage", "f", [rng.gauss(0, 0.02) for _ in range(n)]))
            meta[name] = {"version": 1}
        elif kind == "bn":
            c = args[0]
            sd[name + ".weight"] = Tensor([c], Storage("FloatStorage", "f", [rng.gauss(1, 0.02) for _ in range(c)]))
            sd[name + ".bias"] = Tensor([c], Storage("FloatStorage", "f", [rng.gauss(0, 0.02) for _ in range(c)]))
            sd[name + ".running_mean"] = Tensor([c], Storage("FloatStorage", "f", [rng.gauss(0, 0.1) for _ in range(c)]))
            sd[name + ".running_var"] = Tensor([c], Storage("FloatStorage", "f", [rng.uniform(0.5, 1.5) for _ in range(c)]))
            sd[name + ".num_batches_tracked"] = Tensor([], Storage("LongStorage", "q", [rng.randrange(1, 1000)]))
            meta[name] = {"version": 2}
        else:
            meta[name] = {"version": 1}
    sd._metadata = meta
    return sd


def generator_layers(nz, ngf, nc):  # imageSize 16: two blocks, then the image
    return [(0, "conv", (nz, ngf * 2, 4, 4)), (1, "bn", (ngf * 2,)), (2, "relu", ()),
            (3, "conv", (ngf * 2, ngf, 4, 4)), (4, "bn", (ngf,)), (5, "relu", ()),
            (6, "conv", (ngf, nc, 4, 4)), (7, "tanh", ())]


def discriminator_layers(ndf, nc):  # imageSize 16
    return [(0, "conv", (ndf, nc, 4, 4)), (1, "lrelu", ()), (2, "conv", (ndf * 2, ndf, 4, 4)), (3, "bn", (ndf * 2,)),
            (4, "lrelu", ()), (5, "conv", (1, ndf * 2, 4, 4)), (6, "sigmoid", ())]


# ---- the two container formats


def zip_format(sd, archive):
    buffer = io.BytesIO()
    pickler, keys = make_pickler(buffer, legacy=False)
    pickler.dump(sd)
    records = [("data.pkl", buffer.getvalue()), ("byteorder", b"little")]
    for key in sorted(k for k, _ in keys.values()):
        storage = next(s for k, s in keys.values() if k == key)
        records.append(("data/" + key, storage.data))
    records.append(("version", b"3\n"))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as z:
        for name, data in records:
            info = zipfile.ZipInfo(archive + "/" + name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            # Pad the local header's extra field so that the data starts on a 64-byte boundary.
            header = 30 + len(info.filename.encode())
            pad = (-(out.tell() + header + 4)) % 64
            info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
            z.writestr(info, data)
    return out.getvalue()


def legacy_format(sd):
    out = io.BytesIO()
    pickle.dump(0x1950A86A20F9469CFC6C, out, protocol=2)
    pickle.dump(1001, out, protocol=2)
    pickle.dump({"protocol_version": 1001, "little_endian": True, "type_sizes": {"short": 2, "int": 4, "long": 4}},
                out, protocol=2)
    pickler, keys = make_pickler(out, legacy=True)
    pickler.dump(sd)
    ordered = sorted(keys.values(), key=lambda kv: kv[0])
    pickle.dump([k for k, _ in ordered], out, protocol=2)
    for _, storage in ordered:
        out.write(struct.pack("<q", len(storage.values)))
        out.write(storage.data)
    return out.getvalue()


def safetensors_bytes(sd):
    header, data = {}, b""
    for name in sorted(sd):
        t = sd[name]
        dtype = "I64" if t.storage.type_name == "LongStorage" else "F32"
        header[name] = {"dtype": dtype, "shape": list(t.shape), "data_offsets": [len(data), len(data) + len(t.storage.data)]}
        data += t.storage.data
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + data


def prefixed(sd, prefix):
    out = collections.OrderedDict((prefix + k, v) for k, v in sd.items())
    out._metadata = collections.OrderedDict((prefix + k if k else prefix.rstrip("."), v) for k, v in sd._metadata.items())
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="tests/goldens")
    args = parser.parse_args()
    rng = random.Random(2809)
    netg1 = state_dict(generator_layers(nz=8, ngf=4, nc=1), rng)
    netg3 = state_dict(generator_layers(nz=8, ngf=4, nc=3), rng)
    netd3 = state_dict(discriminator_layers(ndf=4, nc=3), rng)
    files = {
        "pth_netG_nc1.pth": zip_format(netg1, "pth_netG_nc1"),
        "pth_netG_nc1.safetensors": safetensors_bytes(netg1),
        "pth_netG_nc1_dataparallel.pth": zip_format(prefixed(netg1, "module."), "archive"),
        "pth_netG_nc3_legacy.pth": legacy_format(netg3),
        "pth_netG_nc3.safetensors": safetensors_bytes(netg3),
        "pth_netD_nc3.pth": zip_format(netd3, "archive"),
        "pth_netD_nc3.safetensors": safetensors_bytes(netd3),
    }
    for name, data in files.items():
        with open(os.path.join(args.out, name), "wb") as f:
            f.write(data)
        print("%s: %d bytes" % (name, len(data)))


if __name__ == "__main__":
    main()
