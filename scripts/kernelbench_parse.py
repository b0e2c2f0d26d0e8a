#!/usr/bin/env python3
"""Reads KernelBench problem files without executing them (Python's `ast` only).

A problem file defines `class Model(nn.Module)` with `__init__` and `forward`, module-level size
constants, `get_inputs()` (the forward's inputs, drawn with torch.rand / torch.randn /
torch.randint) and `get_init_inputs()` (the module's constructor arguments). This script finds,
by evaluating only constant arithmetic over the module-level constants:

  - the constants (integers become shape dims; other literals are kept as values),
  - each input's shape (expressions over the dims), dtype and distribution,
  - the constructor arguments (dim expressions or literal values),
  - small check shapes: scaled-down dims that keep the structure,
  - statically degenerate official inputs (an activation that is the identity on torch.rand's
    [0, 1) values).

A file whose inputs cannot be found this way is reported as `needs_gpu_evaluation` (resolve it by
executing the file on the GPU machine, scripts/pytorch_oracle.py resolve) or `failed` with the
reason. Output: one JSON array on stdout, one object per file (docs/task-format.md, "Importing
KernelBench problems"). Nothing here imports torch.

    python3 scripts/kernelbench_parse.py [--out RESULT.json] FILE.py...
"""
import ast
import json
import math
import operator
import os
import re
import sys

# Activations that are the identity on [0, 1): a copy of the input passes the official inputs.
IDENTITY_ON_UNIT = {
    "relu", "relu_", "relu6", "hardtanh", "leaky_relu", "elu", "celu", "abs", "threshold",
    "ReLU", "ReLU6", "Hardtanh", "LeakyReLU", "ELU", "CELU", "clamp", "clip",
}
# Names that size a window or a step rather than data: never scaled down for check shapes.
STRUCTURAL = re.compile(r"kernel|stride|pad|dilation|groups|heads|window", re.I)
CHECK_ELEMENTS = 1 << 15  # target size of the largest input at the check shapes


class Unsupported(Exception):
    pass


BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Div: operator.truediv, ast.Pow: operator.pow,
    ast.Mod: operator.mod,
}


# Constant arithmetic stays small: a hostile file's 10**10**10 or 1/0 is refused, never computed.
MAX_INT_BITS = 256


def checked(op, a, b):
    if isinstance(op, ast.Pow):
        if isinstance(b, (int, float)) and abs(b) > 64:
            raise Unsupported(f"exponent {b} is too large")
        if isinstance(a, (int, float)) and abs(a) > 2 ** 64:
            raise Unsupported("power of too large a number")
    if isinstance(a, (list, tuple, str)) or isinstance(b, (list, tuple, str)):
        # Repetition of a sequence ([0] * 10**9): refused beyond a small length.
        n = b if isinstance(a, (list, tuple, str)) else a
        if isinstance(n, int) and abs(n) > 4096:
            raise Unsupported("repetition of a sequence is too long")
    try:
        v = BINOPS[type(op)](a, b)
    except (ZeroDivisionError, OverflowError, TypeError, ValueError) as e:
        raise Unsupported(f"constant arithmetic fails: {e}")
    if isinstance(v, int) and v.bit_length() > MAX_INT_BITS:
        raise Unsupported("constant is too large")
    return v


def const_eval(node, env):
    """The value of constant arithmetic over known constants; Unsupported otherwise."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool, str)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id in env:
            return env[node.id]
        raise Unsupported(f"unknown name '{node.id}'")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = const_eval(node.operand, env)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.BinOp) and type(node.op) in BINOPS:
        return checked(node.op, const_eval(node.left, env), const_eval(node.right, env))
    if isinstance(node, (ast.Tuple, ast.List)):
        out = []
        for e in node.elts:
            if isinstance(e, ast.Starred):
                out.extend(const_eval(e.value, env))
            else:
                out.append(const_eval(e, env))
        return tuple(out) if isinstance(node, ast.Tuple) else out
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("int", "float") \
            and len(node.args) == 1:
        return {"int": int, "float": float}[node.func.id](const_eval(node.args[0], env))
    raise Unsupported(f"not constant arithmetic: {ast.unparse(node)}")


def dim_expr(node, env, dims):
    """A shape element as an expression over dim names (+ - * and integer /), recording the dims."""
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return str(node.value)
    if isinstance(node, ast.Name):
        v = env.get(node.id)
        if isinstance(v, int) and not isinstance(v, bool):
            if v <= 0:
                raise Unsupported(f"dim '{node.id}' = {v} is not positive")
            dims[node.id] = v
            return node.id
        raise Unsupported(f"'{node.id}' is not an integer constant")
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)):
        sym = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "/"}[type(node.op)]
        return f"({dim_expr(node.left, env, dims)} {sym} {dim_expr(node.right, env, dims)})"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "int":
        v = const_eval(node, env)
        return str(v)
    raise Unsupported(f"shape element not understood: {ast.unparse(node)}")


def shape_elements(args, env):
    """The elements of torch.rand(*shape) or torch.rand((shape)), expanding starred tuples."""
    if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)):
        args = args[0].elts
    if len(args) == 1 and isinstance(args[0], ast.Name) and \
            isinstance(env.get(args[0].id), (tuple, list)):
        # torch.rand(input_shape) with input_shape a tuple constant: as torch.rand(*input_shape).
        args = [ast.Starred(value=args[0])]
    out = []
    for a in args:
        if isinstance(a, ast.Starred):
            value = a.value
            if isinstance(value, ast.Name) and isinstance(env.get(value.id), (tuple, list)):
                # A tuple constant: its elements become dims named <tuple>_<i>.
                for i, v in enumerate(env[value.id]):
                    name = f"{value.id}_{i}"
                    env[name] = v
                    out.append(ast.Name(id=name))
                continue
            if isinstance(value, (ast.Tuple, ast.List)):
                out.extend(value.elts)
                continue
            raise Unsupported(f"starred shape not understood: {ast.unparse(a)}")
        out.append(a)
    return out


def call_name(func):
    """'torch.rand' for torch.rand, 'F.relu' for F.relu, 'x.cuda' -> 'cuda'."""
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
    return ".".join(reversed(parts))


DTYPES = {"float32": "float32", "float": "float32", "float16": "float16", "half": "float16",
          "bfloat16": "bfloat16", "float64": "float64", "double": "float64", "int64": "int64",
          "long": "int64", "int32": "int32", "int": "int32"}


def tensor_input(node, env, dims):
    """One get_inputs() element: {shape, dtype, distribution} or Unsupported."""
    scale, shift = 1.0, 0.0
    # rand(...) * a + b, randn(...) * s, rand(...) - 0.5 ...
    while isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.Sub, ast.Div)):
        try:
            k = float(const_eval(node.right, env))
            inner = node.left
        except Unsupported:
            k = float(const_eval(node.left, env))
            inner = node.right
            if isinstance(node.op, (ast.Sub, ast.Div)):
                raise Unsupported(f"input expression not understood: {ast.unparse(node)}")
        if isinstance(node.op, ast.Mult):
            scale, shift = scale * k, shift * k
        elif isinstance(node.op, ast.Div):
            scale, shift = scale / k, shift / k
        elif isinstance(node.op, ast.Add):
            shift += k
        else:
            shift -= k
        node = inner
    # Peel .cuda(), .to(...), .float(), .contiguous() (innermost call is the generator).
    dtype = "float32"
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in ("cuda", "to", "float", "half", "contiguous", "bfloat16", "double", "long"):
        if node.func.attr in ("half", "bfloat16", "double", "long", "float"):
            dtype = DTYPES[node.func.attr]
        for kw in node.keywords:
            if kw.arg == "dtype":
                dtype = DTYPES.get(call_name(kw.value).split(".")[-1], dtype)
        for a in node.args:
            if isinstance(a, ast.Attribute) and a.attr in DTYPES:
                dtype = DTYPES[a.attr]
        node = node.func.value
    if not isinstance(node, ast.Call):
        raise Unsupported(f"input is not a torch.rand/randn/randint call: {ast.unparse(node)}")
    name = call_name(node.func)
    short = name.split(".")[-1]
    if short not in ("rand", "randn", "randint", "ones", "zeros", "empty"):
        raise Unsupported(f"input generator {name} not understood")
    for kw in node.keywords:
        if kw.arg == "dtype":
            dtype = DTYPES.get(call_name(kw.value).split(".")[-1], dtype)
    out = {"dtype": dtype}
    if short == "randint":
        args = list(node.args)
        kw = {k.arg: k.value for k in node.keywords}
        if "size" in kw:
            args.append(kw["size"])
        if len(args) == 2:
            low, high, size = ast.Constant(0), args[0], args[1]
        elif len(args) == 3:
            low, high, size = args
        else:
            raise Unsupported(f"randint call not understood: {ast.unparse(node)}")
        out["shape"] = [dim_expr(e, env, dims) for e in shape_elements([size], env)]
        out["distribution"] = {"kind": "randint", "low": int(const_eval(low, env)),
                               "high": dim_expr(high, env, dims)}
        out["dtype"] = "int64" if dtype == "float32" else dtype
        return out
    out["shape"] = [dim_expr(e, env, dims) for e in shape_elements(node.args, env)]
    if short == "rand":
        out["distribution"] = {"kind": "uniform", "low": shift, "high": shift + scale} if scale > 0 \
            else {"kind": "uniform", "low": shift + scale, "high": shift}
        if (shift, scale) == (0.0, 1.0):
            out["distribution"] = "uniform01"
    elif short == "randn":
        out["distribution"] = "normal" if (shift, scale) == (0.0, 1.0) else \
            {"kind": "normal", "mean": shift, "std": abs(scale)}
    else:
        value = {"ones": 1.0, "zeros": 0.0, "empty": 0.0}[short] * scale + shift
        out["distribution"] = {"kind": "constant", "value": value}
    return out


def returned_list(fn, env):
    """The list a get_* function returns, with local assignments resolved by substitution."""
    local = {}
    for stmt in fn.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            local[stmt.targets[0].id] = stmt.value
        elif isinstance(stmt, ast.Return):
            value = stmt.value
            if isinstance(value, ast.Name) and value.id in local:
                value = local[value.id]
            if not isinstance(value, (ast.List, ast.Tuple)):
                raise Unsupported(f"{fn.name} does not return a list literal: {ast.unparse(value)}")
            return [local.get(e.id, e) if isinstance(e, ast.Name) and e.id in local else e
                    for e in value.elts]
        elif isinstance(stmt, (ast.Expr, ast.Pass)) and not isinstance(getattr(stmt, "value", None), ast.Call):
            continue  # docstrings
        else:
            raise Unsupported(f"{fn.name}: statement not understood: {ast.unparse(stmt)[:80]}")
    raise Unsupported(f"{fn.name} has no return")


def forward_ops(fn, modules=None):
    """Names of the torch functions, tensor methods and submodules a function calls; a call of
    self.<name> is the type of the module __init__ assigned to it (self.act = nn.ReLU() -> ReLU),
    or "self.<name>" when unknown."""
    modules = modules or {}
    ops = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Call):
            n = call_name(node.func)
            short = n.split(".")[-1]
            if n.startswith("self."):
                ops.append(modules.get(short, n))
            elif n.startswith(("torch.", "F.", "nn.", "torch.nn.")) or short in IDENTITY_ON_UNIT:
                ops.append(short)
            elif isinstance(node.func, ast.Attribute):
                ops.append(short)  # x.relu(), x.clamp(min=0)
    return ops


def forward_of(cls):
    for item in cls.body:
        if isinstance(item, ast.FunctionDef) and item.name == "forward":
            return item
    return None


def submodules(cls):
    """self.<name> = nn.<Type>(...) assignments of __init__: name -> Type."""
    out = {}
    for item in cls.body:
        if isinstance(item, ast.FunctionDef) and item.name == "__init__":
            for node in ast.walk(item):
                if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                    for t in node.targets:
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                            out[t.attr] = call_name(node.value.func).split(".")[-1]
    return out


def static_degenerate(cls, inputs):
    """Rules that need no reference values: a forward that is one activation that is the identity
    on [0, 1), applied to uniform01 inputs, lets a copy of the input pass the official inputs."""
    floats = [i for i in inputs if i["dtype"].startswith(("float", "bfloat"))]
    if not floats or any(i["distribution"] != "uniform01" for i in floats):
        return []
    fwd = forward_of(cls)
    if fwd is None:
        return []
    # Arithmetic around the op (softsign's x / (1 + abs(x))) makes the forward another function;
    # a sign on a constant (view(-1)) does not.
    for node in ast.walk(fwd):
        if isinstance(node, ast.BinOp) or (isinstance(node, ast.UnaryOp) and
                                           not isinstance(node.operand, ast.Constant)):
            return []
    ops = [o for o in forward_ops(fwd, submodules(cls))
           if o not in ("size", "view", "reshape", "contiguous", "dim", "flatten")]
    if len(ops) == 1 and ops[0] in IDENTITY_ON_UNIT:
        return [f"identity_on_official: {ops[0]} is the identity on uniform01 inputs, so a copy of "
                f"the input passes them; verification relies on the other distributions"]
    return []


def window_extent(constants):
    """The widest window the module's constants describe: dilation * (kernel - 1) + 1 over each
    axis of every kernel size (a dilation that is an int applies to every axis); 1 without one."""
    def axes(v):
        if isinstance(v, bool):
            return []
        if isinstance(v, int):
            return [v]
        if isinstance(v, (list, tuple)) and all(isinstance(x, int) and not isinstance(x, bool) for x in v):
            return list(v)
        return []
    kernels = [axes(v) for k, v in constants.items() if re.search(r"kernel", k, re.I)]
    dilations = [axes(v) for k, v in constants.items() if re.search(r"dilation", k, re.I)] or [[1]]
    widest = 1
    for ks in kernels:
        for ds in dilations:
            for i, k in enumerate(ks):
                if not ds:
                    continue
                d = ds[i] if len(ds) == len(ks) else max(ds)
                widest = max(widest, max(1, d) * (k - 1) + 1)
    return widest


def check_shapes(dims, input_dims, init_dims, inputs, window=1):
    """Scaled-down dims keeping the structure: the largest input near CHECK_ELEMENTS elements.

    Dims that size windows or steps (kernel_size, stride, ...) keep their value; others shrink by
    a common factor, to at least 8 (or their own value when smaller). A spatial extent (a trailing
    axis, past batch and channels, of an input of rank 3 or more, fed by no init argument) keeps
    at least `window`, the widest dilated kernel, so that the module still accepts the check shape. `tail` adds 1 to each dim that
    feeds only input shapes, so kernels meet sizes that are not multiples of anything."""
    scalable = {k for k, v in dims.items() if not STRUCTURAL.search(k) and v > 8}
    # PyTorch's windowed ops take (batch, channels, *spatial): the window bounds the trailing axes.
    spatial = {n for i in inputs if len(i["shape"]) >= 3 for e in i["shape"][2:]
               for n in re.findall(r"[A-Za-z_]\w*", str(e))} & (input_dims - init_dims)

    def scaled(f):
        out = {}
        for k, v in dims.items():
            if k in scalable:
                lo = max(8, window) if k in spatial else 8
                n = max(lo, -(-v // f))
                if v % 8 == 0:
                    n = max(-(-lo // 8) * 8, n - n % 8)
                out[k] = min(v, n)
            else:
                out[k] = v
        return out

    def largest(d):
        best = 1
        for i in inputs:
            n = 1
            for e in i["shape"]:
                n *= max(1, eval_dim(e, d))
            best = max(best, n)
        return best

    f = 1
    small = scaled(f)
    while largest(small) > CHECK_ELEMENTS and f < 1 << 30:
        f *= 2
        nxt = scaled(f)
        if nxt == small and f > 1 << 20:
            break
        small = nxt
    tail = dict(small)
    for k in input_dims - init_dims:
        if k in scalable:
            tail[k] = small[k] + 1 if small[k] % 2 == 0 else small[k]
    shapes = [{"name": "small", "dims": small}]
    if tail != small:
        shapes.append({"name": "tail", "dims": tail})
    return shapes


def eval_dim(expr, d):
    return int(eval(expr.replace("/", "//"), {"__builtins__": {}}, dict(d)))  # noqa: S307 (own grammar)


def level_of(path, text):
    m = re.search(r"level[_ ]?([123])", path)
    return int(m.group(1)) if m else 0


def parse_file(path):
    result = {"file": os.path.abspath(path), "name": re.sub(r"[^A-Za-z0-9_]", "_",
              os.path.splitext(os.path.basename(path))[0])}
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        tree = ast.parse(text, filename=path)
    except (OSError, SyntaxError, ValueError) as e:
        return dict(result, status="failed", reason=f"cannot read or parse: {e}")
    result["level"] = level_of(path, text)
    env = {}
    functions = {}
    cls = None
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                names = [t] if isinstance(t, ast.Name) else list(t.elts) if isinstance(t, ast.Tuple) else []
                try:
                    value = const_eval(stmt.value, env)
                except Unsupported:
                    continue
                if len(names) == 1:
                    env[names[0].id] = value
                elif isinstance(value, (tuple, list)) and len(value) == len(names):
                    for n, v in zip(names, value):
                        env[n.id] = v
        elif isinstance(stmt, ast.FunctionDef):
            functions[stmt.name] = stmt
        elif isinstance(stmt, ast.ClassDef) and stmt.name == "Model":
            cls = stmt
    if cls is None:
        return dict(result, status="failed", reason="no class Model")
    if forward_of(cls) is None:
        return dict(result, status="failed", reason="Model has no forward")
    for fn in ("get_inputs", "get_init_inputs"):
        if fn not in functions:
            return dict(result, status="failed", reason=f"no {fn}()")
    result["class"] = "Model"
    result["constants"] = {k: v for k, v in env.items() if isinstance(v, (int, float, bool, str, list, tuple))}
    dims = {}
    try:
        elements = returned_list(functions["get_inputs"], env)
        inputs = []
        fwd = forward_of(cls)
        arg_names = [a.arg for a in fwd.args.args[1:]]
        for i, e in enumerate(elements):
            try:
                t = tensor_input(e, env, dims)
            except Unsupported:
                # A number (KernelBench's matrix-scalar product passes a float): a scalar input,
                # written as a param of the contract in the forward's position.
                try:
                    v = const_eval(e, env)
                except Unsupported:
                    v = None
                if not isinstance(v, (int, float)) or isinstance(v, bool):
                    raise
                t = {"scalar": float(v)}
            t["name"] = arg_names[i] if i < len(arg_names) else f"input{i}"
            inputs.append(t)
        input_dims = set(dims)
    except Unsupported as e:
        return dict(result, status="needs_gpu_evaluation",
                    reason=f"inputs not found statically ({e}); execute the file on the GPU machine")
    try:
        init_dims_map = {}
        init_args = []
        for e in returned_list(functions["get_init_inputs"], env):
            try:
                init_args.append({"expr": dim_expr(e, env, init_dims_map)})
                continue
            except Unsupported:
                pass
            try:
                # A tuple of sizes (nn.LayerNorm((features, dim1, dim2))): each a dim, so that the
                # check shapes shrink the module with its inputs.
                if not isinstance(e, (ast.Tuple, ast.List)) or not e.elts:
                    raise Unsupported("not a tuple")
                tried = dict(init_dims_map)
                exprs = [dim_expr(x, env, tried) for x in e.elts]
                init_dims_map.update(tried)
                init_args.append({"exprs": exprs})
            except Unsupported:
                v = const_eval(e, env)
                if isinstance(v, tuple):
                    v = list(v)
                init_args.append({"value": v})
        dims.update(init_dims_map)
    except Unsupported as e:
        return dict(result, status="needs_gpu_evaluation",
                    reason=f"init arguments not found statically ({e}); execute the file on the GPU machine")
    for k, v in dims.items():
        if not isinstance(v, int) or v <= 0:
            return dict(result, status="failed", reason=f"dim {k} = {v} is not a positive integer")
    tensors = [i for i in inputs if "scalar" not in i]
    if not tensors:
        return dict(result, status="failed", reason="the forward takes no tensor")
    result.update(status="ok", inputs=inputs, init_args=init_args, dims=dims,
                  check_shapes=check_shapes(dims, input_dims, set(init_dims_map), tensors,
                                               window_extent(env)),
                  degenerate=static_degenerate(cls, tensors),
                  ops=sorted(set(forward_ops(forward_of(cls), submodules(cls)))))
    return result


def parse_file_safely(path):
    """parse_file, with anything a hostile file provokes (deep nesting, huge numbers) failing
    that file alone: the batch goes on."""
    try:
        return parse_file(path)
    except (RecursionError, MemoryError, OverflowError, ValueError, TypeError,
            ZeroDivisionError, Unsupported) as e:
        name = re.sub(r"[^A-Za-z0-9_]", "_", os.path.splitext(os.path.basename(path))[0])
        return {"file": os.path.abspath(path), "name": name, "status": "failed",
                "reason": f"not understood: {type(e).__name__}: {str(e)[:200]}"}


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 64
    out = None
    files = argv[1:]
    if files[0] == "--out":
        if len(files) < 2:
            print("--out needs a file", file=sys.stderr)
            return 64
        out, files = files[1], files[2:]
    text = json.dumps([parse_file_safely(p) for p in files], indent=1, sort_keys=True) + "\n"
    if out is None:
        sys.stdout.write(text)
    else:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
