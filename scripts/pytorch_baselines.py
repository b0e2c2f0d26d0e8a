#!/usr/bin/env python3
"""PyTorch baselines for KernelBlaster tasks, measured with the harness's protocol.

For each task (from `kblaster tasks list --json`) and method (eager, torch.compile default,
torch.compile(mode="max-autotune-no-cudagraphs"), and F.rms_norm where the task is an RMSNorm):
draws inputs from the task's official distribution, runs the task's PyTorch expression, checks
the output against a float64 evaluation of the same expression with the task's tolerance
(|y - ref| <= atol * RMS(ref) + rtol * |ref| elementwise, and relative L2), then times it: warm-up,
an L2 flush of 2x the L2 size before every sample, CUDA events around the call, the SM clock
after each sample, at least 10 samples and until the relative stdev is under 0.5% after 0.5 s of
measured time, or 5 s of wall time. A method that fails the check is marked incorrect; one whose
samples scatter (relative stdev above 5%) is marked unstable; `kblaster bench` excludes both
from "fastest". Writes JSON that `kblaster bench --pytorch FILE` imports.

    kblaster tasks list --json > tasks.json
    python3 scripts/pytorch_baselines.py --tasks tasks.json --out pytorch.json [--methods eager,compile]
"""
import argparse
import json
import math
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F  # noqa: F401 (used by task expressions)

METHODS = ("eager", "compile", "max-autotune", "rms_norm")


def torch_dtype(name):
    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
            "float64": torch.float64, "int64": torch.int64, "int32": torch.int32}[name]


def eval_dim(expr, dims):
    return int(eval(expr, {"__builtins__": {}}, dict(dims)))


def make_input(spec, dims, gen):
    shape = [eval_dim(e, dims) for e in spec["shape"]]
    dtype = torch_dtype(spec["dtype"])
    label = spec["distributions"][0]
    if label == "uniform01":
        t = torch.rand(shape, generator=gen, device="cuda", dtype=torch.float32)
    elif label == "normal":
        t = torch.randn(shape, generator=gen, device="cuda", dtype=torch.float32)
    elif label == "ones":
        t = torch.ones(shape, device="cuda")
    elif label == "zeros":
        t = torch.zeros(shape, device="cuda")
    elif label.startswith("normal("):
        mean, std = (float(v) for v in label[7:-1].split(","))
        t = mean + std * torch.randn(shape, generator=gen, device="cuda")
    elif label.startswith("randint("):
        low, high = label[8:-1].split(",")
        t = torch.randint(int(float(low)), eval_dim(high, dims), shape, generator=gen, device="cuda", dtype=torch.int64)
        return t
    else:
        raise ValueError(f"distribution {label} not supported here")
    return t.to(dtype)


def expression(task):
    names = [i["name"] for i in task["inputs"]]
    params = {p["name"]: p["value"] for p in task.get("params", [])}
    body = task["pytorch"]

    def fn(*args):
        scope = dict(zip(names, args))
        scope.update(params)
        scope.update({"torch": torch, "F": F, "math": math})
        return eval(body, {"__builtins__": {}}, scope)
    return fn


def rms_norm_method(task):
    params = {p["name"]: p["value"] for p in task.get("params", [])}

    def fn(x, weight):
        return torch.nn.functional.rms_norm(x, (x.shape[-1],), weight, params.get("eps", 1e-6))
    return fn


def check(y, ref, tol):
    y = y.double()
    ref = ref.double()
    if y.shape != ref.shape:
        y = y.reshape(ref.shape)
    if not torch.isfinite(y).all():
        return False, "nonfinite", {}
    scale = ref.pow(2).mean().sqrt().item()
    err = (y - ref).abs()
    bound = tol["atol"] * scale + tol["rtol"] * ref.abs()
    excess = (err / bound.clamp_min(1e-300)).max().item()
    rel_l2 = ((y - ref).pow(2).sum() / ref.pow(2).sum().clamp_min(1e-300)).sqrt().item()
    metrics = {"max_abs_err": err.max().item(), "max_excess": excess, "rel_l2": rel_l2}
    if excess > 1:
        return False, "mismatch", metrics
    if rel_l2 > tol["rel_l2"]:
        return False, "rel_l2", metrics
    return True, "", metrics


def sm_clock():
    try:
        return torch.cuda.clock_rate()
    except Exception:  # noqa: BLE001 (nvml missing)
        return None


def time_method(fn, args, flush, max_wall=5.0):
    for _ in range(3):
        fn(*args)
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples, clocks = [], []
    t0 = time.time()
    while True:
        flush.zero_()
        start.record()
        fn(*args)
        stop.record()
        stop.synchronize()
        samples.append(start.elapsed_time(stop) * 1e-3)
        clocks.append(sm_clock())
        n = len(samples)
        if n >= 10:
            rsd = statistics.stdev(samples) / statistics.mean(samples)
            if (sum(samples) >= 0.5 and rsd < 0.005) or time.time() - t0 > max_wall or n >= 2000:
                break
    return samples, clocks


def median_ci(samples):
    x = sorted(samples)
    n = len(x)
    lo = max(0, int(math.floor(n / 2 - 0.98 * math.sqrt(n))))
    hi = min(n - 1, int(math.ceil(n / 2 + 0.98 * math.sqrt(n))))
    return [x[lo], x[hi]]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--methods", default="eager,compile,max-autotune,rms_norm")
    ap.add_argument("--only", default="")
    ap.add_argument("--all-shapes", action="store_true")
    ap.add_argument("--compile-budget", type=float, default=120.0, help="seconds allowed for one compile")
    args = ap.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    tasks = json.load(open(args.tasks))
    only = set(filter(None, args.only.split(",")))
    props = torch.cuda.get_device_properties(0)
    flush = torch.empty(max(2 * props.L2_cache_size, 128 << 20), dtype=torch.uint8, device="cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
           "driver": subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                    capture_output=True, text=True).stdout.strip(),
           "protocol": "cold L2 (2x L2 flush per sample), CUDA events, >=10 samples, rsd<0.5% after 0.5 s or 5 s wall",
           "tasks": {}}
    for task in tasks:
        if only and task["id"] not in only:
            continue
        shapes = [s for s in task["shapes"] if s["role"] == "official" or (args.all_shapes and s["role"] == "bench")]
        for shape in shapes:
            dims = shape["dims"]
            gen = torch.Generator(device="cuda").manual_seed(20251130)
            inputs = [make_input(i, dims, gen) for i in task["inputs"]]
            base = expression(task)
            with torch.no_grad():
                ref = base(*[t.double() if t.is_floating_point() else t for t in inputs])
            results = {}
            for method in methods:
                if method == "rms_norm" and "rms_norm" not in task["pytorch"]:
                    continue
                fn = rms_norm_method(task) if method == "rms_norm" else base
                t_start = time.time()
                try:
                    if method == "compile":
                        fn = torch.compile(fn)
                    elif method == "max-autotune":
                        fn = torch.compile(fn, mode="max-autotune-no-cudagraphs")
                    with torch.no_grad():
                        y = fn(*inputs)
                        torch.cuda.synchronize()
                        compile_s = time.time() - t_start
                        ok, reason, metrics = check(y, ref, task["tolerance"])
                        samples, clocks = time_method(fn, inputs, flush)
                except Exception as e:  # noqa: BLE001 (a method that fails is recorded, not fatal)
                    results[method] = {"correct": False, "reason": f"error: {type(e).__name__}: {str(e)[:300]}"}
                    print(f"{task['id']} {shape['name']} {method}: error {e}", file=sys.stderr)
                    continue
                med = statistics.median(samples)
                rsd = statistics.stdev(samples) / statistics.mean(samples)
                results[method] = {"correct": ok, "reason": reason, "metrics": metrics, "median_s": med,
                                   "ci_s": median_ci(samples), "rsd": rsd, "stable": rsd < 0.05,
                                   "samples": samples, "sm_clock_mhz": clocks, "first_call_s": compile_s}
                print(f"{task['id']} {shape['name']:<14} {method:<13} {med * 1e3:9.4f} ms  "
                      f"{'ok' if ok else 'INCORRECT ' + reason}  n={len(samples)}", flush=True)
            out["tasks"].setdefault(task["id"], {})[shape["name"]] = results
            del inputs, ref
            torch.cuda.empty_cache()
    json.dump(out, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
