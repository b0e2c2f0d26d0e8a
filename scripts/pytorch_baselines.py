#!/usr/bin/env python3
"""PyTorch baselines for KernelBlaster tasks, measured with the harness's protocol.

For each task (from `kblaster tasks list --json`) and method:
  eager         the task's expression as a plain Python function
  compile       torch.compile(fn) (default mode)
  max-autotune  torch.compile(fn, mode="max-autotune-no-cudagraphs"): autotuned kernels without
                CUDA graphs, so the figure is kernels only, as for a candidate
  max-autotune-cudagraphs  (opt-in) mode="max-autotune", CUDA graphs included
  rms_norm      F.rms_norm, where the task is an RMSNorm
The expression is compiled once into a real function (a generated module file, see
pytorch_codegen.py), so TorchDynamo traces tensor code. For each compiled method the number of
graphs and graph breaks comes from torch._dynamo's counters; a method with no graph or a graph
break ran (partly) eagerly and is marked `not_compiled`, which `kblaster bench` excludes from
"fastest".

Check: the output against a float64 evaluation of the expression with the task's tolerance
(|y - ref| <= atol * RMS(ref) + rtol * |ref| elementwise, and relative L2). fp32 matmul stays
exact: TF32 off and float32 matmul precision "highest".

Timing, as the harness times a candidate: warm-up; before every sample an L2 flush of 2x the L2
size; then a blocking kernel (torch.cuda._sleep, long enough to cover the host's enqueue time of
the method, measured in the warm-up) so that the method's launches are queued behind it and host
launch overhead is outside the window; CUDA events around the call. At least 10 samples and until
the relative stdev is under 0.5% after 0.5 s of measured time, or 5 s of wall time; median with a
distribution-free 95% interval. The same method is also timed unqueued (flush, synchronize,
events around the call from Python; a shorter series, at most 1 s or 500 samples): `unqueued_median_s` is what one call costs on an idle GPU,
host launch overhead included. A method that fails the check is marked incorrect (and is no
reference); one whose samples scatter (relative stdev above 5%) unstable, a note only: its median
still counts. Writes JSON that `kblaster bench --pytorch
FILE` imports.

    kblaster tasks list --json > tasks.json
    python3 scripts/pytorch_baselines.py --tasks tasks.json --out pytorch.json [--methods eager,compile]

--compile-only compiles and checks each method without timing it, to fill TorchInductor's caches
(with TORCHINDUCTOR_CACHE_DIR set, a later run compiles from them in seconds); its JSON holds no
timings and `kblaster bench` cannot use it.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pytorch_codegen as cg  # noqa: E402

import torch  # noqa: E402
import torch._dynamo  # noqa: E402,F401 (counters and reset)
import torch.nn.functional as F  # noqa: E402

METHODS = ("eager", "compile", "max-autotune", "max-autotune-cudagraphs", "rms_norm")
COMPILE_MODES = {"compile": None, "max-autotune": "max-autotune-no-cudagraphs",
                 "max-autotune-cudagraphs": "max-autotune"}


def torch_dtype(name):
    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
            "float64": torch.float64, "int64": torch.int64, "int32": torch.int32}[name]


def eval_dim(expr, dims):
    return int(eval(expr, {"__builtins__": {}}, dict(dims)))  # noqa: S307 (shape arithmetic from the contract)


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


def module_task(task, dims, seed=20251130):
    """An imported task (kind = "pytorch"): its module built as the reference process builds it
    (scripts/pytorch_oracle.py: the problem file executed, the init args at these dims, seeded),
    in float32 (the methods) and float64 (the reference), and the forward's arguments drawn with
    the harness's generator from the official distribution."""
    import pytorch_oracle as po
    t = po.Task(os.path.dirname(task["file"]))
    model = t.build(torch, dims, 0, torch.float32, "cuda")
    ref_model = t.build(torch, dims, 0, torch.float64, "cuda")
    gen = po.Generator()
    xs = []
    for k, spec in enumerate(t.inputs):
        shape = [eval_dim(e, dims) for e in spec["shape"]]
        x = torch.empty(shape, dtype=torch_dtype(spec["dtype"]), device="cuda")
        gen.fill(x, spec["dtype"], spec["distributions"][0], dims, seed, k)
        xs.append(x)
    args = t.call_args(xs)
    ref_args = tuple(a.double() if torch.is_tensor(a) and a.is_floating_point() else a for a in args)
    return model, ref_model, args, ref_args


def rms_norm_method(task):
    eps = {p["name"]: p["value"] for p in task.get("params", [])}.get("eps", 1e-6)

    def rms_norm(x, weight):
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    return rms_norm


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


def dynamo_counters():
    from torch._dynamo.utils import counters
    return {"stats": dict(counters["stats"]), "graph_break": dict(counters["graph_break"])}


class Sleeper:
    """torch.cuda._sleep calibrated in seconds: the blocking kernel that queues a sample."""

    def __init__(self):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cycles = 2_000_000
        torch.cuda._sleep(cycles)
        rates = []
        for _ in range(5):
            a.record()
            torch.cuda._sleep(cycles)
            b.record()
            b.synchronize()
            rates.append(cycles / (a.elapsed_time(b) * 1e-3))
        self.cycles_per_s = statistics.median(rates)

    def sleep(self, seconds):
        torch.cuda._sleep(max(1000, int(seconds * self.cycles_per_s)))


def time_method(fn, args, flush, sleeper, max_wall=5.0):
    """Samples queued behind a blocking kernel, then unqueued samples; returns both and the host
    enqueue time of one call [s]."""
    enqueue = []
    for _ in range(5):
        torch.cuda.synchronize()
        h0 = time.perf_counter()
        fn(*args)
        enqueue.append(time.perf_counter() - h0)
    torch.cuda.synchronize()
    host_s = statistics.median(enqueue)
    # The blocking kernel covers the enqueue of the events and the call with a wide margin.
    block_s = min(0.05, max(200e-6, 4 * host_s, 1.5 * max(enqueue)))
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)

    def run(queued, wall, most):
        samples, late = [], 0
        # The stop rule's mean and variance, kept as running sums (Welford): statistics.stdev is
        # exact rational arithmetic, and recomputing it over the whole series after every sample
        # cost milliseconds per sample by the thousandth.
        count, mean, m2 = 0, 0.0, 0.0
        t0 = time.time()
        while True:
            flush.zero_()
            if queued:
                sleeper.sleep(block_s)
                h0 = time.perf_counter()
            else:
                torch.cuda.synchronize()
            start.record()
            fn(*args)
            stop.record()
            if queued and time.perf_counter() - h0 > 0.8 * block_s:
                late += 1  # the host was still enqueueing when the blocking kernel ended
            stop.synchronize()
            x = start.elapsed_time(stop) * 1e-3
            samples.append(x)
            count += 1
            delta = x - mean
            mean += delta / count
            m2 += delta * (x - mean)
            if count >= 10:
                rsd = math.sqrt(m2 / (count - 1)) / mean
                if (mean * count >= 0.5 and rsd < 0.005) or time.time() - t0 > wall or count >= most:
                    return samples, late

    queued, late = run(True, max_wall, 2000)
    # The unqueued figure only states the launch overhead a caller pays: a shorter series.
    unqueued, _ = run(False, min(max_wall, 1.0), 500)
    return queued, unqueued, host_s, block_s, late


def device_info():
    props = torch.cuda.get_device_properties(0)

    def smi(field):
        r = subprocess.run(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"],
                           capture_output=True, text=True)
        return r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else ""

    nvcc = subprocess.run(["sh", "-c", "nvcc --version 2>/dev/null | tail -n 2 | head -n 1"],
                          capture_output=True, text=True).stdout.strip()
    return {"name": torch.cuda.get_device_name(0), "sm": f"{props.major}{props.minor}",
            "sms": props.multi_processor_count, "l2_bytes": props.L2_cache_size,
            "memory_bytes": props.total_memory, "driver": smi("driver_version"),
            "sm_clock_max_mhz": smi("clocks.max.sm"), "torch_cuda": torch.version.cuda,
            "toolkit_nvcc": nvcc}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--methods", default="eager,compile,max-autotune,rms_norm")
    ap.add_argument("--only", default="")
    ap.add_argument("--all-shapes", action="store_true")
    ap.add_argument("--module-dir", default="", help="folder for the generated task modules")
    ap.add_argument("--compile-only", action="store_true",
                    help="compile and check every method, time nothing: fills TorchInductor's caches "
                         "(TORCHINDUCTOR_CACHE_DIR) so that a later run compiles from them")
    args = ap.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    for m in methods:
        if m not in METHODS:
            sys.exit(f"unknown method {m}; known: {', '.join(METHODS)}")
    tasks = json.load(open(args.tasks))
    only = set(filter(None, args.only.split(",")))
    module_dir = args.module_dir or tempfile.mkdtemp(prefix="kb-pytorch-")
    props = torch.cuda.get_device_properties(0)
    flush = torch.empty(max(2 * props.L2_cache_size, 128 << 20), dtype=torch.uint8, device="cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    sleeper = Sleeper()
    dev = device_info()
    out = {"device": dev["name"], "device_info": dev, "torch": torch.__version__, "cuda": torch.version.cuda,
           "driver": dev["driver"], "toolkit": dev["toolkit_nvcc"],
           "settings": {"allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                        "float32_matmul_precision": torch.get_float32_matmul_precision(),
                        "max_autotune_mode": COMPILE_MODES["max-autotune"]},
           "protocol": {"l2_flush_bytes": flush.numel(), "events": "CUDA events around one call",
                        "queued": "launches queued behind torch.cuda._sleep covering >= 4x the host enqueue time",
                        "unqueued": "synchronize after the flush, events around the call from Python; "
                                    ">=10 samples, rsd < 0.5% after 0.5 s measured, or 1 s wall, or 500 samples",
                        "stop": ">=10 samples, rsd < 0.5% after 0.5 s measured, or 5 s wall, or 2000 samples",
                        "statistic": "median, 95% interval from order statistics n/2 -+ 0.98 sqrt(n)",
                        "sleep_cycles_per_s": sleeper.cycles_per_s},
           "tasks": {}}
    for task in tasks:
        if only and task["id"] not in only:
            continue
        imported = task.get("kind") == "pytorch"
        try:
            base = None if imported else cg.load_module(task, module_dir)
        except cg.ExpressionError as e:
            print(f"{task['id']}: {e}", file=sys.stderr)
            out["tasks"][task["id"]] = {"error": str(e)}
            continue
        shapes = [s for s in task["shapes"] if s["role"] == "official" or (args.all_shapes and s["role"] == "bench")]
        for shape in shapes:
            dims = shape["dims"]
            if imported:
                # An imported task: its module (eager, compiled) on the forward's arguments.
                try:
                    base, ref_model, inputs, ref_args = module_task(task, dims)
                    with torch.no_grad():
                        ref = ref_model(*ref_args)
                    del ref_model, ref_args
                except Exception as e:  # noqa: BLE001 (a module that cannot be built is recorded)
                    print(f"{task['id']}: {e}", file=sys.stderr)
                    out["tasks"][task["id"]] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
                    break
            else:
                gen = torch.Generator(device="cuda").manual_seed(20251130)
                inputs = [make_input(i, dims, gen) for i in task["inputs"]]
                with torch.no_grad():
                    ref = base(*[t.double() if t.is_floating_point() else t for t in inputs])
            results = {}
            for method in methods:
                if method == "rms_norm" and "rms_norm" not in task.get("pytorch", ""):
                    continue
                fn = rms_norm_method(task) if method == "rms_norm" else base
                entry = {}
                t_start = time.time()
                try:
                    if method in COMPILE_MODES:
                        torch._dynamo.reset()
                        before = dynamo_counters()
                        fn = torch.compile(fn, mode=COMPILE_MODES[method])
                    with torch.no_grad():
                        y = fn(*inputs)
                        torch.cuda.synchronize()
                        entry["first_call_s"] = time.time() - t_start
                        if method in COMPILE_MODES:
                            compiled = cg.classify_compile(*cg.counters_delta(before, dynamo_counters()))
                            compiled["mode"] = COMPILE_MODES[method] or "default"
                            entry["compile"] = compiled
                        ok, reason, metrics = check(y, ref, task["tolerance"])
                        del y
                        if args.compile_only:
                            entry.update(correct=ok, reason=reason, metrics=metrics)
                            results[method] = entry
                            print(f"{task['id']} {shape['name']:<14} {method:<24} first call "
                                  f"{entry['first_call_s']:.1f} s  {'ok' if ok else 'INCORRECT ' + reason}",
                                  flush=True)
                            continue
                        samples, unqueued, host_s, block_s, late = time_method(fn, inputs, flush, sleeper)
                        if method in COMPILE_MODES:
                            graphs_after, _, _ = cg.counters_delta(before, dynamo_counters())
                            entry["compile"]["recompiles"] = graphs_after - entry["compile"]["graphs"]
                except Exception as e:  # noqa: BLE001 (a method that fails is recorded, not fatal)
                    entry.update(correct=False, reason=f"error: {type(e).__name__}: {str(e)[:300]}")
                    results[method] = entry
                    print(f"{task['id']} {shape['name']} {method}: error {e}", file=sys.stderr)
                    continue
                med = cg.median(samples)
                rsd = statistics.stdev(samples) / statistics.mean(samples)
                entry.update({"correct": ok, "reason": reason, "metrics": metrics, "median_s": med,
                              "ci_s": cg.median_ci(samples), "rsd": rsd, "stable": rsd < 0.05,
                              "samples": samples, "queued": {"block_s": block_s, "late_samples": late},
                              "host_enqueue_s": host_s, "unqueued_median_s": cg.median(unqueued),
                              "unqueued_ci_s": cg.median_ci(unqueued),
                              "launch_overhead_s": cg.median(unqueued) - med})
                results[method] = entry
                comp = entry.get("compile")
                status = f"{comp['status']} graphs={comp['graphs']} breaks={comp['graph_breaks']}" if comp else "eager"
                print(f"{task['id']} {shape['name']:<14} {method:<24} {med * 1e3:9.4f} ms "
                      f"(unqueued {entry['unqueued_median_s'] * 1e3:9.4f})  "
                      f"{'ok' if ok else 'INCORRECT ' + reason}  {status}  n={len(samples)}", flush=True)
            out["tasks"].setdefault(task["id"], {})[shape["name"]] = results
            del inputs, ref
            torch.cuda.empty_cache()
            # Written after every shape: an interrupted run keeps what it measured.
            json.dump(out, open(args.out, "w"), indent=1)
    json.dump(out, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
