"""Reader/writer of our token shard format (.bin).

    offset 0: magic "MOETOK01"   8: u32 token_bytes (2 or 4)   12: u32 flags (bit 0: a mask section follows)
    16: u64 n_tokens   24: u32 vocab_size   28..63: zero   64: tokens (LE)   then optionally n_tokens mask bytes

mask[j] == 1 means token j counts as a target; the target of input position j is token j + 1, masked (-1) when
mask[j + 1] == 0.
"""

import struct
from dataclasses import dataclass

import numpy as np

MAGIC = b"MOETOK01"
HEADER_BYTES = 64
FLAG_MASK = 1
_TOKEN_DTYPES = {2: np.dtype("<u2"), 4: np.dtype("<u4")}


@dataclass
class TokenShard:
    tokens: np.ndarray        # int64 [n_tokens]
    mask: np.ndarray | None   # uint8 [n_tokens] or None (every target counts)
    vocab_size: int


def write(path, tokens, vocab_size, mask=None, token_bytes=2):
    tokens = np.asarray(tokens, dtype=np.int64)
    if token_bytes not in _TOKEN_DTYPES:
        raise ValueError(f"token_bytes must be 2 or 4, got {token_bytes}")
    if tokens.size and (tokens.min() < 0 or tokens.max() >= vocab_size):
        raise ValueError("token id out of range of vocab_size")
    if token_bytes == 2 and vocab_size > 1 << 16:
        raise ValueError("vocab_size too large for 2-byte tokens")
    flags = FLAG_MASK if mask is not None else 0
    header = MAGIC + struct.pack("<IIQI", token_bytes, flags, tokens.size, vocab_size)
    header += b"\0" * (HEADER_BYTES - len(header))
    with open(path, "wb") as f:
        f.write(header)
        f.write(tokens.astype(_TOKEN_DTYPES[token_bytes]).tobytes())
        if mask is not None:
            mask = np.asarray(mask)
            if mask.shape != tokens.shape:
                raise ValueError("mask must have one byte per token")
            f.write((mask != 0).astype(np.uint8).tobytes())


def read(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != MAGIC:
        raise ValueError(f"{path}: bad magic {data[:8]!r}")
    token_bytes, flags, n_tokens, vocab_size = struct.unpack_from("<IIQI", data, 8)
    if token_bytes not in _TOKEN_DTYPES:
        raise ValueError(f"{path}: token_bytes {token_bytes}")
    tokens_end = HEADER_BYTES + n_tokens * token_bytes
    expected = tokens_end + (n_tokens if flags & FLAG_MASK else 0)
    if len(data) != expected:
        raise ValueError(f"{path}: {len(data)} bytes, expected {expected}")
    tokens = np.frombuffer(data, dtype=_TOKEN_DTYPES[token_bytes], count=n_tokens, offset=HEADER_BYTES)
    mask = None
    if flags & FLAG_MASK:
        mask = np.frombuffer(data, dtype=np.uint8, count=n_tokens, offset=tokens_end).copy()
    return TokenShard(tokens.astype(np.int64), mask, vocab_size)
