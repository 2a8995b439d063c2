#!/usr/bin/python3
"""Golden data of tests/modules_layers_test.cpp: Conv1d, the 1-D and adaptive pools, GroupNorm
and InstanceNorm1d/2d, computed by PyTorch 1.13.

Writes tests/data/modules/layers_<case>.safetensors (keys as make_modules_golden.py's:
"module.<name>" the parameters and buffers, "input*" the inputs, the rest expected results) and
tests/data/functional_vmap/layers_<case>.safetensors (keys as make_functional_vmap_golden.py's:
params.<name> stacked over the sets, input.<name>, output, after.<buffer>).
Run from anywhere: /usr/bin/python3 tests/golden/make_layers_golden.py
"""
import os
import sys

import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import safetensors_io  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
MODULES = os.path.join(HERE, "..", "data", "modules")
FVMAP = os.path.join(HERE, "..", "data", "functional_vmap")


def state(m, prefix):
    d = {prefix + k: v.detach().clone() for k, v in m.named_parameters()}
    d.update({prefix + k: v.detach().clone() for k, v in m.named_buffers()})
    return d


def randomize(m):
    with torch.no_grad():
        for name, p in list(m.named_parameters()) + list(m.named_buffers()):
            if p.dtype.is_floating_point:
                if "var" in name:
                    p.copy_(torch.rand_like(p) + 0.5)
                else:
                    p.copy_(torch.randn_like(p) * 0.5 + (1.0 if name.endswith("weight") else 0.0))


def save(directory, name, tensors):
    tensors = {k: v.detach().contiguous() for k, v in tensors.items()}
    safetensors_io.save(tensors, os.path.join(directory, "layers_" + name + ".safetensors"))


def conv1d_cases():
    # (case name, constructor kwargs); input [3, 4, 11] and the unbatched [4, 11]
    cases = {
        "plain": dict(in_channels=4, out_channels=6, kernel_size=3),
        "strided": dict(in_channels=4, out_channels=6, kernel_size=4, stride=2, padding=2,
                        dilation=2, groups=2),
        "same_even": dict(in_channels=4, out_channels=3, kernel_size=4, padding="same",
                          dilation=1, bias=False),
        "valid": dict(in_channels=4, out_channels=4, kernel_size=2, padding="valid", groups=4),
        "reflect": dict(in_channels=4, out_channels=6, kernel_size=3, stride=2, padding=2,
                        padding_mode="reflect"),
        "replicate": dict(in_channels=4, out_channels=6, kernel_size=4, padding="same",
                          dilation=2, padding_mode="replicate"),
        "circular": dict(in_channels=4, out_channels=2, kernel_size=3, padding=3,
                         padding_mode="circular"),
    }
    x = torch.randn(3, 4, 11)
    data = {"input": x}
    for name, kw in cases.items():
        m = nn.Conv1d(**kw)
        data.update(state(m, "module." + name + "."))
        data["output." + name] = m(x)
        if m.padding_mode == "zeros":  # torch 1.13 pads an unbatched input in "zeros" mode only
            data["unbatched." + name] = m(x[1])
        data["repr." + name] = torch.tensor(list(repr(m).encode()), dtype=torch.int64)
    save(MODULES, "conv1d", data)


def pool_cases():
    x = torch.randn(2, 3, 11)
    data = {"input": x}
    maxes = {"k3": dict(kernel_size=3), "k2s1p1": dict(kernel_size=2, stride=1, padding=1),
             "k3s2d2ceil": dict(kernel_size=3, stride=2, padding=1, dilation=2, ceil_mode=True)}
    for name, kw in maxes.items():
        out, idx = nn.MaxPool1d(return_indices=True, **kw)(x)
        data["max." + name], data["max_indices." + name] = out, idx
    avgs = {"k3": dict(kernel_size=3), "k4s3p2": dict(kernel_size=4, stride=3, padding=2),
            "k4s3p2_ceil_nopad": dict(kernel_size=4, stride=3, padding=2, ceil_mode=True,
                                      count_include_pad=False)}
    for name, kw in avgs.items():
        data["avg." + name] = nn.AvgPool1d(**kw)(x)
    for n in (1, 3, 4, 11, 5):
        data[f"adaptive_avg1d.{n}"] = nn.AdaptiveAvgPool1d(n)(x)
    x2 = torch.randn(2, 3, 7, 9)
    data["input2d"] = x2
    sizes = {"1": 1, "3x4": (3, 4), "Nx5": (None, 5), "2xN": (2, None), "7x9": (7, 9),
             "4x2": (4, 2)}
    for name, s in sizes.items():
        data["adaptive_avg2d." + name] = nn.AdaptiveAvgPool2d(s)(x2)
        data["adaptive_max2d." + name] = nn.AdaptiveMaxPool2d(s)(x2)
    save(MODULES, "pools", data)


def norm_cases():
    data = {}
    x1, x2 = torch.randn(3, 6, 5), torch.randn(2, 4, 3, 3)
    data["input1d"], data["input2d"] = x1, x2
    g = nn.GroupNorm(3, 6)
    randomize(g)
    data.update(state(g, "module.group3."))
    data["group3"] = g(x1)
    data["group2_2d_noaffine"] = nn.GroupNorm(2, 4, eps=1e-3, affine=False)(x2)
    for name, m, x in (("in1d", nn.InstanceNorm1d(6, affine=True, track_running_stats=True), x1),
                       ("in2d", nn.InstanceNorm2d(4, momentum=0.3, affine=True,
                                                  track_running_stats=True), x2)):
        randomize(m)
        data.update(state(m, "module." + name + "."))
        m.train()
        data[name + ".train"] = m(x)
        data[name + ".after_mean"] = m.running_mean.clone()
        data[name + ".after_var"] = m.running_var.clone()
        m.eval()
        data[name + ".eval"] = m(x)
        data[name + ".unbatched_eval"] = m(x[0])
    data["in1d_plain"] = nn.InstanceNorm1d(6)(x1)
    data["in2d_plain_unbatched"] = nn.InstanceNorm2d(4)(x2[1])
    save(MODULES, "norms", data)


def option_cases():
    """BatchNorm momentum=None over three training batches; Embedding max_norm (in place)."""
    data = {}
    bn = nn.BatchNorm1d(4, momentum=None)
    randomize(bn)
    data.update(state(bn, "module.bn."))
    for i in range(3):
        x = torch.randn(5, 4, 3)
        data[f"bn.input{i}"], data[f"bn.output{i}"] = x, bn(x)
        data[f"bn.after_mean{i}"] = bn.running_mean.clone()
        data[f"bn.after_var{i}"] = bn.running_var.clone()
    bn.eval()
    data["bn.eval"] = bn(data["bn.input0"])
    idx = torch.tensor([[1, 3, 3], [7, 0, 1]])
    data["indices"] = idx
    for name, kw in (("emb2", dict(max_norm=1.5)), ("emb1", dict(max_norm=2.0, norm_type=1.0)),
                     ("embinf", dict(max_norm=0.8, norm_type=float("inf")))):
        m = nn.Embedding(10, 4, **kw)
        with torch.no_grad():
            m.weight.mul_(1.5)
        data.update(state(m, "module." + name + "."))
        with torch.no_grad():
            data[name + ".output"] = m(idx)
        data[name + ".after"] = m.weight.detach().clone()
        data[name + ".repr"] = torch.tensor(list(repr(m).encode()), dtype=torch.int64)
    save(MODULES, "options", data)


SETS = 3


def stacked(models):
    names = [n for n, _ in models[0].named_parameters()] + [n for n, _ in models[0].named_buffers()]
    st = [dict(list(m.named_parameters()) + list(m.named_buffers())) for m in models]
    return {n: torch.stack([s[n].detach().clone() for s in st]) for n in names}


def ensemble_case(name, make, x, per_set=False, train=False, prepare=None):
    """Each member run by torch on its own; the outputs and updated buffers (or weights that
    forward changes in place: after.<name>) stacked."""
    models = [make() for _ in range(SETS)]
    for i, m in enumerate(models):
        randomize(m)
        m.train(train)
        if prepare:
            prepare(i, m)
    tensors = {f"params.{k}": v for k, v in stacked(models).items()}
    tensors["input.input"] = x
    with torch.no_grad():
        tensors["output"] = torch.stack([m(x[i] if per_set else x) for i, m in enumerate(models)])
    if train:
        for n, _ in models[0].named_buffers():
            tensors[f"after.{n}"] = torch.stack([dict(m.named_buffers())[n] for m in models])
    for n, _ in models[0].named_parameters():
        after = torch.stack([dict(m.named_parameters())[n].detach() for m in models])
        if not torch.equal(after, tensors[f"params.{n}"]):
            tensors[f"after.{n}"] = after
    save(FVMAP, name, tensors)


def main():
    os.makedirs(MODULES, exist_ok=True)
    torch.manual_seed(0)
    conv1d_cases()
    pool_cases()
    norm_cases()
    cnn1d = lambda: nn.Sequential(
        nn.Conv1d(4, 6, 3, padding=1), nn.GroupNorm(2, 6), nn.ReLU(), nn.MaxPool1d(2),
        nn.Conv1d(6, 6, 3, padding="same", padding_mode="reflect"),
        nn.InstanceNorm1d(6, affine=True), nn.AvgPool1d(2, 1), nn.AdaptiveAvgPool1d(3),
        nn.Flatten(), nn.Linear(18, 2))
    ensemble_case("cnn1d_shared", cnn1d, torch.randn(2, 4, 12))
    ensemble_case("cnn1d_per_set", cnn1d, torch.randn(SETS, 2, 4, 12), per_set=True)
    cnn2d = lambda: nn.Sequential(
        nn.Conv2d(2, 4, 3), nn.GroupNorm(4, 4), nn.AdaptiveMaxPool2d((3, None)),
        nn.InstanceNorm2d(4, affine=True, track_running_stats=True), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(4, 2))
    ensemble_case("cnn2d_train", cnn2d, torch.randn(SETS, 2, 2, 7, 6), per_set=True, train=True)
    ensemble_case("cnn2d_eval", cnn2d, torch.randn(2, 2, 7, 6))
    option_cases()

    def tracked(i, m):  # each set has seen a different number of batches
        m[1].num_batches_tracked.fill_(2 + 3 * i)
    ensemble_case("bn_cumulative", lambda: nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4,
                  momentum=None)), torch.randn(SETS, 6, 3), per_set=True, train=True,
                  prepare=tracked)

    def scaled(i, m):
        with torch.no_grad():
            m.weight.mul_(1.5)
    ensemble_case("embedding_max_norm", lambda: nn.Embedding(8, 3, max_norm=1.2),
                  torch.randint(0, 8, (SETS, 2, 3)), per_set=True, prepare=scaled)


if __name__ == "__main__":
    main()
