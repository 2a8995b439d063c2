#!/usr/bin/python3
"""Interleaved td vs PyTorch benchmark (BENCHMARKS.md's method) and td's targets against it.

Runs `tdvmap bench --json` and ../shared/bench/anchor_torch.py alternately --rounds times, both
with OpenBLAS's processor override unset, takes per-workload medians over the rounds and prints
the ratios next to their targets. Also runs td with --threads 2 (thread scaling) and mlp32_perset
with --chunk-size 4 and 32 (peak memory: all 32 sets at once is chunk_size 32, since without a
chunk_size functional_vmap runs mid-sized ensembles in blocks of its own).

  tools/bench_vs_torch.py [--rounds 3] [--tdvmap build/tools/tdvmap/tdvmap] [--anchor PATH]

With --model SPEC (and tdvmap bench's --input-shape, --sets, --per-set, --inputs, --index-range,
--train, --name), one custom workload instead: tdvmap bench and the same module built by PyTorch
from the same spec (torch.nn's constructors), functorch vmap and a loop, interleaved.

  tools/bench_vs_torch.py --model 'Sequential(Conv2d(3,16,3,padding=1), ReLU(), Flatten(),
      Linear(16384,10))' --input-shape 8,3,32,32 --sets 16

--loss NAME (a torch.nn.functional loss) scores each set's output against a shared random
target, on both sides. --custom NAME runs one of the named custom workloads of CUSTOM:

  tools/bench_vs_torch.py --rounds 3 --custom mlp64_xent
  tools/bench_vs_torch.py --rounds 3 --custom conv1d16

--plot FILE.png draws the scaling picture: time per set (log) against 1, 2, 4, ..., 1024 sets
(log) for td's vmap and loop (tdvmap bench --model) and PyTorch's functorch vmap and loop (this
script's PyTorch side), one thread, on the two workloads of PLOT_WORKLOADS side by side: (a) an
MLP Linear(32,64) ReLU Linear(64,10) on a shared [64, 32] input, (b) a small CNN Conv2d(3,8,3,
padding=1) ReLU MaxPool2d(2) Flatten Linear(512,10) on a shared [8, 3, 16, 16] input. Medians
over --rounds (td's runs and PyTorch's interleaved by workload), shorter measurements for the
large set counts; about 70 s a round on a 2-core machine. It prints the numbers as a table and
writes them (per call, in microseconds, with the machine, date, td's revision and PyTorch's
version) to FILE.csv; --from-csv redraws a picture from such a CSV without running anything.
Needs matplotlib (apt-get install python3-matplotlib); nothing else here does.

--level avx2 holds both sides to AVX2 on an AVX-512 machine, a stand-in for an AVX2-only one
(same caches and clock, so only an approximation): td's kernels (TD_ISA=avx2), OpenBLAS's for
td's and PyTorch's GEMMs (OPENBLAS_CORETYPE=Haswell), PyTorch's ATen (ATEN_CPU_CAPABILITY=avx2)
and oneDNN (ONEDNN_MAX_CPU_ISA=AVX2).

  tools/bench_vs_torch.py --rounds 5 --plot tools/figures/scaling.png
  tools/bench_vs_torch.py --plot tools/figures/scaling.png --from-csv tools/figures/scaling.csv
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ENV = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
LEVEL_ENV = {"avx2": {"TD_ISA": "avx2", "OPENBLAS_CORETYPE": "Haswell",
                      "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"}}

# workload -> functional_vmap / best PyTorch target, and vmap / own-loop target
TARGETS = {
    "seed_linear4": (0.25, 0.5),
    "mlp32_shared": (0.7, 0.5),
    "mlp32_perset": (0.7, 0.5),
    "mlp8_large": (1.0, 1.0),
    "mlp32_dropout_diff": (0.4, 0.5),
    "mlp256_small": (0.3, 0.5),
}

# named custom workloads (--custom NAME): their flags and td / best PyTorch target
CUSTOM = {
    # the population loss of 64 MLPs: cross_entropy against shared class indices, mean
    "mlp64_xent": (dict(model="Sequential(Linear(32,64), ReLU(), Linear(64,64), ReLU(), "
                              "Linear(64,10))",
                        input_shape="256,32", sets=64, loss="cross_entropy"), 0.5),
    # an ensemble of small 1-D CNNs
    "conv1d16": (dict(model="Sequential(Conv1d(8,32,5,padding=2), SiLU(), "
                            "Conv1d(32,32,5,padding=2), SiLU(), AdaptiveAvgPool1d(1), Flatten(), "
                            "Linear(32,4))",
                      input_shape="8,8,128", sets=16), 0.6),
}


def td_run(tdvmap, *flags):
    out = subprocess.run([tdvmap, "bench", "--json", *flags], env=ENV, check=True,
                         capture_output=True, text=True).stdout
    return {r["name"]: r for r in json.loads(out)}


def torch_run(anchor, threads="1"):
    out = subprocess.run(["/usr/bin/python3", anchor, threads], env=ENV, check=True,
                         capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) < 2 or "=" not in parts[1]:
            continue
        rows[parts[0]] = {k: float(v) for k, v in (p.split("=", 1) for p in parts[1:])
                          if k.endswith("_us")}
    return rows


def torch_side(a):
    """Runs in a child process (its own thread pools): the workload in PyTorch, one line out."""
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    import torch
    from torch import nn
    from functorch import vmap, combine_state_for_ensemble
    torch.set_num_threads(1)
    for sets in a.sets_list or [a.sets]:
        r = torch_measure(a, sets, torch, nn, vmap, combine_state_for_ensemble)
        r["torch"] = torch.__version__
        print(json.dumps(r), flush=True)


def torch_measure(a, sets, torch, nn, vmap, combine_state_for_ensemble):
    """PyTorch's functorch vmap and loop over `sets` copies of a.model: medians in us."""
    import time
    torch.manual_seed(0)
    names = {k: getattr(nn, k) for k in dir(nn) if not k.startswith("_")}
    names.update(nn=nn, torch=torch)
    spec = a.model.replace("torch.nn.", "nn.")
    nets = [eval(spec, {"__builtins__": {}}, names) for _ in range(sets)]
    for n in nets:
        n.train(a.train)
    shape = [int(d) for d in a.input_shape.split(",")]
    if a.per_set:
        shape = [sets] + shape
    x = torch.randint(0, a.index_range, shape) if a.index_range else torch.randn(shape)
    fmodel, params, buffers = combine_state_for_ensemble(nets)

    def first(out):  # MultiheadAttention, LSTM, ... return tuples
        return out[0] if isinstance(out, tuple) else out

    dims = (0, 0) + (0 if a.per_set else None,) * a.inputs
    score = lambda y: y  # noqa: E731
    if a.loss:  # a shared target of the shape one set's output asks for
        with torch.no_grad():
            out = first(nets[0](*([x[0] if a.per_set else x] * a.inputs)))
        loss = getattr(torch.nn.functional, a.loss)
        if a.loss in ("cross_entropy", "nll_loss"):
            c = 1 if out.dim() > 1 else 0
            ts = list(out.shape[:c]) + list(out.shape[c + 1:])
            target = torch.randint(0, out.shape[c], ts)
        else:
            target = torch.rand(out.shape)
        score = lambda y: loss(y, target)  # noqa: E731
    f = vmap(lambda p, b, *xs: score(first(fmodel(p, b, *xs))), in_dims=dims,
             randomness=a.randomness)

    def loop():
        return torch.stack([score(first(n(*([x[i] if a.per_set else x] * a.inputs))))
                            for i, n in enumerate(nets)])

    def timeit(fn):
        for _ in range(a.warmup):
            fn()
        ts, end = [], time.perf_counter() + a.min_time
        while time.perf_counter() < end or len(ts) < a.repeat:
            t0 = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t0)
        return statistics.median(ts) * 1e6

    with torch.no_grad():
        try:
            tv = timeit(lambda: f(params, buffers, *([x] * a.inputs)))
        except Exception as e:  # functorch cannot vmap every module (e.g. the fused RNN ops)
            print(f"PyTorch vmap failed: {e}", file=sys.stderr)
            tv = float("inf")
        tl = timeit(loop)
    return {"sets": sets, "vmap_us": tv, "loop_us": tl, "best_us": min(tv, tl)}


def custom(a):
    flags = ["--model", a.model, "--input-shape", a.input_shape, "--sets", str(a.sets),
             "--inputs", str(a.inputs), "--name", a.name, "--randomness", a.randomness]
    flags += ["--per-set"] * a.per_set + ["--train"] * a.train
    if a.index_range:
        flags += ["--index-range", str(a.index_range)]
    if a.loss:
        flags += ["--loss", a.loss]
    child = ["/usr/bin/python3", os.path.abspath(__file__), "--torch-side", *flags]
    td, torch = [], []
    for i in range(a.rounds):
        print(f"round {i + 1}/{a.rounds}", file=sys.stderr)
        td.append(td_run(a.tdvmap, "--peak", *flags))
        out = subprocess.run(child, env=ENV, check=True, capture_output=True, text=True).stdout
        torch.append(json.loads(out.splitlines()[-1]))
    v, l = (statistics.median(r[a.name][k] for r in td) for k in ("vmap_us", "loop_us"))
    tv, tl = (statistics.median(r[k] for r in torch) for k in ("vmap_us", "loop_us"))
    best = min(tv, tl)
    # GFLOP/s: the multiply-adds td counted in its GEMMs and convolutions (2 flops each), against
    # td's 1024x1024 sgemm measured in the same runs
    flops = statistics.median(r[a.name]["gflops"] * r[a.name]["vmap_us"] * 1e3 for r in td)
    sgemm = median(td, "sgemm_1024", "gflops")
    print("| workload | td vmap us | td loop us | PyTorch vmap us | PyTorch loop us | "
          "td / best PyTorch | td vmap / own loop | td GFLOP/s (of sgemm) |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {a.name} | {v:.1f} | {l:.1f} | {tv:.1f} | {tl:.1f} | {v / best:.2f} | "
          f"{v / l:.2f} | {flops / (v * 1e3):.1f} ({flops / (v * 1e3) / sgemm:.2f}) |")
    print(f"sgemm 1024x1024, 1 thread: {sgemm:.1f} GFLOP/s (median of {a.rounds} rounds); "
          f"PyTorch at td's count of flops: {flops / (best * 1e3):.1f} GFLOP/s")
    if a.custom:
        target = CUSTOM[a.custom][1]
        print(f"{a.name}: td / best PyTorch {v / best:.2f} (target {target}: "
              f"{mark(v / best <= target)})")


# --plot's workloads: every set runs the same shared input (in_dims None), eval mode
PLOT_WORKLOADS = {
    # many small MLPs
    "mlp": ("Sequential(Linear(32,64), ReLU(), Linear(64,10))", "64,32",
            "(a) MLP: Linear(32,64) ReLU Linear(64,10)\non a shared input [64, 32]"),
    # a small CNN: 1024 sets take about 0.25 s a call in PyTorch's loop, 2.4 s in its vmap
    "cnn": ("Sequential(Conv2d(3,8,3,padding=1), ReLU(), MaxPool2d(2), Flatten(), "
            "Linear(512,10))", "8,3,16,16",
            "(b) CNN: Conv2d(3,8,3,padding=1) ReLU MaxPool2d(2) Flatten Linear(512,10)\n"
            "on a shared input [8, 3, 16, 16]"),
}
PLOT_SETS = [2 ** i for i in range(11)]  # 1, 2, 4, ..., 1024
PLOT_LINES = [("td_vmap", "td vmap", "C0", "-", "o"), ("td_loop", "td loop", "C0", "--", "s"),
              ("torch_vmap", "PyTorch vmap (functorch)", "C3", "-", "o"),
              ("torch_loop", "PyTorch loop", "C3", "--", "s")]
CSV_COLUMNS = ["workload", "sets", "td_vmap_us", "td_loop_us", "torch_vmap_us", "torch_loop_us"]


def pyplot():
    try:
        import matplotlib
    except ImportError:
        sys.exit("bench_vs_torch: --plot needs matplotlib for /usr/bin/python3 "
                 "(apt-get install python3-matplotlib)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def machine():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    info = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    info = {k.strip(): v.strip() for k, v in info.items()}
    name = info.get("Model name", "unknown CPU")
    if info.get("Vendor ID") == "AuthenticAMD" and "CPU family" in info:
        name += f" (CPU family {info['CPU family']})"
    avx512 = "avx512f" in info.get("Flags", "").split()
    return f"{name}, {info.get('CPU(s)', '?')} CPUs, {'AVX-512' if avx512 else 'no AVX-512'}"


def revision():
    git = ["git", "-C", ROOT]
    rev = subprocess.run(git + ["rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip() or "unknown"
    # the figures themselves do not count as a change to what was measured
    dirty = subprocess.run(git + ["diff", "--quiet", "HEAD", "--", ".", ":!tools/figures"],
                           capture_output=True).returncode
    return rev + ("-dirty" if dirty else "")


def scaling(a):
    """Time per set against the number of sets: td's and PyTorch's vmap and loop, interleaved
    by workload and round, medians over --rounds; small set counts are measured for longer."""
    import datetime
    meta = {"machine": machine(), "date": datetime.date.today().isoformat(),
            "td": revision(), "torch": "?", "rounds": str(a.rounds)}
    runs = {(w, n): {k: [] for k, *_ in PLOT_LINES} for w in PLOT_WORKLOADS for n in PLOT_SETS}
    for i in range(a.rounds):
        for w, (model, shape, _) in PLOT_WORKLOADS.items():
            print(f"round {i + 1}/{a.rounds}: {w}", file=sys.stderr)
            for n in PLOT_SETS:
                r = td_run(a.tdvmap, "--model", model, "--input-shape", shape, "--sets", str(n),
                           "--threads", "1", "--min-time", "0.3" if n <= 64 else "0.15",
                           "--repeat", "3")["custom"]
                runs[w, n]["td_vmap"].append(r["vmap_us"])
                runs[w, n]["td_loop"].append(r["loop_us"])
            child = ["/usr/bin/python3", os.path.abspath(__file__), "--torch-side", "--model",
                     model, "--input-shape", shape, "--min-time", "0.3", "--repeat", "3",
                     "--warmup", "1", "--sets-list", ",".join(map(str, PLOT_SETS))]
            out = subprocess.run(child, env=ENV, check=True, capture_output=True, text=True)
            for line in out.stdout.splitlines():
                if line.startswith("{"):
                    r = json.loads(line)
                    meta["torch"] = r["torch"]
                    runs[w, r["sets"]]["torch_vmap"].append(r["vmap_us"])
                    runs[w, r["sets"]]["torch_loop"].append(r["loop_us"])
    rows = [[w, n] + [statistics.median(runs[w, n][k]) for k, *_ in PLOT_LINES]
            for w in PLOT_WORKLOADS for n in PLOT_SETS]
    base = os.path.splitext(a.plot)[0]
    write_csv(base + ".csv", meta, rows)
    print(f"{meta['machine']}, {meta['date']}, td {meta['td']}, PyTorch {meta['torch']}, "
          f"one thread, median of {a.rounds} round(s); microseconds per set (per call / sets)\n")
    print("| workload | sets | td vmap | td loop | PyTorch vmap | PyTorch loop | "
          "td vmap / best PyTorch |")
    print("|---|---|---|---|---|---|---|")
    for w, n, v, l, tv, tl in rows:
        print(f"| {w} | {n} | {v / n:.2f} | {l / n:.2f} | {tv / n:.2f} | {tl / n:.2f} | "
              f"{v / min(tv, tl):.2f} |")
    draw(a.plot, meta, rows)
    print(f"\nwrote {a.plot} and {base}.csv")


def write_csv(path, meta, rows):
    """Per-call medians in microseconds, the run's facts in leading '# key: value' lines."""
    import csv
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w", newline="") as f:
        for k, v in meta.items():
            f.write(f"# {k}: {v}\n")
        out = csv.writer(f)
        out.writerow(CSV_COLUMNS)
        for w, n, *us in rows:
            out.writerow([w, n] + [f"{t:.3f}" for t in us])


def read_csv(path):
    import csv
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    meta = dict(line[2:].split(": ", 1) for line in lines if line.startswith("# "))
    body = list(csv.reader(line for line in lines if not line.startswith("#")))
    if body[0] != CSV_COLUMNS:
        sys.exit(f"bench_vs_torch: {path} does not start with {','.join(CSV_COLUMNS)}")
    return meta, [[w, int(n)] + [float(t) for t in us] for w, n, *us in body[1:]]


def draw(path, meta, rows):
    plt = pyplot()
    fig, axes = plt.subplots(1, len(PLOT_WORKLOADS), figsize=(13, 5.4))
    for ax, (w, (_, _, label)) in zip(axes, PLOT_WORKLOADS.items()):
        mine = [r for r in rows if r[0] == w]
        sets = [r[1] for r in mine]
        for j, (_, name, color, style, marker) in enumerate(PLOT_LINES):
            ax.plot(sets, [r[2 + j] / r[1] for r in mine], color=color, linestyle=style,
                    marker=marker, markersize=4, label=name)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xticks(sets)
        ax.set_xticklabels([str(n) for n in sets])
        ax.set_xlabel("number of parameter sets (one batched call)")
        ax.set_ylabel("time per set, microseconds (lower is better)")
        ax.set_title(label, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=9)
    rounds = "one round" if meta["rounds"] == "1" else f"medians of {meta['rounds']} rounds"
    fig.suptitle(f"td vs PyTorch {meta['torch']}: time per set, one thread, {rounds}\n{meta['machine']}, {meta['date']}, "
                 f"td {meta['td']}", fontsize=11)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def median(runs, name, key):
    return statistics.median(r[name][key] for r in runs)


def mark(ok):
    return "yes" if ok else "NO"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tdvmap", default=os.path.join(ROOT, "build", "tools", "tdvmap", "tdvmap"))
    ap.add_argument("--anchor",
                    default=os.path.join(ROOT, "..", "shared", "bench", "anchor_torch.py"))
    ap.add_argument("--model", help="a custom workload's module spec (tdvmap bench --model)")
    ap.add_argument("--input-shape", help="a set's input shape, e.g. 8,3,32,32")
    ap.add_argument("--sets", type=int, default=32)
    ap.add_argument("--per-set", action="store_true")
    ap.add_argument("--inputs", type=int, default=1)
    ap.add_argument("--index-range", type=int, default=0)
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--randomness", default="error", choices=("error", "different", "same"))
    ap.add_argument("--name", default="custom")
    ap.add_argument("--loss", help="score each set's output with this torch.nn.functional loss")
    ap.add_argument("--custom", choices=sorted(CUSTOM), help="a named custom workload")
    ap.add_argument("--plot", metavar="FILE.png",
                    help="the scaling picture: time per set against 1-1024 sets, an MLP and a small CNN "
                         "(also FILE.csv and a table on stdout)")
    ap.add_argument("--from-csv", metavar="FILE.csv",
                    help="with --plot: redraw the picture from a CSV that --plot wrote, no runs")
    ap.add_argument("--level", choices=sorted(LEVEL_ENV),
                    help="hold td, OpenBLAS and PyTorch to this instruction-set level")
    ap.add_argument("--torch-side", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--sets-list", type=lambda v: [int(n) for n in v.split(",")],
                    help=argparse.SUPPRESS)
    ap.add_argument("--min-time", type=float, default=0.5, help=argparse.SUPPRESS)
    ap.add_argument("--repeat", type=int, default=5, help=argparse.SUPPRESS)
    ap.add_argument("--warmup", type=int, default=2, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.level and not a.torch_side:
        ENV.update(LEVEL_ENV[a.level])
        print("held to " + a.level + ": " + " ".join(f"{k}={v}" for k, v in LEVEL_ENV[a.level].items()))
    if a.torch_side:
        return torch_side(a)
    if a.from_csv:
        if not a.plot:
            sys.exit("bench_vs_torch: --from-csv needs --plot FILE.png")
        return draw(a.plot, *read_csv(a.from_csv))
    if a.plot:
        pyplot()  # fail before measuring, not after
    if a.custom:
        flags, target = CUSTOM[a.custom]
        for k, v in flags.items():
            setattr(a, k, v)
        a.name = a.custom
    if a.model and not a.input_shape:
        sys.exit("bench_vs_torch: --model needs --input-shape")
    if not os.access(a.tdvmap, os.X_OK):
        sys.exit(f"bench_vs_torch: no tdvmap at {a.tdvmap} (build it: ./tools/demo.sh, or pass "
                 "--tdvmap)")
    if subprocess.run(["/usr/bin/python3", "-c", "import torch, functorch"],
                      capture_output=True).returncode != 0:
        sys.exit("bench_vs_torch: /usr/bin/python3 cannot import torch and functorch "
                 "(apt-get install python3-torch)")
    if a.plot:
        return scaling(a)
    if a.model:
        return custom(a)
    if not os.path.isfile(a.anchor):
        sys.exit(f"bench_vs_torch: no anchor script at {a.anchor} (pass --anchor)")
    td, torch, td2 = [], [], []
    for i in range(a.rounds):
        print(f"round {i + 1}/{a.rounds}", file=sys.stderr)
        td.append(td_run(a.tdvmap, "--peak", "--threads", "1"))
        torch.append(torch_run(a.anchor))
        td2.append(td_run(a.tdvmap, "--peak", "--threads", "2", "--workload",
                          "mlp32_perset,mlp8_large"))
    mem = {c: td_run(a.tdvmap, "--workload", "mlp32_perset", "--chunk-size", str(c),
                     "--min-time", "0.1")["mlp32_perset"] for c in (4, 32)}

    sgemm = median(td, "sgemm_1024", "gflops")
    print(f"sgemm 1024x1024, 1 thread: {sgemm:.1f} GFLOP/s (median of {a.rounds} rounds)\n")
    print("| workload | td vmap us | td loop us | chunk8 us | best PyTorch us | vs PyTorch "
          "(target) | vs own loop (target) | chunk8 / vmap (<= 1.3) |")
    print("|---|---|---|---|---|---|---|---|")
    for name, (t_torch, t_loop) in TARGETS.items():
        v, l, c = (median(td, name, k) for k in ("vmap_us", "loop_us", "chunk8_us"))
        best = median(torch, name, "best_us")
        print(f"| {name} | {v:.1f} | {l:.1f} | {c:.1f} | {best:.1f} | {v / best:.2f} "
              f"({t_torch}, {mark(v / best <= t_torch)}) | {v / l:.2f} ({t_loop}, "
              f"{mark(v / l <= t_loop)}) | {c / v:.2f} ({mark(c / v <= 1.3)}) |")
    large = median(td, "mlp8_large", "gflops")
    print(f"\nmlp8_large: {large:.1f} GFLOP/s = {large / sgemm:.2f} of sgemm "
          f"(target 0.85: {mark(large / sgemm >= 0.85)})")
    for name in ("mlp32_perset", "mlp8_large"):
        s = median(td, name, "vmap_us") / median(td2, name, "vmap_us")
        print(f"{name}: --threads 2 is {s:.2f}x faster than 1 thread (target 1.7: "
              f"{mark(s >= 1.7)})")
    whole, four = mem[32]["chunk_peak_mb"], mem[4]["chunk_peak_mb"]
    print(f"mlp32_perset peak MiB: all 32 sets at once {whole:.2f}, chunk_size 4 {four:.2f} "
          f"(target <= a quarter: {mark(four <= whole / 4)}), no chunk_size "
          f"{mem[4]['peak_mb']:.2f}")


if __name__ == "__main__":
    main()
