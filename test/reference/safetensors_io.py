"""Minimal safetensors reader/writer with numpy.

Layout: u64 LE header length, a JSON header (name -> dtype, shape, data_offsets; padded with spaces to a multiple
of 8), then the tensors' little-endian bytes back to back in insertion order. Writes F32, I32, U8 and F8_E4M3
(codes as F8_E4M3 arrays), and float32
arrays as BF16 or F16 (rounded to nearest even); reads F32, I32, U8, F16 and BF16 (the half types widened to
float32); read_raw gives each tensor's stored dtype, shape and bytes, for bitwise comparisons.
"""

import json
import struct

import numpy as np

# FP8 e4m3 codes are written from uint8 arrays viewed as one-byte void (np.dtype("V1"), F8_E4M3 below), so
# they stay apart from U8 tensors.
F8_E4M3 = np.dtype("V1")
_WRITE_DTYPES = {np.dtype(np.float32): "F32", np.dtype(np.int32): "I32", np.dtype(np.uint8): "U8", F8_E4M3: "F8_E4M3"}
_READ_DTYPES = {"F32": np.dtype("<f4"), "I32": np.dtype("<i4"), "F16": np.dtype("<f2"), "U8": np.dtype("u1")}


def to_bf16_bits(array):
    """float32 -> bfloat16 bit patterns (uint16), rounded to nearest even (NaN not expected here)."""
    bits = np.ascontiguousarray(array, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def round_to(array, dtype):
    """The float32 values `array` has once stored as dtype ("F32", "BF16", "F16")."""
    array = np.asarray(array, dtype=np.float32)
    if dtype == "BF16":
        return (to_bf16_bits(array).astype(np.uint32) << 16).view(np.float32).reshape(array.shape)
    if dtype == "F16":
        return array.astype(np.float16).astype(np.float32)
    return array


def write(path, tensors, metadata=None, dtype=None):
    """Write a dict name -> array (float32, int32 or uint8; scalars allowed) to `path`; float32 arrays as
    `dtype` ("BF16", "F16") when given."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    offset = 0
    for name, value in tensors.items():
        array = np.asarray(value)  # not ascontiguousarray: it would turn a scalar into shape [1]
        if array.dtype not in _WRITE_DTYPES:
            raise TypeError(f"{name}: cannot write dtype {array.dtype} (F32, I32 and U8 only)")
        stored = _WRITE_DTYPES[array.dtype]
        if stored == "F32" and dtype == "BF16":
            blob = to_bf16_bits(array).astype("<u2").tobytes(order="C")
            stored = "BF16"
        elif stored == "F32" and dtype == "F16":
            blob = array.astype("<f2").tobytes(order="C")
            stored = "F16"
        elif stored == "F8_E4M3":
            blob = array.tobytes(order="C")
        else:
            blob = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes(order="C")
        header[name] = {"dtype": stored, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    header_bytes = json.dumps(header, separators=(",", ":")).encode()
    header_bytes += b" " * (-len(header_bytes) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for blob in blobs:
            f.write(blob)


def read(path):
    """Read every tensor of `path` into a dict name -> numpy array, in file order."""
    return {name: _decode(name, dtype, shape, raw) for name, (dtype, shape, raw) in read_raw(path).items()}


def read_raw(path):
    """Every tensor of `path` as name -> (dtype, shape, bytes), in file order."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (header_len,) = struct.unpack_from("<Q", data, 0)
    if 8 + header_len > len(data):
        raise ValueError(f"{path}: header length {header_len} exceeds the file")
    header = json.loads(data[8:8 + header_len])
    base = 8 + header_len
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        if not 0 <= start <= end <= len(data) - base:
            raise ValueError(f"{path}: {name} data_offsets {start}..{end} out of range")
        tensors[name] = (info["dtype"], info["shape"], data[base + start:base + end])
    return tensors


def _decode(name, dtype, shape, raw):
    count = int(np.prod(shape, dtype=np.int64))
    if dtype == "BF16":
        # bfloat16 is the top half of a float32
        values = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    elif dtype in _READ_DTYPES:
        values = np.frombuffer(raw, dtype=_READ_DTYPES[dtype])
    else:
        raise TypeError(f"{name}: unsupported dtype {dtype}")
    if values.size != count:
        raise ValueError(f"{name}: {values.size} values for shape {shape}")
    if dtype in ("F16", "BF16"):
        values = values.astype(np.float32)
    return values.astype(values.dtype.newbyteorder("="), copy=True).reshape(shape)
