"""Minimal, strict safetensors reader/writer built on json + numpy.

Used by the parity checker (compare.py) to read what the C trainer dumps and to
write fake dumps in its self-test.  There is no `safetensors` package on the
test machines, so this implements the format directly:

    8 bytes   N, unsigned 64-bit little-endian: length of the JSON header
    N bytes   JSON object {name: {"dtype": "F32", "shape": [...],
                                  "data_offsets": [begin, end]}, ...,
                           optional "__metadata__": {str: str}}
    rest      the byte buffer; offsets are relative to its start

Tensors are stored little-endian, row-major.  `load` checks the header
thoroughly (dtype, shape, offsets consistent with the buffer, no overlaps, no
holes) and raises SafetensorsError naming the file and the problem.
"""

import json
import os
import struct

import numpy as np

__all__ = ["SafetensorsError", "load", "save", "DTYPES"]

# safetensors dtype name -> little-endian numpy dtype
DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"),
    "U32": np.dtype("<u4"),
    "U16": np.dtype("<u2"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
_NAME_OF = {(dt.kind, dt.itemsize): name for name, dt in DTYPES.items()}

_MAX_HEADER = 100 * 1024 * 1024  # same sanity bound as the reference implementation


class SafetensorsError(ValueError):
    """A safetensors file is malformed or cannot be written."""


def _fail(path, msg):
    raise SafetensorsError(f"{path}: {msg}")


def load(path):
    """Read a safetensors file; returns {name: np.ndarray} (native byte order, owned copies)."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        _fail(path, f"file is {len(raw)} bytes, too short for the 8-byte header length")
    (n,) = struct.unpack("<Q", raw[:8])
    if n > _MAX_HEADER:
        _fail(path, f"header length {n} exceeds the {_MAX_HEADER}-byte limit")
    if 8 + n > len(raw):
        _fail(path, f"header length {n} runs past the end of the {len(raw)}-byte file")
    try:
        header = json.loads(raw[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        _fail(path, f"header is not valid UTF-8 JSON: {e}")
    if not isinstance(header, dict):
        _fail(path, f"header is a JSON {type(header).__name__}, expected an object")
    buf = memoryview(raw)[8 + n:]

    meta = header.pop("__metadata__", None)
    if meta is not None and not (isinstance(meta, dict)
                                 and all(isinstance(k, str) and isinstance(v, str)
                                         for k, v in meta.items())):
        _fail(path, "__metadata__ must be an object of string to string")

    out = {}
    spans = []
    for name, info in header.items():
        where = f"tensor {name!r}"
        if not isinstance(info, dict):
            _fail(path, f"{where}: entry is not an object")
        extra = set(info) - {"dtype", "shape", "data_offsets"}
        missing = {"dtype", "shape", "data_offsets"} - set(info)
        if missing:
            _fail(path, f"{where}: missing field(s) {sorted(missing)}")
        if extra:
            _fail(path, f"{where}: unknown field(s) {sorted(extra)}")
        dtype_name = info["dtype"]
        if dtype_name not in DTYPES:
            _fail(path, f"{where}: unsupported dtype {dtype_name!r} "
                        f"(supported: {', '.join(DTYPES)})")
        dt = DTYPES[dtype_name]
        shape = info["shape"]
        if not (isinstance(shape, list)
                and all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)):
            _fail(path, f"{where}: shape {shape!r} is not a list of non-negative integers")
        offs = info["data_offsets"]
        if not (isinstance(offs, list) and len(offs) == 2
                and all(isinstance(o, int) and not isinstance(o, bool) for o in offs)):
            _fail(path, f"{where}: data_offsets {offs!r} is not [begin, end]")
        begin, end = offs
        if not 0 <= begin <= end <= len(buf):
            _fail(path, f"{where}: data_offsets [{begin}, {end}] outside the "
                        f"{len(buf)}-byte data buffer")
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if end - begin != count * dt.itemsize:
            _fail(path, f"{where}: {end - begin} bytes at data_offsets but shape {shape} "
                        f"of {dtype_name} needs {count * dt.itemsize}")
        arr = np.frombuffer(buf[begin:end], dtype=dt).reshape(shape)
        out[name] = arr.astype(dt.newbyteorder("="), copy=True)
        spans.append((begin, end, name))

    # The format requires the tensors to tile the buffer exactly: no overlaps, no holes.
    spans.sort()
    pos = 0
    for begin, end, name in spans:
        if begin < pos:
            _fail(path, f"tensor {name!r} at [{begin}, {end}] overlaps the previous tensor")
        if begin > pos:
            _fail(path, f"{begin - pos} unused bytes before tensor {name!r} at offset {begin}")
        pos = end
    if pos != len(buf):
        _fail(path, f"{len(buf) - pos} trailing bytes after the last tensor")
    return out


def save(path, tensors, metadata=None):
    """Write {name: array-like} to `path`; tensors sorted by name, header space-padded to 8 bytes.

    metadata defaults to {"format": "pt"}; pass {} to omit it.
    """
    path = os.fspath(path)
    if metadata is None:
        metadata = {"format": "pt"}
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    offset = 0
    for name in sorted(tensors):
        if name == "__metadata__":
            _fail(path, "'__metadata__' is reserved and cannot be a tensor name")
        arr = np.asarray(tensors[name])
        key = (arr.dtype.kind, arr.dtype.itemsize)
        if key not in _NAME_OF:
            _fail(path, f"tensor {name!r}: numpy dtype {arr.dtype} has no safetensors equivalent")
        dtype_name = _NAME_OF[key]
        data = np.ascontiguousarray(arr, dtype=DTYPES[dtype_name]).tobytes()
        header[name] = {"dtype": dtype_name, "shape": list(arr.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)
