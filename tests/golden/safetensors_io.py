"""A minimal safetensors reader/writer (the format: 8-byte little-endian header length, a JSON
header {key: {dtype, shape, data_offsets}}, then raw little-endian data), so the golden scripts
need nothing beyond torch."""
import json
import struct

import torch

_DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64", torch.bool: "BOOL"}
_TORCH = {v: k for k, v in _DTYPES.items()}


def save(tensors, path):
    header, blobs, offset = {}, [], 0
    for key, t in tensors.items():
        t = t.detach().contiguous().cpu()
        data = t.numpy().tobytes()
        header[key] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape),
                       "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for b in blobs:
            f.write(b)


def load(path):
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n])
    out = {}
    for key, info in header.items():
        if key == "__metadata__":
            continue
        b, e = info["data_offsets"]
        dtype = _TORCH[info["dtype"]]
        t = torch.frombuffer(bytearray(buf[8 + n + b:8 + n + e]), dtype=dtype)
        out[key] = t.reshape(info["shape"]).clone()
    return out
