#!/usr/bin/env python3
"""The trusted PyTorch side of `pytorch` tasks (docs/task-format.md, "PyTorch-oracle tasks").

Given a task folder written by `kblaster tasks import` (task.toml with kind = "pytorch" and the
problem's model.py), this process builds the module with its init args, draws the inputs with the
HARNESS's generator (libkblaster_generator.so through ctypes, on tensors allocated here, so the
values are bit-identical to what the judge gives a candidate), evaluates the module in float64
(the reference) and in the task's dtype (eager PyTorch, the baseline), and hands the reference to
the judge.

Commands:
  probe [--json]               exit 0 and print "torch <version> cuda <device>" when PyTorch
                               imports (--json: also the shared libpython to embed and sys.path);
                               else exit 3 and print why (reason blocked.no_pytorch)
  describe --task DIR          runs the module (on the meta device where it can) and writes
                               DIR/resolved.json: per shape its outputs and its state (parameters
                               and buffers), which the contract loader adds to the task
  reference --task DIR --shape NAME --dist D --seed S (--out FILE | --ipc HANDLE:BYTES)
                               the float64 reference of input set (D, S) at shape NAME: to FILE
                               (a JSON header line, then raw little-endian float64 values of
                               each output in order), or copied into the judge's device buffer
                               given as a CUDA IPC memory handle (hex) and its size [bytes]
  selftest --task DIR [--out FILE]
                               the checker self-test on the module's references: for each check
                               shape, distribution and two seeds, do zeros, a copy of the input
                               or a constant pass the tolerance? Passing on the official
                               distribution marks it degenerate; writes DIR/selftest.json,
                               which the contract loader adds to the task's `degenerate` list
  aa --task DIR... [--out FILE | --out-dir D] [--time-limit S] [--verify-only]
                               the baseline's A/A on the GPU: eager PyTorch in the task's dtype
                               verified against the float64 reference on every check shape,
                               distribution and seed, then eager timed against itself with CUDA
                               events (alternating, L2 flushed) -> verdict same / rejected.
                               --verify-only: the verification alone (D/<folder>.verify.json,
                               taken by a later run instead of verifying again)
  resolve FILE.py... --out FILE
                               EXECUTES problem files (on the GPU machine only) and writes the
                               problem analysis kernelbench_parse.py would have written, from
                               the tensors get_inputs() returns; `kblaster tasks import
                               --analysis FILE` then writes their contracts

Parameters: the module's parameters and buffers are initialised by PyTorch's own initialisers
under torch.manual_seed(seed) (float32 on the CPU, then converted), and are handed to a candidate
as extra inputs after the forward's, in state_dict order.
"""
import argparse
import contextlib
import ctypes
import importlib.util
import json
import math
import os
import re
import statistics
import struct
import sys
import time

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

KB_DTYPES = {"float32": 0, "float16": 1, "bfloat16": 2, "float64": 3, "int64": 4, "int32": 5}
DIST_KIND = {"uniform": 0, "normal": 1, "student_t": 2, "constant": 3, "randint": 4}
NAMED = {"uniform01": ("uniform", 0.0, 1.0), "normal": ("normal", 0.0, 1.0),
         "heavy_tailed": ("student_t", 3.0, 1.0), "ones": ("constant", 1.0, 0.0),
         "zeros": ("constant", 0.0, 0.0)}


def fail(msg, code=65):
    print(f"pytorch_oracle: {msg}", file=sys.stderr)
    sys.exit(code)


# ---- the contract ------------------------------------------------------------------------------

def eval_dim(expr, dims):
    if not re.fullmatch(r"[A-Za-z0-9_+\-*/() ]+", expr):
        fail(f"dim expression {expr!r} is not the contract's grammar")
    return int(eval(expr.replace("/", "//"), {"__builtins__": {}}, dict(dims)))  # noqa: S307


class Task:
    def __init__(self, folder):
        if tomllib is None:
            fail("Python 3.11 or newer is needed (tomllib)", 70)
        self.dir = os.path.abspath(folder)
        with open(os.path.join(self.dir, "task.toml"), "rb") as f:
            self.toml = tomllib.load(f)
        if self.toml.get("kind") != "pytorch":
            fail(f"{self.dir}: not a pytorch task")
        m = self.toml["module"]
        self.source = os.path.join(self.dir, m.get("source", "model.py"))
        self.class_name = m.get("class", "Model")
        self.init_args = m.get("init_args", [])
        self.inputs = self.toml["inputs"]
        self.params = self.toml.get("params", [])
        self.forward = m.get("forward") or [i["name"] for i in self.inputs]
        self.shapes = {s.get("name", s["role"] if s["role"] == "official" else f"{s['role']}-{i}"): s
                       for i, s in enumerate(self.toml["shapes"])}
        self.tol = self.toml["tolerance"]

    def call_args(self, xs, scalars=None):
        """The forward's positional arguments: the input tensors `xs` (in the contract's order)
        and the params' numbers (`scalars` in the contract's order, else their values) where
        [module] forward puts them."""
        tensors = {i["name"]: x for i, x in zip(self.inputs, xs)}
        values = {p["name"]: (scalars[k] if scalars is not None else p["value"])
                  for k, p in enumerate(self.params)}
        return tuple(tensors[n] if n in tensors else values[n] for n in self.forward)

    def dims(self, shape):
        if shape not in self.shapes:
            fail(f"no shape {shape!r} (known: {', '.join(self.shapes)})")
        return self.shapes[shape]["dims"]

    def check_shapes(self):
        return [n for n, s in self.shapes.items() if s["role"] == "check"]

    def distribution_count(self):
        return max(len(i["distributions"]) for i in self.inputs)

    def build(self, torch, dims, seed, dtype, device):
        spec = importlib.util.spec_from_file_location("kb_problem", self.source)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        args = [eval_dim(a["dim"], dims) if "dim" in a
                else tuple(eval_dim(e, dims) for e in a["dims"]) if "dims" in a
                else a["value"] for a in self.init_args]
        torch.manual_seed(seed)
        model = getattr(mod, self.class_name)(*args)
        batch_statistics(torch, model)
        return model.to(device=device, dtype=dtype).eval()


def batch_statistics(torch, model):
    """KernelBench runs a module as constructed, in training mode, where a BatchNorm (or an
    InstanceNorm) normalizes by the batch's (the instance's) own statistics. The oracle and the
    eager baseline run the module in eval mode (a Dropout is the identity, so the output is
    deterministic) with the running statistics of every such norm removed: it then normalizes by
    the statistics of its input, as in training mode, and updates nothing (no buffer to write,
    so the harness's inputs are never written). The running statistics are not state inputs."""
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._NormBase):
            m.track_running_stats = False
            m.running_mean = None
            m.running_var = None
            m.num_batches_tracked = None


# ---- the harness's generator -------------------------------------------------------------------

class Generator:
    def __init__(self):
        here = os.path.dirname(os.path.abspath(__file__))
        candidates = [os.environ.get("KBLASTER_GENERATOR_LIB", ""),
                      os.path.join(here, "..", "build", "release", "lib", "libkblaster_generator.so")]
        for path in candidates:
            if path and os.path.exists(path):
                self.lib = ctypes.CDLL(path)
                break
        else:
            fail("libkblaster_generator.so not found (build the kblaster target, or set "
                 "KBLASTER_GENERATOR_LIB)", 70)
        self.lib.kb_gen_tensor_seed.restype = ctypes.c_uint64
        self.lib.kb_gen_tensor_seed.argtypes = [ctypes.c_uint64, ctypes.c_int]
        sig = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int64, ctypes.c_int, ctypes.c_double,
               ctypes.c_double, ctypes.c_uint64]
        self.lib.kb_gen_fill_host.argtypes = sig
        self.lib.kb_gen_fill_device.argtypes = sig + [ctypes.c_void_p]
        if self.lib.kb_gen_abi_version() != 1:
            fail("libkblaster_generator.so has another interface version", 70)

    def fill(self, tensor, dtype_name, dist, dims, seed, index):
        kind, a, b = parse_distribution(dist, dims)
        ts = self.lib.kb_gen_tensor_seed(seed, index)
        args = (ctypes.c_void_p(tensor.data_ptr()), KB_DTYPES[dtype_name], tensor.numel(),
                DIST_KIND[kind], float(a), float(b), ts)
        if tensor.is_cuda:
            rc = self.lib.kb_gen_fill_device(*args, None)
        else:
            rc = self.lib.kb_gen_fill_host(*args)
        if rc != 0:
            fail(f"generator failed ({rc})", 70)


def parse_distribution(d, dims):
    if isinstance(d, str):
        return NAMED[d]
    kind = d["kind"]
    if kind == "uniform":
        return kind, d["low"], d["high"]
    if kind == "normal":
        return kind, d.get("mean", 0.0), d.get("std", 1.0)
    if kind == "student_t":
        return kind, d.get("nu", 3.0), d.get("scale", 1.0)
    if kind == "constant":
        return kind, d["value"], 0.0
    high = d["high"]
    return kind, d.get("low", 0), eval_dim(high, dims) if isinstance(high, str) else high


# ---- references ----------------------------------------------------------------------------------

def torch_dtype(torch, name):
    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
            "float64": torch.float64, "int64": torch.int64, "int32": torch.int32}[name]


def draw_inputs(torch, task, gen, dims, dist_index, seed, device):
    """Inputs in their storage dtype, filled by the harness's generator."""
    out = []
    for i, spec in enumerate(task.inputs):
        shape = [eval_dim(e, dims) for e in spec["shape"]]
        t = torch.empty(shape, dtype=torch_dtype(torch, spec["dtype"]), device=device)
        dists = spec["distributions"]
        gen.fill(t, spec["dtype"], dists[dist_index % len(dists)], dims, seed, i)
        out.append(t)
    if device == "cuda":
        torch.cuda.synchronize()
    return out


def as_list(y):
    return list(y) if isinstance(y, (tuple, list)) else [y]


def evaluate(torch, task, gen, shape, dist_index, seed, device):
    """(inputs, float64 reference outputs, eager outputs in the task's dtype). A float64
    reference too large for the GPU beside the inputs is computed on the CPU (the comparison
    then runs there too)."""
    dims = task.dims(shape)
    xs = draw_inputs(torch, task, gen, dims, dist_index, seed, device)
    dtype = task_dtype(torch, task)

    def reference(dev):
        ref_model = task.build(torch, dims, seed, torch.float64, dev)
        args = [(x.double() if x.is_floating_point() else x).to(dev) for x in xs]
        return [y.double() for y in as_list(ref_model(*task.call_args(args)))]

    with torch.no_grad():
        try:
            ref = reference(device)
        except torch.cuda.OutOfMemoryError:
            torch.cuda.empty_cache()
            ref = reference("cpu")
        model = task.build(torch, dims, seed, dtype, device)
        try:
            eager = as_list(model(*task.call_args(xs)))
        except torch.cuda.OutOfMemoryError:
            if device != "cuda" or all(r.device.type == "cpu" for r in ref):
                raise
            ref = [r.cpu() for r in ref]
            torch.cuda.empty_cache()
            eager = as_list(model(*task.call_args(xs)))
    return xs, ref, eager


def compare(torch, y, ref, tol, chunk=1 << 25):
    """The judge's rule: |y - ref| <= atol * RMS(ref) + rtol * |ref|, finite, rel L2. Computed
    over chunks of `chunk` elements, so that its temporaries stay small beside tensors of many
    GiB (the verdict is the one a single pass gives)."""
    if y.shape != ref.shape:
        return False, f"shape {tuple(y.shape)} != {tuple(ref.shape)}"
    yf, rf = y.reshape(-1), ref.reshape(-1)
    n = rf.numel()
    spans = [(i, min(i + chunk, n)) for i in range(0, n, chunk)]
    ref_sq_all = sum(float(rf[a:b].pow(2).sum()) for a, b in spans)
    scale = (ref_sq_all / n) ** 0.5 if n else 0.0
    nonfinite, violated, max_err = False, False, 0.0
    diff_sq, ref_sq = 0.0, 0.0
    for a, b in spans:
        r = rf[a:b]
        yy = yf[a:b].to(r.device).double()
        fin = torch.isfinite(r)
        if not bool(torch.isfinite(yy[fin]).all()):
            nonfinite = True
            break
        d = (yy - r)[fin]
        rr = r[fin]
        err = d.abs()
        if err.numel():
            max_err = max(max_err, float(err.max()))
            violated = violated or bool((err > tol["atol"] * scale + tol["rtol"] * rr.abs()).any())
        diff_sq += float(d.pow(2).sum())
        ref_sq += float(rr.pow(2).sum())
    if nonfinite:
        return False, "non-finite output"
    if violated:
        return False, f"max error {max_err:.3g} over the bound"
    rel = diff_sq ** 0.5 / ref_sq ** 0.5 if ref_sq > 0 else diff_sq ** 0.5
    if rel > tol["rel_l2"]:
        return False, f"relative L2 {rel:.3g} over {tol['rel_l2']}"
    return True, "ok"


def seeds():
    return [1000003 * 1 + 0, 1000003 * 1 + 1]


# ---- commands -------------------------------------------------------------------------------------

def cmd_probe(_args):
    try:
        import torch
    except Exception as e:  # noqa: BLE001 (any import failure means no PyTorch)
        print(f"no PyTorch: {type(e).__name__}: {e}")
        return 3
    dev = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none"
    if getattr(_args, "json", False):
        print(json.dumps({"torch": torch.__version__, "cuda": dev, "libpython": libpython(),
                          "python": sys.version.split()[0],
                          "sys_path": [p for p in sys.path if p and os.path.isdir(p)]}))
        return 0
    print(f"torch {torch.__version__} cuda {dev}")
    return 0


def libpython():
    """The shared libpython of this interpreter ("" when there is none): the oracle module and
    the baseline of a pytorch task embed it."""
    import sysconfig
    names = [sysconfig.get_config_var(v) for v in ("INSTSONAME", "LDLIBRARY")]
    dirs = [sysconfig.get_config_var("LIBDIR") or "", os.path.join(sys.base_prefix, "lib")]
    arch = sysconfig.get_config_var("MULTIARCH")
    if arch:
        dirs.append(os.path.join("/usr/lib", arch))
    for d in dirs:
        for n in names:
            if d and n and n.endswith((".so", ".so.1.0", ".so.1")) and os.path.exists(os.path.join(d, n)):
                return os.path.realpath(os.path.join(d, n))
    return ""


def need_torch():
    try:
        import torch
        return torch
    except Exception as e:  # noqa: BLE001
        fail(f"blocked.no_pytorch: {e}", 3)


def device_of(args, torch):
    return args.device or ("cuda" if torch.cuda.is_available() else "cpu")


def cmd_reference(args):
    torch = need_torch()
    task = Task(args.task)
    device = device_of(args, torch)
    _, ref, _ = evaluate(torch, task, Generator(), args.shape, args.dist, args.seed, device)
    if args.ipc:
        handle_hex, size = args.ipc.split(":")
        total = sum(r.numel() * 8 for r in ref)
        if total > int(size):
            fail(f"the judge's buffer holds {size} bytes, the reference needs {total}")
        cudart = ctypes.CDLL("libcudart.so")
        handle = (ctypes.c_char * 64).from_buffer_copy(bytes.fromhex(handle_hex))
        ptr = ctypes.c_void_p()
        # cudaIpcOpenMemHandle(void** devPtr, cudaIpcMemHandle_t handle, unsigned flags): the
        # 64-byte handle is passed by value.
        rc = cudart.cudaIpcOpenMemHandle(ctypes.byref(ptr), handle, ctypes.c_uint(1))
        if rc != 0:
            fail(f"cudaIpcOpenMemHandle failed ({rc})", 70)
        offset = 0
        for r in ref:
            flat = r.contiguous().view(-1).to("cuda")
            cudart.cudaMemcpy(ctypes.c_void_p(ptr.value + offset), ctypes.c_void_p(flat.data_ptr()),
                              ctypes.c_size_t(flat.numel() * 8), ctypes.c_int(3))
            offset += flat.numel() * 8
        torch.cuda.synchronize()
        cudart.cudaIpcCloseMemHandle(ptr)
        print(json.dumps({"outputs": [list(r.shape) for r in ref], "bytes": offset}))
        return 0
    header = {"outputs": [{"shape": list(r.shape), "dtype": "float64", "bytes": r.numel() * 8} for r in ref]}
    with open(args.out, "wb") as f:
        f.write((json.dumps(header) + "\n").encode())
        for r in ref:
            f.write(r.detach().to("cpu").contiguous().numpy().astype("<f8").tobytes()
                    if hasattr(r, "numpy") else b"")
    return 0


def trivial_outputs(torch, ref, xs):
    """The checker self-test's trivial kernels: zeros, a copy of the first input, a constant."""
    out = {"zeros": [torch.zeros_like(r) for r in ref], "constant": []}
    mean = float(ref[0].mean()) if ref and ref[0].numel() else 0.0
    out["constant"] = [torch.full_like(r, mean) for r in ref]
    x0 = xs[0].double().reshape(-1)
    copies = []
    for r in ref:
        n = r.numel()
        reps = -(-n // max(1, x0.numel()))
        copies.append(x0.repeat(reps)[:n].reshape(r.shape) if x0.numel() else torch.zeros_like(r))
    out["copy_of_input"] = copies
    return out


def cmd_selftest(args):
    torch = need_torch()
    strict_float32(torch)
    task = Task(args.task)
    device = device_of(args, torch)
    gen = Generator()
    degenerate, nonfinite, eager_fails = [], [], []
    rows = []
    shapes = task.check_shapes() + (["official"] if args.official else [])
    for shape in shapes:
        for d in range(task.distribution_count()):
            for seed in seeds():
                xs, ref, eager = evaluate(torch, task, gen, shape, d, seed, device)
                if not all(bool(torch.isfinite(r).all()) for r in ref):
                    nonfinite.append({"shape": shape, "distribution": d, "seed": seed})
                ok_eager = all(compare(torch, y, r, task.tol)[0] for y, r in zip(eager, ref))
                if not ok_eager:
                    eager_fails.append({"shape": shape, "distribution": d, "seed": seed})
                for kind, ys in trivial_outputs(torch, ref, xs).items():
                    passed = all(compare(torch, y, r, task.tol)[0] for y, r in zip(ys, ref))
                    rows.append({"shape": shape, "distribution": d, "seed": seed, "trivial": kind,
                                 "passes": passed})
                    if passed and d == 0:
                        reason = (f"{kind}_passes_official: a {kind.replace('_', ' ')} output passes "
                                  f"the official distribution at shape {shape}")
                        if reason not in degenerate:
                            degenerate.append(reason)
    caught_elsewhere = {r["trivial"] for r in rows if not r["passes"] and r["distribution"] != 0}
    result = {"device": device, "degenerate": degenerate, "nonfinite_references": nonfinite,
              "eager_outside_tolerance": eager_fails, "checks": rows,
              "trivial_rejected_by_other_distributions": sorted(caught_elsewhere)}
    text = json.dumps(result, indent=1) + "\n"
    with open(os.path.join(task.dir, "selftest.json"), "w", encoding="utf-8") as f:
        f.write(text)
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    print(json.dumps({k: v for k, v in result.items() if k != "checks"}))
    return 0


def time_eager(torch, model, xs, samples):
    flush = torch.empty(int(2 * 60e6) // 4, dtype=torch.float32, device="cuda")
    times = []
    with torch.no_grad():
        for _ in range(3):
            model(*xs)
        for _ in range(samples):
            flush.zero_()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            model(*xs)
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b) / 1e3)
    return times


def aa_verify(torch, gen, task):
    """The baseline's verification: eager against the float64 reference on every check shape,
    distribution and two seeds, and the official shape on every distribution."""
    failures = []
    checks = 0
    for shape in task.check_shapes() + ["official"]:
        for d in range(task.distribution_count()):
            for seed in seeds()[: (1 if shape == "official" else 2)]:
                _, ref, eager = evaluate(torch, task, gen, shape, d, seed, "cuda")
                for y, r in zip(eager, ref):
                    ok, why = compare(torch, y, r, task.tol)
                    checks += 1
                    if not ok and bool(torch.isfinite(r).all()):
                        failures.append({"shape": shape, "distribution": d, "seed": seed, "why": why})
    return {"task": task.toml["id"], "checks": checks, "failures": failures[:10],
            "failure_count": len(failures)}


def aa_one(torch, gen, task, verified=None):
    """Verification (or its earlier result, `verified`), then eager timed against itself."""
    v = verified if verified is not None else aa_verify(torch, gen, task)
    dims = task.dims("official")
    xs = task.call_args(draw_inputs(torch, task, gen, dims, 0, seeds()[0], "cuda"))
    model = task.build(torch, dims, seeds()[0], task_dtype(torch, task), "cuda")
    a, b = [], []
    time_eager(torch, model, xs, 10)  # a group to warm up the clocks and caches, not counted
    for r in range(6):  # groups in the order ABBA ABBA ..., so that drift hits both alike
        first, second = (a, b) if r % 2 == 0 else (b, a)
        first += time_eager(torch, model, xs, 10)
        second += time_eager(torch, model, xs, 10)
    ratio = statistics.median(a) / statistics.median(b)
    failures = v["failures"]
    verdict = "rejected" if failures else ("same" if abs(ratio - 1) < 0.05 else "unstable")
    return {"task": task.toml["id"], "kernelbench": task.toml.get("kernelbench", ""),
            "verdict": verdict, "checks": v["checks"], "failures": failures,
            "median_a_s": statistics.median(a), "median_b_s": statistics.median(b),
            "aa_ratio": ratio, "samples": len(a) + len(b),
            "degenerate": task.toml.get("degenerate", [])}


class _TimeLimit(Exception):
    pass


def cmd_aa(args):
    """One task (--out FILE) or many in one process (--out-dir DIR: DIR/<folder>.json each, or
    DIR/<folder>.err with the error), each under --time-limit seconds."""
    torch = need_torch()
    strict_float32(torch)
    if not torch.cuda.is_available():
        fail("blocked: no CUDA device", 3)
    gen = Generator()
    import signal
    import traceback

    def alarm(_sig, _frame):
        raise _TimeLimit()

    signal.signal(signal.SIGALRM, alarm)
    rc = 0
    for folder in args.task:
        name = os.path.basename(os.path.normpath(folder))
        signal.alarm(args.time_limit)
        try:
            # --verify-only writes <folder>.verify.json, which a later run without it takes
            # instead of verifying again: verification may run in several processes at once,
            # the timing then in one.
            verify_file = os.path.join(args.out_dir, name + ".verify.json") if args.out_dir else None
            if args.verify_only:
                result = aa_verify(torch, gen, Task(folder))
                out = verify_file or args.out
            else:
                verified = None
                if verify_file and os.path.exists(verify_file):
                    with open(verify_file, encoding="utf-8") as f:
                        verified = json.load(f)
                result = aa_one(torch, gen, Task(folder), verified)
                out = args.out if len(args.task) == 1 and args.out else (
                    os.path.join(args.out_dir, name + ".json") if args.out_dir else None)
            text = json.dumps(result, indent=1) + "\n"
            if out:
                with open(out, "w", encoding="utf-8") as f:
                    f.write(text)
            print(text, end="")
            rc |= 0 if result.get("verdict", "same") == "same" and not result["failures"] else 1
        except (_TimeLimit, Exception) as e:  # noqa: BLE001 (one task's failure is its result)
            why = (f"over the time limit of {args.time_limit} s" if isinstance(e, _TimeLimit)
                   else traceback.format_exc())
            if args.verify_only and isinstance(e, torch.cuda.OutOfMemoryError):
                # Out of memory beside the other verifying processes: no result, so that the
                # run that times (alone on the GPU) verifies it.
                print(f"pytorch_oracle: {name}: out of memory here, left to the timing run",
                      file=sys.stderr)
                rc |= 1
                continue
            if args.out_dir:
                with open(os.path.join(args.out_dir, name + ".err"), "w", encoding="utf-8") as f:
                    f.write(why)
            print(f"pytorch_oracle: {name}: {why.strip().splitlines()[-1]}", file=sys.stderr)
            rc |= 1
        finally:
            signal.alarm(0)
            torch.cuda.empty_cache()
    return rc


# ---- the resolved contract: what only running the module tells -------------------------------

def state_of(model):
    """The module's parameters and persistent buffers, in state_dict order: a candidate gets them
    as inputs after the forward's."""
    return list(model.state_dict(keep_vars=True).items())


def state_input_name(name):
    return "state_" + re.sub(r"[^A-Za-z0-9_]", "_", name)


def state_distribution(torch, t):
    """How the judge draws a state tensor: the range PyTorch's own initialisation gave it at the
    official shape (uniform over [min, max]), or its value where every element is the same (a
    norm's weight of ones, a running variance)."""
    if t.numel() == 0:
        return {"kind": "constant", "value": 0.0}
    lo, hi = float(t.min()), float(t.max())
    if lo == hi or not t.is_floating_point():
        return {"kind": "constant", "value": lo}
    return {"kind": "uniform", "low": lo, "high": hi}


def file_digest(paths):
    import hashlib
    h = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def task_digest(task):
    return file_digest([os.path.join(task.dir, "task.toml"), task.source])


def output_shapes(torch, task, model, dims, dtype):
    """The forward's outputs at one shape, on the meta device (no arithmetic), else computed."""
    def run(device):
        xs = [torch.empty([eval_dim(e, dims) for e in i["shape"]],
                          dtype=torch_dtype(torch, i["dtype"]), device=device) for i in task.inputs]
        if device != "meta":
            for x in xs:
                x.zero_() if not x.is_floating_point() else x.uniform_()
        with torch.no_grad():
            return as_list(model.to(device)(*task.call_args(xs)))
    try:
        ys = run("meta")
    except Exception:  # noqa: BLE001 (an op without a meta kernel: compute it instead)
        ys = run("cuda" if torch.cuda.is_available() else "cpu")
    return [{"shape": list(y.shape), "dtype": str(y.dtype).replace("torch.", "")} for y in ys]


def task_dtype(torch, task):
    return torch_dtype(torch, next((i["dtype"] for i in task.inputs
                                    if i["dtype"].startswith(("float", "b"))), "float32"))


def cmd_describe(args):
    """Writes DIR/resolved.json: per shape, the forward's outputs and the module's state (names,
    shapes, dtypes), and how the judge draws the state. The contract loader adds the state to the
    inputs and the outputs to the contract."""
    torch = need_torch()
    task = Task(args.task)
    dtype = task_dtype(torch, task)
    shapes, state_dists = {}, None
    for name in task.shapes:
        dims = task.dims(name)
        model = task.build(torch, dims, 0, dtype, "cpu")
        state = state_of(model)
        if name == "official" or state_dists is None:
            state_dists = [state_distribution(torch, t.detach()) for _, t in state]
        shapes[name] = {
            "outputs": output_shapes(torch, task, model, dims, dtype),
            "state": [{"name": k, "input": state_input_name(k), "shape": list(t.shape),
                       "dtype": str(t.dtype).replace("torch.", "")} for k, t in state],
        }
    names = [[e["name"] for e in s["state"]] for s in shapes.values()]
    if any(n != names[0] for n in names):
        fail("the module's state differs between shapes (names or order)")
    # version 2: norms without running statistics (batch_statistics), so none is state
    result = {"version": 2, "digest": task_digest(task), "torch": torch.__version__,
              "state_distributions": state_dists or [], "shapes": shapes}
    text = json.dumps(result, indent=1) + "\n"
    with open(os.path.join(task.dir, "resolved.json"), "w", encoding="utf-8") as f:
        f.write(text)
    print(json.dumps({"shapes": len(shapes), "outputs": len(next(iter(shapes.values()))["outputs"]),
                      "state": len(names[0])}))
    return 0


# ---- in-process calls: the oracle module and the eager baseline ------------------------------
# The compiled oracle module of a pytorch task (run by the judge) and its baseline (run by a
# runner) embed Python and call kb_call() with the address of their kb_args (include/kblaster/
# candidate.h): the tensors are the harness's, in its memory, on its stream.

def strict_float32(torch):
    """float32 means float32: no TF32 in convolutions or products (PyTorch allows it in cuDNN by
    default, 1e-3 off where the tolerance is 1e-4), and deterministic algorithms, so that eager
    PyTorch gives the same bits on every call."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True


class _KbTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int32),
                ("shape", ctypes.c_int64 * 8), ("strides", ctypes.c_int64 * 8)]


class _KbArgs(ctypes.Structure):
    _fields_ = [("abi_version", ctypes.c_int32), ("num_inputs", ctypes.c_int32),
                ("inputs", ctypes.POINTER(_KbTensor)), ("num_outputs", ctypes.c_int32),
                ("outputs", ctypes.POINTER(_KbTensor)), ("num_scalars", ctypes.c_int32),
                ("scalars", ctypes.POINTER(ctypes.c_double)), ("workspace", ctypes.c_void_p),
                ("workspace_bytes", ctypes.c_uint64), ("stream", ctypes.c_void_p)]


class _DeviceMemory:
    """Device bytes the harness owns, seen by torch.as_tensor (no copy, no ownership)."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 3, "stream": None}


_ABI_NAMES = {v: k for k, v in KB_DTYPES.items()}
_calls = {}
_timed_modes = set()


def _view(torch, t, device):
    dt = torch_dtype(torch, _ABI_NAMES[t.dtype])
    shape = [int(t.shape[k]) for k in range(t.ndim)]
    strides = [int(t.strides[k]) for k in range(t.ndim)]
    item = torch.empty((), dtype=dt).element_size()
    span = 0 if any(n == 0 for n in shape) else 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    if span == 0 or not t.data:
        return torch.empty(shape, dtype=dt, device=device)
    if device == "cpu":
        raw = torch.frombuffer((ctypes.c_char * (span * item)).from_address(t.data), dtype=torch.uint8)
    else:
        raw = torch.as_tensor(_DeviceMemory(t.data, span * item), device="cuda")
    return raw.view(dt).as_strided(shape, strides)


class _Call:
    """One task's module, built once per (shape, mode, device)."""

    def __init__(self, torch, task_dir):
        self.torch = torch
        strict_float32(torch)
        self.task = Task(task_dir)
        with open(os.path.join(self.task.dir, "resolved.json"), encoding="utf-8") as f:
            self.resolved = json.load(f)
        self.dtype = task_dtype(torch, self.task)
        self.models = {}
        self.by_shapes = {}
        for name in self.task.shapes:
            dims = self.task.dims(name)
            key = tuple(tuple(eval_dim(e, dims) for e in i["shape"]) for i in self.task.inputs)
            key += tuple(tuple(s["shape"]) for s in self.resolved["shapes"][name]["state"])
            self.by_shapes.setdefault(key, name)
        try:
            from torch.func import functional_call
        except ImportError:  # PyTorch < 2.0
            from torch.nn.utils.stateless import functional_call
        self.functional_call = functional_call

    def model(self, shape, dtype, device):
        key = (shape, dtype, device)
        if key not in self.models:
            self.models[key] = self.task.build(self.torch, self.task.dims(shape), 0, dtype, device)
        return self.models[key]

    def _forward(self, shape, reference, ins, outs, scalars, compute):
        """The module on `compute` ("cuda" or "cpu") into the harness's outputs: in float64 (the
        reference, its floating-point inputs cast on the way) or in the task's dtype (eager)."""
        torch = self.torch
        n = len(self.task.inputs)
        dtype = torch.float64 if reference else self.dtype
        model = self.model(shape, dtype, compute)
        names = [s["name"] for s in self.resolved["shapes"][shape]["state"]]
        if reference:
            def cast(x):
                return x.to(compute, torch.float64) if x.is_floating_point() else x.to(compute)
        else:
            def cast(x):
                return x
        state = {k: cast(x) for k, x in zip(names, ins[n:])}
        xs = [cast(x) for x in ins[:n]]
        ys = as_list(self.functional_call(model, state, self.task.call_args(xs, scalars or None)))
        if len(ys) != len(outs):
            raise ValueError(f"the module returned {len(ys)} outputs, the contract has {len(outs)}")
        for o, y in zip(outs, ys):
            o.copy_(y)

    def _reference_on_device(self, shape, ins, outs, scalars):
        """The float64 reference on the GPU, its intermediates in a memory pool of their own that
        is released after the call: KernelBench-sized float64 copies are tens of GB, and the
        judge sizes its timing sets by the device's free memory. A pool of its own leaves the
        eager module's cached blocks alone, so that an eager call after a reference allocates
        nothing anew (emptying the whole cache released them too)."""
        torch = self.torch
        self.model(shape, torch.float64, "cuda")  # its parameters outlive the pool
        pool = torch.cuda.MemPool() if hasattr(torch.cuda, "MemPool") else None
        try:
            with torch.cuda.use_mem_pool(pool) if pool is not None else contextlib.nullcontext():
                self._forward(shape, True, ins, outs, scalars, "cuda")
        finally:
            if pool is not None:
                torch.cuda.current_stream().synchronize()
                del pool
            elif torch.cuda.memory_reserved() > (1 << 30):
                torch.cuda.empty_cache()

    def __call__(self, mode, args_address, on_device):
        torch = self.torch
        a = _KbArgs.from_address(args_address)
        scalars = [float(a.scalars[k]) for k in range(a.num_scalars)]
        device = "cuda" if on_device else "cpu"
        # Every operation on the harness's tensors, the float64 casts of the reference included,
        # is queued on the caller's stream: the inputs are written there (the judge's generator)
        # and it reads the outputs there. PyTorch's own stream is not ordered with a
        # non-blocking one, so a cast queued there could read inputs still being generated.
        on_stream = (torch.cuda.stream(torch.cuda.ExternalStream(a.stream))
                     if on_device and a.stream else contextlib.nullcontext())
        with torch.no_grad(), on_stream:
            ins = [_view(torch, a.inputs[i], device) for i in range(a.num_inputs)]
            outs = [_view(torch, a.outputs[i], device) for i in range(a.num_outputs)]
            shape = self.by_shapes.get(tuple(tuple(x.shape) for x in ins))
            if shape is None:
                raise ValueError("the tensors match none of the task's shapes")
            if mode == "reference" and on_device:
                self._reference_on_device(shape, ins, outs, scalars)
            else:
                self._forward(shape, mode == "reference", ins, outs, scalars, device)
        return 0


def kb_call(task_dir, mode, args_address, on_device):
    """The entry point of the embedded interpreter: mode "reference" (the module in float64 into
    float64 outputs) or "eager" (the module in the task's dtype). Returns 0; or 2 where the device
    ran out of memory (the judge tells a device too small for the job from a hoard); or prints the
    error and returns 1."""
    try:
        t0 = time.monotonic()
        first = "torch" not in sys.modules
        import torch
        t1 = time.monotonic()
        call = _calls.get(task_dir)
        if call is None:
            call = _calls[task_dir] = _Call(torch, task_dir)
        t2 = time.monotonic()
        rc = call(mode, args_address, bool(on_device))
        # The first call of each mode says where a process's start went (the import, the task,
        # the module built and run once), on stderr, which the judge keeps with the session.
        if mode not in _timed_modes:
            _timed_modes.add(mode)
            print(f"kblaster pytorch {mode}: import torch {t1 - t0:.2f} s"
                  f"{'' if first else ' (imported before)'}, task {t2 - t1:.2f} s, "
                  f"first call {time.monotonic() - t2:.2f} s", file=sys.stderr)
            sys.stderr.flush()
        return rc
    except Exception as e:  # noqa: BLE001 (the harness gets a return code; the reason to stderr)
        if out_of_device_memory(e):
            print(f"kblaster pytorch oracle: {mode} call out of device memory: {e}".splitlines()[0],
                  file=sys.stderr)
            sys.stderr.flush()
            return 2
        import traceback
        traceback.print_exc()
        sys.stderr.flush()
        return 1


def out_of_device_memory(e):
    """Whether `e` is PyTorch's out-of-memory error of a device allocation (its own class since
    torch 1.13; a RuntimeError with the allocator's message before)."""
    return type(e).__name__ == "OutOfMemoryError" or (
        isinstance(e, RuntimeError) and "CUDA out of memory" in str(e))


def cmd_resolve(args):
    torch = need_torch()
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, here)
    import kernelbench_parse  # noqa: E402 (same folder)
    results = []
    for path in args.files:
        base = kernelbench_parse.parse_file(path)
        if base["status"] == "ok" and not args.all:
            results.append(base)
            continue
        try:
            spec = importlib.util.spec_from_file_location("kb_problem", path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            torch.manual_seed(0)
            xs = list(mod.get_inputs())
            init = list(mod.get_init_inputs())
        except Exception as e:  # noqa: BLE001 (the file's own failure is the result)
            results.append(dict(base, status="failed", reason=f"executing the file failed: {type(e).__name__}: {e}"))
            continue
        dims, inputs = {}, []
        import inspect
        params = list(inspect.signature(mod.Model.forward).parameters.values())[1:]
        names = [p.name for p in params if p.kind != inspect.Parameter.VAR_POSITIONAL]
        star = next((p.name for p in params if p.kind == inspect.Parameter.VAR_POSITIONAL), "input")
        for i, x in enumerate(xs):
            name = names[i] if i < len(names) else f"{star}{i}"
            if isinstance(x, (int, float)) and not isinstance(x, bool):
                inputs.append({"name": name, "scalar": float(x)})
                continue
            if not torch.is_tensor(x):
                results.append(dict(base, status="failed", reason=f"input {i} is neither a tensor nor a number ({type(x).__name__})"))
                break
            if x.dtype == torch.bool:
                results.append(dict(base, status="failed", reason=f"input {i} ({name}) is a bool tensor; contracts have no bool dtype"))
                break
            shape = []
            for k, n in enumerate(x.shape):
                dims[f"in{i}_{k}"] = int(n)
                shape.append(f"in{i}_{k}")
            floating = x.is_floating_point()
            lo, hi = (float(x.min()), float(x.max())) if floating and x.numel() else (0.0, 1.0)
            dist = "uniform01" if floating and lo >= 0 and hi < 1 else "normal"
            if not floating:
                dist = {"kind": "randint", "low": int(x.min()), "high": int(x.max()) + 1}
            dtype = str(x.dtype).replace("torch.", "")
            inputs.append({"name": name, "shape": shape, "dtype": dtype, "distribution": dist})
        else:
            init_args = [{"value": v if not isinstance(v, tuple) else list(v)} for v in init]
            graph = kernelbench_parse.graph_of_file(path, inputs, init_args, dims)
            results.append(dict(base, status="ok", reason="resolved by executing the file", graph=graph,
                                inputs=inputs, init_args=init_args, dims=dims,
                                check_shapes=[{"name": "as_official", "dims": dims}],
                                degenerate=base.get("degenerate", []), **{"class": "Model"}))
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1, sort_keys=True)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    pr = sub.add_parser("probe")
    pr.add_argument("--json", action="store_true",
                    help="one JSON line: torch, cuda, libpython, python, sys_path")
    r = sub.add_parser("reference")
    for a in (r,):
        a.add_argument("--task", required=True)
        a.add_argument("--shape", default="official")
        a.add_argument("--dist", type=int, default=0)
        a.add_argument("--seed", type=int, default=1000003)
        a.add_argument("--out")
        a.add_argument("--ipc")
        a.add_argument("--device", choices=["cuda", "cpu"])
    s = sub.add_parser("selftest")
    s.add_argument("--task", required=True)
    s.add_argument("--out")
    s.add_argument("--official", action="store_true", help="also the official shape")
    s.add_argument("--device", choices=["cuda", "cpu"])
    a = sub.add_parser("aa")
    a.add_argument("--task", required=True, nargs="+")
    a.add_argument("--out", help="the result of one task")
    a.add_argument("--out-dir", help="a result (or .err) per task, named by its folder")
    a.add_argument("--time-limit", type=int, default=600, help="seconds per task")
    a.add_argument("--verify-only", action="store_true",
                   help="only the verification, into DIR/<folder>.verify.json with --out-dir")
    de = sub.add_parser("describe")
    de.add_argument("--task", required=True)
    v = sub.add_parser("resolve")
    v.add_argument("files", nargs="+")
    v.add_argument("--out", required=True)
    v.add_argument("--all", action="store_true", help="execute files the parser could read too")
    args = p.parse_args()
    if args.cmd == "reference" and not (args.out or args.ipc):
        fail("reference needs --out FILE or --ipc HANDLE:BYTES", 64)
    return {"probe": cmd_probe, "reference": cmd_reference, "selftest": cmd_selftest,
            "aa": cmd_aa, "resolve": cmd_resolve, "describe": cmd_describe}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
