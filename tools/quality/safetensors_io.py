"""Reads and writes .safetensors files as numpy arrays, with the PyPI `safetensors` package when
it is installed and otherwise with the small reader and writer below (the format: an 8-byte
little-endian header length, a JSON header naming each tensor's dtype, shape and byte range,
then the raw little-endian data). No pickle anywhere. bf16 tensors are read as float32.

  load(path) -> {name: ndarray}          metadata(path) -> {str: str}
  save(path, {name: ndarray}, metadata)  written to PATH.tmp, then renamed over PATH
"""
import json
import os
import struct

import numpy as np

_DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
           "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_}
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}
# A header larger than this is not a checkpoint of these networks: refuse instead of reading it.
_MAX_HEADER = 100 * 1024 * 1024

try:
    import safetensors.numpy as _st_numpy
except ImportError:
    _st_numpy = None


class FormatError(ValueError):
    pass


def _read_header(f, path, size):
    raw = f.read(8)
    if len(raw) != 8:
        raise FormatError(f"{path}: not a safetensors file (shorter than its 8-byte header length)")
    (n,) = struct.unpack("<Q", raw)
    if n > min(size - 8, _MAX_HEADER):
        raise FormatError(f"{path}: header length {n} does not fit the file of {size} bytes")
    try:
        header = json.loads(f.read(n).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FormatError(f"{path}: the header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise FormatError(f"{path}: the header is not a JSON object")
    return header, 8 + n


def metadata(path):
    with open(path, "rb") as f:
        header, _ = _read_header(f, path, os.fstat(f.fileno()).st_size)
    return dict(header.get("__metadata__") or {})


def load_pure(path):
    """The fallback reader (also used by the tests to check it against the package)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        header, start = _read_header(f, path, size)
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = info["dtype"], [int(s) for s in info["shape"]], info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise FormatError(f"{path}: tensor {name!r} has no dtype, shape and data_offsets") from None
        count = int(np.prod(shape, dtype=np.int64))
        if dtype == "BF16":
            itemsize, np_dtype = 2, np.dtype("<u2")
        elif dtype in _DTYPES:
            np_dtype = np.dtype(_DTYPES[dtype]).newbyteorder("<")
            itemsize = np_dtype.itemsize
        else:
            raise FormatError(f"{path}: tensor {name!r} has dtype {dtype}, which this reader does not know")
        if not (0 <= begin <= end <= len(data)) or end - begin != count * itemsize:
            raise FormatError(f"{path}: tensor {name!r}: bytes {begin}..{end} do not hold {dtype}{shape} "
                              f"in a data section of {len(data)} bytes")
        arr = np.frombuffer(data, dtype=np_dtype, count=count, offset=begin).reshape(shape)
        if dtype == "BF16":  # bf16 is the upper half of an f32
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        out[name] = arr.astype(arr.dtype.newbyteorder("="), copy=True)
    return out


def load(path):
    if _st_numpy is not None:
        return _st_numpy.load_file(path)
    return load_pure(path)


def save_pure(path, tensors, meta=None):
    header, blobs, offset = {}, [], 0
    if meta:
        header["__metadata__"] = {str(k): str(v) for k, v in meta.items()}
    for name in sorted(tensors):
        arr = np.asarray(tensors[name], order="C")  # ascontiguousarray would make 0-d 1-d
        if arr.dtype not in _NAMES:
            raise ValueError(f"tensor {name!r}: dtype {arr.dtype} cannot be saved")
        blob = arr.astype(arr.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": _NAMES[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the data section starts 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def save(path, tensors, meta=None):
    if _st_numpy is None:
        save_pure(path, tensors, meta)
        return
    tmp = path + ".tmp"
    _st_numpy.save_file({k: np.asarray(v, order="C") for k, v in tensors.items()}, tmp,
                        metadata={str(k): str(v) for k, v in (meta or {}).items()})
    os.replace(tmp, path)
