#!/usr/bin/python3
"""Writes the PyTorch golden data of tests/modules_test.cpp, modules_conv_pool_test.cpp and
modules_attention_test.cpp into tests/data/modules/.

Each file is a safetensors file with nested keys: "module.<name>" holds the module's parameters
and buffers (as in named_parameters()/named_buffers()), "input*" the inputs, and the remaining
keys the expected results computed by PyTorch. Run: /usr/bin/python3 make_modules_golden.py
(needs only torch; the safetensors writer is below so that the Python package is not needed).
"""
import json
import os
import struct

import torch
import torch.nn as nn

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "modules")
DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64", torch.bool: "BOOL"}


def save(name, tensors):
    header, blobs, offset = {}, [], 0
    for key, t in tensors.items():
        t = t.detach().contiguous().cpu()
        data = t.numpy().tobytes()  # little-endian on every machine torch runs on here
        header[key] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                       "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(os.path.join(OUT, name + ".safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def state(m, prefix="module."):
    d = {prefix + k: v for k, v in m.named_parameters()}
    d.update({prefix + k: v for k, v in m.named_buffers()})
    return d


def randomize(m):
    # Non-trivial affine parameters and running stats so that every term is exercised.
    with torch.no_grad():
        for name, p in list(m.named_parameters()) + list(m.named_buffers()):
            if p.dtype.is_floating_point:
                if "var" in name:
                    p.copy_(torch.rand_like(p) + 0.5)
                else:
                    p.copy_(torch.randn_like(p) * 0.5 + (1.0 if name.endswith("weight") else 0.0))


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)

    m = nn.Linear(3, 4)
    x = torch.randn(5, 3)
    save("linear", {**state(m), "input": x, "output": m(x)})

    m = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2))
    x = torch.randn(6, 3)
    save("mlp", {**state(m), "input": x, "output": m(x)})

    x = torch.randn(4, 6) * 2
    save("activations", {
        "input": x,
        "relu": nn.ReLU()(x),
        "gelu": nn.GELU()(x),
        "gelu_tanh": nn.GELU(approximate="tanh")(x),
        "tanh": nn.Tanh()(x),
        "sigmoid": nn.Sigmoid()(x),
        "softmax1": nn.Softmax(dim=1)(x),
        "log_softmax0": nn.LogSoftmax(dim=0)(x),
        "flatten": nn.Flatten(0, 1)(x.reshape(4, 2, 3)),
    })

    m = nn.LayerNorm([3, 4], eps=1e-4)
    randomize(m)
    x = torch.randn(2, 5, 3, 4)
    save("layernorm", {**state(m), "input": x, "output": m(x)})

    for name, cls, shape in [("batchnorm1d", nn.BatchNorm1d, (6, 4)),
                             ("batchnorm1d_3d", nn.BatchNorm1d, (5, 4, 3)),
                             ("batchnorm2d", nn.BatchNorm2d, (3, 4, 5, 5))]:
        m = cls(4, momentum=0.2)
        randomize(m)
        with torch.no_grad():
            m.num_batches_tracked.fill_(3)
        before = {k: v.clone() for k, v in state(m).items()}
        x = torch.randn(*shape) * 2 + 1
        m.train()
        y = m(x)
        after = state(m, "after.")
        m.eval()
        x2 = torch.randn(*shape)
        save(name, {**before, "input": x, "output_train": y, **after,
                    "input_eval": x2, "output_eval": m(x2)})

    m = nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 2), groups=2)
    x = torch.randn(2, 4, 7, 6)
    save("conv2d", {**state(m), "input": x, "output": m(x)})
    m = nn.Conv2d(3, 2, 3, padding=1, dilation=(2, 1), bias=False)
    x = torch.randn(1, 3, 6, 5)
    save("conv2d_dilated", {**state(m), "input": x, "output": m(x)})

    x = torch.randn(2, 3, 7, 8)
    save("maxpool2d", {"input": x,
                       "output": nn.MaxPool2d(3, stride=2, padding=1)(x),
                       "output_default_stride": nn.MaxPool2d(2)(x),
                       "output_dilated": nn.MaxPool2d((2, 3), stride=1, dilation=(1, 2))(x)})

    m = nn.Embedding(10, 4)
    idx = torch.tensor([[1, 0, 9], [3, 3, 7]])
    save("embedding", {**state(m), "input": idx, "output": m(idx)})

    m = nn.MultiheadAttention(8, 2, batch_first=True)
    with torch.no_grad():
        m.in_proj_bias.copy_(torch.randn(24) * 0.1)
        m.out_proj.bias.copy_(torch.randn(8) * 0.1)
    m.eval()
    q, k, v = torch.randn(2, 3, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 8)
    mask = torch.tensor([[False, False, True, False, True], [False, False, False, False, False]])
    out, w = m(q, k, v)
    out_m, w_heads = m(q, k, v, key_padding_mask=mask, average_attn_weights=False)
    save("mha", {**state(m), "query": q, "key": k, "value": v, "key_padding_mask": mask,
                 "output": out, "weights": w, "output_masked": out_m, "weights_heads": w_heads})

    m = nn.MultiheadAttention(4, 4)  # sequence first
    with torch.no_grad():
        m.in_proj_bias.copy_(torch.randn(12) * 0.1)
    m.eval()
    q, kv = torch.randn(3, 2, 4), torch.randn(6, 2, 4)
    out, w = m(q, kv, kv)
    save("mha_seq_first", {**state(m), "query": q, "key": kv, "value": kv,
                           "output": out, "weights": w})

    # AvgPool2d's options; an odd 7x8 input so that ceil_mode windows run past the end
    x = torch.randn(2, 3, 7, 8)
    save("avgpool2d", {
        "input": x,
        "output": nn.AvgPool2d(3, stride=2, padding=1)(x),
        "output_default_stride": nn.AvgPool2d(2)(x),
        "output_ceil": nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True)(x),
        "output_ceil_no_pad": nn.AvgPool2d((3, 2), stride=(2, 3), padding=(1, 1), ceil_mode=True,
                                           count_include_pad=False)(x),
        "output_no_pad": nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False)(x),
        "output_divisor": nn.AvgPool2d(2, stride=2, padding=1, ceil_mode=True,
                                       divisor_override=3)(x),
        "output_divisor_neg": nn.AvgPool2d((2, 3), divisor_override=-5)(x)})

    # F.pad's modes, and Conv2d's string padding and padding_mode
    import torch.nn.functional as F
    x = torch.randn(2, 3, 5, 6)
    save("pad", {
        "input": x,
        "constant": F.pad(x, (1, 2, 0, 3), value=1.5),
        "constant_crop": F.pad(x, (-1, 2, 1, -2, 1, 0)),
        "reflect": F.pad(x, (2, 1, 4, 3), mode="reflect"),
        "reflect_3d": F.pad(x[0], (5, 0), mode="reflect"),
        "replicate": F.pad(x, (0, 7, 2, 1), mode="replicate"),
        "replicate_crop": F.pad(x[1], (-2, 3), mode="replicate"),
        "circular": F.pad(x, (6, 1, 2, 5), mode="circular"),
        "circular_crop": F.pad(x, (-1, 2, 3, -2), mode="circular")})
    convs = {"same_odd": nn.Conv2d(3, 4, 3, padding="same"),
             "same_even_dilated": nn.Conv2d(3, 4, (2, 4), padding="same", dilation=(3, 1)),
             "valid": nn.Conv2d(3, 2, 2, padding="valid", bias=False),
             "reflect": nn.Conv2d(3, 4, 3, stride=2, padding=(2, 1), padding_mode="reflect"),
             "replicate_same": nn.Conv2d(3, 4, (4, 3), padding="same", padding_mode="replicate"),
             "circular": nn.Conv2d(3, 6, 3, padding=(1, 3), groups=3, padding_mode="circular")}
    data = {"input": x}
    for name, m in convs.items():
        data.update(state(m, name + "."))
        data["output." + name] = m(x)
    save("conv2d_padding", data)

    # MultiheadAttention with kdim/vdim (separate projection weights), add_bias_kv and
    # add_zero_attn, with both masks
    data = {}
    q, k, v = torch.randn(2, 3, 8), torch.randn(2, 4, 5), torch.randn(2, 4, 3)
    kpm = torch.tensor([[False, True, False, False], [False, False, False, True]])
    am = torch.randn(3, 4)
    mhas = {"kv_dims": nn.MultiheadAttention(8, 2, kdim=5, vdim=3, batch_first=True),
            "bias_kv": nn.MultiheadAttention(8, 4, add_bias_kv=True, kdim=5, vdim=3,
                                             batch_first=True),
            "zero_attn": nn.MultiheadAttention(8, 2, add_zero_attn=True, kdim=5, vdim=3,
                                               batch_first=True),
            "both": nn.MultiheadAttention(8, 2, add_bias_kv=True, add_zero_attn=True, kdim=5,
                                          vdim=3, batch_first=True)}
    for name, m in mhas.items():
        with torch.no_grad():
            m.in_proj_bias.copy_(torch.randn(24) * 0.1)
        m.eval()
        data.update(state(m, name + "."))
        out, w = m(q, k, v, key_padding_mask=kpm, attn_mask=am, average_attn_weights=False)
        data["output." + name], data["weights." + name] = out, w
    same = nn.MultiheadAttention(8, 2, add_bias_kv=True, add_zero_attn=True)  # sequence first
    same.eval()
    qs = torch.randn(3, 2, 8)
    data.update(state(same, "same."))
    out, w = same(qs, qs, qs)
    data.update({"output.same": out, "weights.same": w, "query_same": qs})
    data.update({"query": q, "key": k, "value": v, "key_padding_mask": kpm, "attn_mask": am})
    save("mha_options", data)

    # MaxPool2d(return_indices=True); rounded values so that windows hold ties
    x = torch.randint(-3, 4, (2, 3, 7, 8)).float()
    data = {"input": x}
    for name, m in {"plain": nn.MaxPool2d(3, stride=2, padding=1, return_indices=True),
                    "dilated_ceil": nn.MaxPool2d((2, 3), stride=2, dilation=(2, 1), padding=1,
                                                 ceil_mode=True, return_indices=True)}.items():
        out, idx = m(x)
        data["output." + name], data["indices." + name] = out, idx
    save("maxpool2d_indices", data)

    transformer_cases()


def names_tensor(names):
    # A list of names as int64 character codes, '\n' between names (safetensors holds tensors).
    return torch.tensor([ord(c) for c in "\n".join(names)], dtype=torch.int64)


def randomize_transformer(m):
    # Non-zero biases and non-trivial LayerNorm affines (torch starts them at 0 and 1).
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("bias") or ".norm" in "." + name:
                p.copy_(torch.randn_like(p) * 0.3 + (1.0 if name.endswith("norm1.weight") or
                                                     name.endswith("norm2.weight") or
                                                     name == "norm.weight" else 0.0))


def transformer_cases():
    """TransformerEncoderLayer and TransformerEncoder (tests/modules_transformer_test.cpp), eval
    mode. Outputs are computed with autograd enabled: with it, torch 1.13 takes its reference
    path (its no_grad fast path zeroes padded positions when it makes nested tensors)."""
    torch.manual_seed(29)
    E, H, F_ = 8, 2, 16
    # each layer argument; src [N=3, S=5, E] (batch_first) or [S, N, E]
    src_bf = torch.randn(3, 5, E)
    src_sf = src_bf.transpose(0, 1).contiguous()
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
    float_mask = torch.randn(5, 5)
    kpm = torch.tensor([[False, False, False, True, True], [False] * 5,
                        [False, False, False, False, True]])
    kpm_float = torch.where(kpm, torch.tensor(-2.5), torch.tensor(0.0))
    configs = {
        "seq_first": dict(batch_first=False),
        "batch_first": dict(batch_first=True),
        "norm_first": dict(batch_first=True, norm_first=True),
        "gelu": dict(batch_first=True, activation="gelu"),
        "eps": dict(batch_first=True, layer_norm_eps=0.5),
        "gelu_norm_first_seq": dict(activation="gelu", norm_first=True, layer_norm_eps=1e-3),
    }
    data = {"src_bf": src_bf, "src_sf": src_sf, "causal": causal, "float_mask": float_mask,
            "kpm": kpm, "kpm_float": kpm_float}
    for name, kw in configs.items():
        m = nn.TransformerEncoderLayer(E, H, F_, **kw)
        randomize_transformer(m)
        m.eval()
        assert torch.is_grad_enabled()
        bf = kw.get("batch_first", False)
        src = src_bf if bf else src_sf
        out = lambda y: y if bf else y.transpose(0, 1)  # noqa: E731 stored batch first
        data.update(state(m, name + "."))
        data["output." + name] = out(m(src))
        data["output_float_mask." + name] = out(m(src, src_mask=float_mask))
        data["output_causal." + name] = out(m(src, src_mask=causal))
        data["output_kpm." + name] = out(m(src, src_key_padding_mask=kpm))
        data["output_kpm_float." + name] = out(m(src, src_key_padding_mask=kpm_float))
        data["output_causal_kpm." + name] = out(m(src, src_mask=causal, src_key_padding_mask=kpm))
        data["output_float_mask_kpm." + name] = out(m(src, src_mask=float_mask,
                                                      src_key_padding_mask=kpm))
        # unbatched: set 0 of the batch alone, with its padding row
        data["output_unbatched." + name] = m(src_bf[0], src_mask=causal,
                                             src_key_padding_mask=kpm[0])
    data["param_names"] = names_tensor([n for n, _ in m.named_parameters()])
    save("transformer_layer", data)

    # TransformerEncoder: 2 layers, without and with a final norm; each layer its own values
    data = {"src_bf": src_bf, "src_sf": src_sf, "causal": causal, "kpm": kpm}
    encoders = {
        "plain": nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, F_, batch_first=True), 2),
        "norm": nn.TransformerEncoder(nn.TransformerEncoderLayer(E, H, F_), 2,
                                      norm=nn.LayerNorm(E, eps=1e-4)),
        "norm_first_gelu": nn.TransformerEncoder(
            nn.TransformerEncoderLayer(E, H, F_, activation="gelu", norm_first=True,
                                       batch_first=True), 2, norm=nn.LayerNorm(E)),
    }
    for name, m in encoders.items():
        randomize_transformer(m)
        m.eval()
        bf = m.layers[0].self_attn.batch_first
        src = src_bf if bf else src_sf
        out = lambda y: y if bf else y.transpose(0, 1)  # noqa: E731
        data.update(state(m, name + "."))
        data["output." + name] = out(m(src))
        data["output_masks." + name] = out(m(src, mask=causal, src_key_padding_mask=kpm))
        data["output_unbatched." + name] = m(src_bf[1], mask=causal)
        data["param_names." + name] = names_tensor([n for n, _ in m.named_parameters()])
    save("transformer_encoder", data)

    # stacked: SETS members with their own values, states stacked per key; each member's output
    # from torch itself
    sets = 3
    data = {"src": src_bf, "src_per_set": torch.randn(sets, 3, 5, E), "kpm": kpm}
    makers = {
        "layer": lambda: nn.TransformerEncoderLayer(E, H, F_, batch_first=True),
        "encoder": lambda: nn.TransformerEncoder(
            nn.TransformerEncoderLayer(E, H, F_, activation="gelu", batch_first=True), 2,
            norm=nn.LayerNorm(E)),
    }
    for name, make in makers.items():
        members = [make() for _ in range(sets)]
        for m in members:
            randomize_transformer(m)
            m.eval()
        keys = [k for k, _ in members[0].named_parameters()]
        for k in keys:
            data[f"{name}.params.{k}"] = torch.stack([dict(m.named_parameters())[k]
                                                      for m in members])
        data[f"{name}.output"] = torch.stack([m(src_bf, src_key_padding_mask=kpm)
                                              for m in members])
        data[f"{name}.output_per_set"] = torch.stack(
            [m(data["src_per_set"][i]) for i, m in enumerate(members)])
    save("transformer_stacked", data)

    # a convolution that takes the Winograd kernel (float32, 3x3, stride 1, 64 channels in and
    # out, 16 x 16 outputs), last and with its own seed so that the files above keep their values
    torch.manual_seed(31)
    m = nn.Conv2d(64, 64, 3, padding=1)
    x = torch.randn(1, 64, 16, 16)
    save("conv2d_winograd", {**state(m), "input": x, "output": m(x)})


if __name__ == "__main__":
    main()
