#!/usr/bin/python3
"""Golden data for td's PyTorch checkpoint reader (tests/torch_checkpoint_test.cpp,
tests/stack_files_test.cpp, tests/cli), from PyTorch 1.13.

Run from anywhere: /usr/bin/python3 tests/golden/make_checkpoint_golden.py
Writes to tests/data/checkpoints/:
  <name>.pt                       torch.save files (the zip format)
  <name>.expected.safetensors     their tensors, as td must read them (half and bfloat16 as
                                  float32, smaller ints as int64)
  member_<i>.pt                   3 per-member state_dicts of one MLP, members.input and
  members.expected.safetensors    each member's output on it, stacked [3, ...]
  member_extra_key.pt, member_bad_shape.pt: members that do not stack
  evil_*.pt, bad_*.pt             hostile archives that must end in clean errors
"""
import io
import os
import pickle
import sys
import zipfile

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "checkpoints")
os.makedirs(OUT, exist_ok=True)
torch.manual_seed(0)


def path(name):
    return os.path.join(OUT, name)


def expected(tensors):
    """td's reading of each tensor: float32 for half/bfloat16, int64 for smaller ints."""
    out = {}
    for k, t in tensors.items():
        t = t.detach()
        if t.dtype in (torch.float16, torch.bfloat16):
            t = t.float()
        elif t.dtype in (torch.int32, torch.int16, torch.int8, torch.uint8):
            t = t.long()
        out[k] = t.contiguous()
    return out


def save(name, obj, tensors):
    torch.save(obj, path(name + ".pt"))
    safetensors_io.save(expected(tensors), path(name + ".expected.safetensors"))


def mlp():
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def cnn():
    m = nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                      nn.Linear(4 * 5 * 5, 3))
    m.train()
    with torch.no_grad():
        for _ in range(3):  # running stats and num_batches_tracked that are not the defaults
            m(torch.randn(6, 2, 5, 5))
    return m


sd = mlp().state_dict()
save("mlp", sd, sd)
cnn_sd = cnn().state_dict()
save("cnn", cnn_sd, cnn_sd)
save("nested", {"model": sd, "epoch": 3, "lr": 0.01, "note": "run 7", "steps": [1, 2]}, sd)
ema = {k: v * 0.5 for k, v in sd.items()}
save("two_models", {"model": sd, "ema": ema, "epoch": 3}, sd)

dtypes = {
    "f64": torch.randn(3, dtype=torch.float64),
    "i64": torch.tensor([-(2 ** 40), 0, 7]),
    "flag": torch.tensor([True, False, True]),
    "half": torch.tensor([0.5, -2.0, 65504.0, 6e-8], dtype=torch.float16),
    "bf16": torch.tensor([1.5, -3.0, 1e30], dtype=torch.bfloat16),
    "i32": torch.tensor([-5, 2 ** 31 - 1], dtype=torch.int32),
    "i16": torch.tensor([-300, 300], dtype=torch.int16),
    "i8": torch.tensor([-128, 127], dtype=torch.int8),
    "u8": torch.tensor([0, 255], dtype=torch.uint8),
    "scalar": torch.tensor(2.5),
    "empty": torch.zeros(0, 3),
}
save("dtypes", dtypes, dtypes)

base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
flat = torch.arange(10, dtype=torch.float32) * 1.5
views = {
    "w": base,
    "w_t": base.t(),  # non-contiguous, sharing w's storage
    "col": base[:, 2],  # stride 6, offset 2
    "lo": flat[0:3],  # two entries sharing one storage at different offsets
    "hi": flat[5:9],
    "stride2": flat[1::2],
    "param": nn.Parameter(torch.randn(2, 2)),  # saved through _rebuild_parameter
}
save("views", views, views)

# Ensemble members: one MLP class, three separately initialised runs.
members = [nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 3)) for _ in range(3)]
x = torch.randn(7, 5)
with torch.no_grad():
    outs = torch.stack([m(x) for m in members])
for i, m in enumerate(members):
    torch.save(m.state_dict(), path(f"member_{i}.pt"))
safetensors_io.save(dict(members[1].state_dict()), path("member_1.safetensors"))
safetensors_io.save({"input": x}, path("members.input.safetensors"))
safetensors_io.save({"output": outs}, path("members.expected.safetensors"))
stacked = {k: torch.stack([m.state_dict()[k] for m in members]) for k in members[0].state_dict()}
safetensors_io.save(stacked, path("members.stacked.safetensors"))
extra = dict(members[2].state_dict())
extra["2.extra"] = torch.zeros(1)
torch.save(extra, path("member_extra_key.pt"))
torch.save(nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 4)).state_dict(),
           path("member_bad_shape.pt"))

# Hostile archives: the layout of torch.save with a data.pkl of our own.
def archive(name, pkl, records=None):
    def info(n):  # a fixed date, so that the files do not change when rerun
        return zipfile.ZipInfo(n, date_time=(1980, 1, 1, 0, 0, 0))

    with zipfile.ZipFile(path(name), "w", zipfile.ZIP_STORED) as z:
        z.writestr(info("archive/data.pkl"), pkl)
        for key, data in (records or {}).items():
            z.writestr(info("archive/data/" + key), data)
        z.writestr(info("archive/version"), "3\n")


class System:
    def __reduce__(self):
        return (os.system, ("echo td-was-pwned",))


class Eval:
    def __reduce__(self):
        return (eval, ("__import__('os').system('echo td-was-pwned')",))


archive("evil_system.pt", pickle.dumps({"w": System()}, protocol=2))
archive("evil_eval.pt", pickle.dumps({"w": Eval()}, protocol=2))
archive("bad_opcode.pt", b"\x80\x02}q\x00(X\x01\x00\x00\x00aI42\n" b"u.")  # INT: text opcode
archive("bad_memo.pt", b"\x80\x02}q\x00h\x07.")  # BINGET of an index never stored
archive("bad_underflow.pt", b"\x80\x02s.")  # SETITEM on an empty stack
archive("bad_huge_string.pt", b"\x80\x02X\xff\xff\xff\x7fabc")  # 2 GB string in 3 bytes


def saved_pickle(obj):
    buf = io.BytesIO()
    torch.save(obj, buf)
    z = zipfile.ZipFile(buf)
    prefix = z.namelist()[0].split("/")[0]
    return z.read(prefix + "/data.pkl"), {n.split("/")[-1]: z.read(n) for n in z.namelist()
                                          if "/data/" in n}


pkl, records = saved_pickle({"w": torch.arange(6, dtype=torch.float32)})
archive("bad_missing_storage.pt", pkl, {})
archive("bad_short_storage.pt", pkl, {"0": records["0"][:12]})
# a view beyond its storage: the storage says 4 elements, the tensor [6]
assert pkl.count(b"K\x06t") == 1
archive("bad_view.pt", pkl.replace(b"K\x06t", b"K\x04t"), {"0": records["0"][:16]})
torch.save(sd, path("legacy.pt"), _use_new_zipfile_serialization=False)
print("wrote", len(os.listdir(OUT)), "files to", os.path.normpath(OUT))

# Seeds of the fuzz target tests/fuzz/fuzz_torch_checkpoint.cpp: whole .pt files, and bare
# data.pkl pickles whose storages are the target's records "0" to "7" of 64 bytes each.
SEEDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "corpus",
                     "torch_checkpoint")
os.makedirs(SEEDS, exist_ok=True)
for name in ("mlp", "views", "nested"):
    with open(path(name + ".pt"), "rb") as f, open(os.path.join(SEEDS, name + ".pt"), "wb") as g:
        g.write(f.read())
f32 = torch.zeros(16)
seed_objs = {
    "pkl_views": {"a": f32, "t": f32.view(4, 4).t(), "s": f32[3:7], "c": f32.view(4, 4)[:, 1]},
    "pkl_dtypes": {"d": torch.zeros(8, dtype=torch.float64), "l": torch.zeros(8, dtype=torch.long),
                   "h": torch.zeros(32, dtype=torch.float16), "b": torch.zeros(64, dtype=torch.bool),
                   "bf": torch.zeros(32, dtype=torch.bfloat16), "i": torch.zeros(16, dtype=torch.int32),
                   "u": torch.zeros(64, dtype=torch.uint8)},
    "pkl_nested": {"model": {"w": f32.view(2, 8)}, "epoch": 3, "lr": 0.5, "x": [1, (2, None)]},
    "pkl_param": {"p": nn.Parameter(torch.zeros(4, 4)), "q": torch.zeros(16).view(2, 2, 2, 2)},
}
for name, obj in seed_objs.items():
    pkl, _ = saved_pickle(obj)
    with open(os.path.join(SEEDS, name), "wb") as g:
        g.write(pkl)
mod = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2)).state_dict()
pkl, _ = saved_pickle(mod)
with open(os.path.join(SEEDS, "pkl_batchnorm_metadata"), "wb") as g:
    g.write(pkl)  # storages of other sizes: refused, but the OrderedDict's BUILD is exercised
