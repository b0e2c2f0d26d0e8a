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
        # Peeled from the outside in: the value is scale * inner + shift.
        if isinstance(node.op, ast.Mult):
            scale = scale * k
        elif isinstance(node.op, ast.Div):
            scale = scale / k
        elif isinstance(node.op, ast.Add):
            shift += scale * k
        else:
            shift -= scale * k
        node = inner
    # Peel .cuda(), .to(...), .float(), .contiguous() (innermost call is the generator).
    dtype = "float32"
    cast = None  # the dtype of an explicit cast (.float(), .to(torch.float16)) after the generator
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
            node.func.attr in ("cuda", "to", "float", "half", "contiguous", "bfloat16", "double", "long"):
        if node.func.attr in ("half", "bfloat16", "double", "long", "float"):
            dtype = DTYPES[node.func.attr]
            cast = cast or dtype
        for kw in node.keywords:
            if kw.arg == "dtype":
                dtype = DTYPES.get(call_name(kw.value).split(".")[-1], dtype)
                cast = cast or dtype
        for a in node.args:
            if isinstance(a, ast.Attribute) and a.attr in DTYPES:
                dtype = DTYPES[a.attr]
                cast = cast or dtype
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
        if cast is not None and is_float_dtype(cast):
            # Integers cast to floating point (KernelBench's hinge targets,
            # torch.randint(0, 2, (n,)).float() * 2 - 1): a floating-point input over the same
            # range, since a contract's floating-point inputs take floating-point distributions.
            try:
                lo = shift + scale * float(const_eval(low, env))
                hi = shift + scale * (float(const_eval(high, env)) - 1)
            except Unsupported:
                raise Unsupported(f"randint cast to {cast} with a bound that is not a number: "
                                  f"{ast.unparse(node)}") from None
            out["dtype"] = cast
            out["distribution"] = {"kind": "uniform", "low": min(lo, hi), "high": max(lo, hi)}
            return out
        if (scale, shift) != (1.0, 0.0):
            raise Unsupported(f"integer input scaled or shifted: {ast.unparse(node)}")
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


def check_shapes(dims, input_dims, init_dims, inputs, window=1, pinned=frozenset()):
    """Scaled-down dims keeping the structure: the largest input near CHECK_ELEMENTS elements.

    Dims that size windows or steps (kernel_size, stride, ...) keep their value; others shrink by
    a common factor, to at least 8 (or their own value when smaller). A spatial extent (a trailing
    axis, past batch and channels, of an input of rank 3 or more, fed by no init argument) keeps
    at least `window`, the widest dilated kernel, so that the module still accepts the check shape. `tail` adds 1 to each dim that
    feeds only input shapes, so kernels meet sizes that are not multiples of anything. `pinned`
    dims keep their value (those of an equality the graph assumes, `equal_dims`)."""
    scalable = {k for k, v in dims.items() if not STRUCTURAL.search(k) and v > 8 and k not in pinned}
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
    tuples = {}  # module-level names assigned a tuple literal (bias_shape = (out_channels, 1, 1))
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign):
            for t in stmt.targets:
                if isinstance(t, ast.Name) and isinstance(stmt.value, (ast.Tuple, ast.List)):
                    tuples[t.id] = stmt.value
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
                if isinstance(e, ast.Name) and e.id in tuples and \
                        any(isinstance(x, ast.Name) for x in tuples[e.id].elts):
                    e = tuples[e.id]  # a shape named at module level over dims: its elements as dims
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
    try:
        result["graph"] = forward_graph(cls, env, inputs, init_args, dims)
    except Exception as e:  # noqa: BLE001 (a graph that cannot be read never stops the import)
        result["graph"] = {"version": GRAPH_VERSION, "inputs": [], "state": [], "nodes": [],
                           "outputs": [], "unsupported": [{"op": "?", "reason": "malformed",
                                                           "detail": f"{type(e).__name__}: {e}"}]}
    # Check shapes where an equality the graph assumes fails are made again with its dims kept
    # at their values (a LayerNorm over out_channels of a transposed convolution's output width).
    broken = [d for d in result["graph"].get("equal_dims", [])
              if not all(equal_at(d["dims"], c["dims"]) for c in result["check_shapes"])]
    if broken:
        pinned = {n for d in broken for e in d["dims"] for n in re.findall(r"[A-Za-z_]\w*", e)}
        result["check_shapes"] = check_shapes(dims, input_dims, set(init_dims_map), tensors,
                                              window_extent(env), frozenset(pinned))
    return result


def equal_at(exprs, dims):
    """Whether the expressions have one value at these dims (False where one cannot be read)."""
    try:
        return len({eval_dim(e, dims) for e in exprs}) == 1
    except Exception:  # noqa: BLE001 (not an expression over these dims)
        return False


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
# ---- the forward as a typed op graph ---------------------------------------------------------
# The forward read as a straight line of calls: each node names its op canonically (torch.X,
# torch.nn.functional.X, nn.X for modules with state), its inputs and outputs (value ids with
# shapes as dim expressions and dtypes) and its attributes with PyTorch's defaults made explicit.
# Forms outside that (control flow, unknown calls, in-place updates, shapes that depend on
# values) are recorded in `unsupported` with a reason, and the graph is still written.
GRAPH_VERSION = 1
REQ = object()  # a required argument

# Functions and their positional signatures (name, default). Tensor arguments are the leading
# names listed in TENSOR_ARGS (default 1: the first).
_U = [("input", REQ)]
SIGS = {
    # pointwise, one tensor
    **{f"torch.{n}": _U for n in (
        "sigmoid", "tanh", "relu", "abs", "exp", "log", "sqrt", "rsqrt", "erf", "neg", "selu",
        "square", "sin", "cos", "reciprocal", "log1p", "expm1", "sign", "floor", "ceil",
        "log2", "exp2", "erfc", "trunc", "round", "zeros_like", "ones_like", "contiguous")},
    **{f"torch.nn.functional.{n}": _U + [("inplace", False)] for n in (
        "silu", "mish", "hardswish", "hardsigmoid", "relu6", "selu")},
    "torch.nn.functional.softsign": _U,
    "torch.nn.functional.tanhshrink": _U,
    "torch.nn.functional.logsigmoid": _U,
    "torch.nn.functional.gelu": _U + [("approximate", "none")],
    "torch.nn.functional.elu": _U + [("alpha", 1.0), ("inplace", False)],
    "torch.nn.functional.celu": _U + [("alpha", 1.0), ("inplace", False)],
    "torch.nn.functional.leaky_relu": _U + [("negative_slope", 0.01), ("inplace", False)],
    "torch.nn.functional.hardtanh": _U + [("min_val", -1.0), ("max_val", 1.0), ("inplace", False)],
    "torch.nn.functional.softplus": _U + [("beta", 1.0), ("threshold", 20.0)],
    "torch.nn.functional.threshold": _U + [("threshold", REQ), ("value", REQ), ("inplace", False)],
    "torch.clamp": _U + [("min", None), ("max", None)],
    "torch.pow": _U + [("exponent", REQ)],
    # arithmetic (binary: tensors or numbers)
    "torch.add": [("input", REQ), ("other", REQ), ("alpha", 1)],
    "torch.sub": [("input", REQ), ("other", REQ), ("alpha", 1)],
    "torch.mul": [("input", REQ), ("other", REQ)],
    "torch.div": [("input", REQ), ("other", REQ), ("rounding_mode", None)],
    "torch.maximum": [("input", REQ), ("other", REQ)],
    "torch.minimum": [("input", REQ), ("other", REQ)],
    "torch.where": [("condition", REQ), ("input", REQ), ("other", REQ)],
    # along a dim
    "torch.softmax": _U + [("dim", REQ), ("dtype", None)],
    "torch.log_softmax": _U + [("dim", REQ), ("dtype", None)],
    "torch.cumsum": _U + [("dim", REQ), ("dtype", None)],
    "torch.cumprod": _U + [("dim", REQ), ("dtype", None)],
    # reductions
    "torch.sum": _U + [("dim", None), ("keepdim", False), ("dtype", None)],
    "torch.mean": _U + [("dim", None), ("keepdim", False), ("dtype", None)],
    "torch.prod": _U + [("dim", None), ("keepdim", False), ("dtype", None)],
    "torch.amax": _U + [("dim", None), ("keepdim", False)],
    "torch.amin": _U + [("dim", None), ("keepdim", False)],
    "torch.max": _U + [("dim", None), ("keepdim", False)],
    "torch.min": _U + [("dim", None), ("keepdim", False)],
    "torch.argmax": _U + [("dim", None), ("keepdim", False)],
    "torch.argmin": _U + [("dim", None), ("keepdim", False)],
    "torch.logsumexp": _U + [("dim", REQ), ("keepdim", False)],
    "torch.norm": _U + [("p", "fro"), ("dim", None), ("keepdim", False), ("dtype", None)],
    "torch.var": _U + [("dim", None), ("unbiased", True), ("keepdim", False)],
    "torch.std": _U + [("dim", None), ("unbiased", True), ("keepdim", False)],
    # matrix products and masks
    "torch.matmul": [("input", REQ), ("other", REQ)],
    "torch.mm": [("input", REQ), ("mat2", REQ)],
    "torch.bmm": [("input", REQ), ("mat2", REQ)],
    "torch.einsum": [("equation", REQ)],
    "torch.cat": [("tensors", REQ), ("dim", 0)],
    "torch.triu": _U + [("diagonal", 0)],
    "torch.tril": _U + [("diagonal", 0)],
    "torch.diag": _U + [("diagonal", 0)],
    "torch.transpose": _U + [("dim0", REQ), ("dim1", REQ)],
    "torch.t": _U,
    "torch.flip": _U + [("dims", REQ)],
    "torch.narrow": _U + [("dim", REQ), ("start", REQ), ("length", REQ)],
    "torch.select": _U + [("dim", REQ), ("index", REQ)],
    # norms and losses (functional forms)
    "torch.nn.functional.layer_norm": _U + [("normalized_shape", REQ), ("weight", None),
                                            ("bias", None), ("eps", 1e-5)],
    "torch.nn.functional.normalize": _U + [("p", 2.0), ("dim", 1), ("eps", 1e-12)],
    "torch.nn.functional.mse_loss": [("input", REQ), ("target", REQ), ("size_average", None),
                                     ("reduce", None), ("reduction", "mean")],
    "torch.nn.functional.l1_loss": [("input", REQ), ("target", REQ), ("size_average", None),
                                    ("reduce", None), ("reduction", "mean")],
    "torch.nn.functional.smooth_l1_loss": [("input", REQ), ("target", REQ), ("size_average", None),
                                           ("reduce", None), ("reduction", "mean"), ("beta", 1.0)],
    "torch.nn.functional.huber_loss": [("input", REQ), ("target", REQ), ("reduction", "mean"),
                                       ("delta", 1.0)],
    "torch.nn.functional.kl_div": [("input", REQ), ("target", REQ), ("size_average", None),
                                   ("reduce", None), ("reduction", "mean"), ("log_target", False)],
    "torch.nn.functional.cross_entropy": [("input", REQ), ("target", REQ), ("weight", None),
                                          ("size_average", None), ("ignore_index", -100),
                                          ("reduce", None), ("reduction", "mean"),
                                          ("label_smoothing", 0.0)],
    "torch.nn.functional.cosine_similarity": [("x1", REQ), ("x2", REQ), ("dim", 1), ("eps", 1e-8)],
    "torch.nn.functional.triplet_margin_loss": [("anchor", REQ), ("positive", REQ), ("negative", REQ),
                                                ("margin", 1.0), ("p", 2.0), ("eps", 1e-6),
                                                ("swap", False), ("size_average", None),
                                                ("reduce", None), ("reduction", "mean")],
    "torch.nn.functional.hinge_embedding_loss": [("input", REQ), ("target", REQ), ("margin", 1.0),
                                                 ("size_average", None), ("reduce", None),
                                                 ("reduction", "mean")],
    "torch.nn.functional.scaled_dot_product_attention": [
        ("query", REQ), ("key", REQ), ("value", REQ), ("attn_mask", None), ("dropout_p", 0.0),
        ("is_causal", False), ("scale", None)],
}
TENSOR_ARGS = {
    "torch.add": 2, "torch.sub": 2, "torch.mul": 2, "torch.div": 2, "torch.maximum": 2,
    "torch.minimum": 2, "torch.where": 3, "torch.matmul": 2, "torch.mm": 2, "torch.bmm": 2,
    "torch.nn.functional.mse_loss": 2, "torch.nn.functional.l1_loss": 2,
    "torch.nn.functional.smooth_l1_loss": 2, "torch.nn.functional.huber_loss": 2,
    "torch.nn.functional.kl_div": 2, "torch.nn.functional.cross_entropy": 2,
    "torch.nn.functional.cosine_similarity": 2, "torch.nn.functional.triplet_margin_loss": 3,
    "torch.nn.functional.hinge_embedding_loss": 2,
    "torch.nn.functional.scaled_dot_product_attention": 3,
}
# torch.X spelled elsewhere: F.X / torch.nn.functional.X of these are the torch function.
SAME_AS_TORCH = {"sigmoid", "tanh", "relu", "softmax", "log_softmax", "abs", "exp", "log"}
ALIASES = {"torch.clip": "torch.clamp", "torch.multiply": "torch.mul", "torch.divide": "torch.div",
           "torch.true_divide": "torch.div", "torch.subtract": "torch.sub",
           "torch.nn.functional.silu": "torch.nn.functional.silu", "torch.swapaxes": "torch.transpose",
           "torch.selu": "torch.nn.functional.selu", "torch.relu6": "torch.nn.functional.relu6",
           "torch.nn.functional.sigmoid": "torch.sigmoid", "torch.nn.functional.tanh": "torch.tanh",
           "torch.special.erf": "torch.erf", "torch.absolute": "torch.abs",
           "torch.linalg.norm": "torch.norm"}
# Modules that are a function: nn.X(ctor args) called on tensors -> the functional op.
FUNCTION_MODULES = {
    "ReLU": ("torch.relu", [("inplace", False)]),
    "Sigmoid": ("torch.sigmoid", []),
    "Tanh": ("torch.tanh", []),
    "GELU": ("torch.nn.functional.gelu", [("approximate", "none")]),
    "SiLU": ("torch.nn.functional.silu", [("inplace", False)]),
    "Mish": ("torch.nn.functional.mish", [("inplace", False)]),
    "SELU": ("torch.nn.functional.selu", [("inplace", False)]),
    "Hardswish": ("torch.nn.functional.hardswish", [("inplace", False)]),
    "Hardsigmoid": ("torch.nn.functional.hardsigmoid", [("inplace", False)]),
    "Softsign": ("torch.nn.functional.softsign", []),
    "ReLU6": ("torch.nn.functional.relu6", [("inplace", False)]),
    "LeakyReLU": ("torch.nn.functional.leaky_relu", [("negative_slope", 0.01), ("inplace", False)]),
    "ELU": ("torch.nn.functional.elu", [("alpha", 1.0), ("inplace", False)]),
    "CELU": ("torch.nn.functional.celu", [("alpha", 1.0), ("inplace", False)]),
    "Hardtanh": ("torch.nn.functional.hardtanh", [("min_val", -1.0), ("max_val", 1.0), ("inplace", False)]),
    "Softplus": ("torch.nn.functional.softplus", [("beta", 1.0), ("threshold", 20.0)]),
    "Softmax": ("torch.softmax", [("dim", None)]),
    "LogSoftmax": ("torch.log_softmax", [("dim", None)]),
    "Identity": ("torch.contiguous", []),
    "Dropout": ("torch.nn.functional.dropout", [("p", 0.5), ("inplace", False)]),
    "MSELoss": ("torch.nn.functional.mse_loss", [("size_average", None), ("reduce", None), ("reduction", "mean")]),
    "L1Loss": ("torch.nn.functional.l1_loss", [("size_average", None), ("reduce", None), ("reduction", "mean")]),
    "SmoothL1Loss": ("torch.nn.functional.smooth_l1_loss",
                     [("size_average", None), ("reduce", None), ("reduction", "mean"), ("beta", 1.0)]),
    "HuberLoss": ("torch.nn.functional.huber_loss", [("reduction", "mean"), ("delta", 1.0)]),
    "KLDivLoss": ("torch.nn.functional.kl_div",
                  [("size_average", None), ("reduce", None), ("reduction", "mean"), ("log_target", False)]),
    "CrossEntropyLoss": ("torch.nn.functional.cross_entropy",
                         [("weight", None), ("size_average", None), ("ignore_index", -100), ("reduce", None),
                          ("reduction", "mean"), ("label_smoothing", 0.0)]),
    "CosineSimilarity": ("torch.nn.functional.cosine_similarity", [("dim", 1), ("eps", 1e-8)]),
    "TripletMarginLoss": ("torch.nn.functional.triplet_margin_loss",
                          [("margin", 1.0), ("p", 2.0), ("eps", 1e-6), ("swap", False),
                           ("size_average", None), ("reduce", None), ("reduction", "mean")]),
    "HingeEmbeddingLoss": ("torch.nn.functional.hinge_embedding_loss",
                           [("margin", 1.0), ("size_average", None), ("reduce", None), ("reduction", "mean")]),
}
FUNCTION_SIGS_EXTRA = {"torch.nn.functional.dropout": _U + [("p", 0.5), ("training", True), ("inplace", False)]}
_CONV = [("in_channels", REQ), ("out_channels", REQ), ("kernel_size", REQ), ("stride", 1),
         ("padding", 0), ("dilation", 1), ("groups", 1), ("bias", True), ("padding_mode", "zeros")]
_CONVT = [("in_channels", REQ), ("out_channels", REQ), ("kernel_size", REQ), ("stride", 1),
          ("padding", 0), ("output_padding", 0), ("groups", 1), ("bias", True), ("dilation", 1)]
_MAXPOOL = [("kernel_size", REQ), ("stride", None), ("padding", 0), ("dilation", 1),
            ("return_indices", False), ("ceil_mode", False)]
_AVGPOOL = [("kernel_size", REQ), ("stride", None), ("padding", 0), ("ceil_mode", False),
            ("count_include_pad", True), ("divisor_override", None)]
_BN = [("num_features", REQ), ("eps", 1e-5), ("momentum", 0.1), ("affine", True),
       ("track_running_stats", True)]
_IN = [("num_features", REQ), ("eps", 1e-5), ("momentum", 0.1), ("affine", False),
       ("track_running_stats", False)]
# Modules with state or a window: nn.X -> constructor signature.
STATE_MODULES = {
    "LayerNorm": [("normalized_shape", REQ), ("eps", 1e-5), ("elementwise_affine", True), ("bias", True)],
    "GroupNorm": [("num_groups", REQ), ("num_channels", REQ), ("eps", 1e-5), ("affine", True)],
    "RMSNorm": [("normalized_shape", REQ), ("eps", None), ("elementwise_affine", True)],
    "Linear": [("in_features", REQ), ("out_features", REQ), ("bias", True)],
    **{f"BatchNorm{d}d": _BN for d in (1, 2, 3)},
    **{f"InstanceNorm{d}d": _IN for d in (1, 2, 3)},
    **{f"Conv{d}d": _CONV for d in (1, 2, 3)},
    **{f"ConvTranspose{d}d": _CONVT for d in (1, 2, 3)},
    **{f"MaxPool{d}d": _MAXPOOL for d in (1, 2, 3)},
    **{f"AvgPool{d}d": _AVGPOOL[:5] + ([] if d == 1 else _AVGPOOL[5:]) for d in (1, 2, 3)},
    **{f"Adaptive{k}Pool{d}d": [("output_size", REQ)] for k in ("Avg", "Max") for d in (1, 2, 3)},
}
# Tensor methods that are not the torch function of the same name.
SHAPE_METHODS = {"view", "reshape", "flatten", "unsqueeze", "squeeze", "permute", "transpose",
                 "t", "contiguous", "size", "float", "expand", "expand_as"}


class GraphError(Exception):
    def __init__(self, reason, detail, op=""):
        super().__init__(detail)
        self.reason, self.detail, self.op = reason, detail, op


class Dim:
    """An integer known statically that is also a shape expression (an init argument)."""

    def __init__(self, expr, value):
        self.expr, self.value = expr, value


class Tensor:
    def __init__(self, vid, shape, dtype):
        self.id, self.shape, self.dtype = vid, shape, dtype


class ScalarTensor(float):
    """A 0-d tensor the forward builds from a number (torch.tensor(0.0, device=x.device)): in
    arithmetic and as an operand it is that number, as PyTorch promotes a 0-d tensor like a
    scalar; as the second argument of torch.min/max it is the other tensor, never a dim."""


class Placement:
    """x.device or x.dtype: read only where a constant tensor is built on the forward's device."""

    def __init__(self, what):
        self.what = what


def plain(v):
    """A constant as JSON: Dim -> its value, tuples -> lists."""
    if isinstance(v, Dim):
        return v.value
    if isinstance(v, (tuple, list)):
        return [plain(x) for x in v]
    return v


def expr_of(v):
    if isinstance(v, Dim):
        return v.expr
    if isinstance(v, int) and not isinstance(v, bool):
        return str(v)
    raise GraphError("dynamic_shape", f"size {v!r} is not a dim expression")


def product_factors(expr):
    """A dim expression as the factors of a product at its top level: ("(a * b)" -> [a, b]), with
    its integer factors multiplied into one; None when it is not a product (a sum, a quotient)."""
    e = expr.strip()
    while e.startswith("(") and e.endswith(")") and balanced(e[1:-1]):
        e = e[1:-1].strip()
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(e):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif depth == 0 and ch in "+-/%":
            return None
        elif depth == 0 and ch == "*":
            parts.append(e[start:i].strip())
            start = i + 1
    parts.append(e[start:].strip())
    symbols, number = [], 1
    for f in parts:
        if re.fullmatch(r"\d+", f):
            number *= int(f)
        elif len(parts) > 1:
            inner = product_factors(f)
            if inner is None:
                symbols.append(f)
            else:
                symbols += inner[0]
                number *= inner[1]
        else:
            symbols.append(f)
    return symbols, number


def balanced(e):
    depth = 0
    for ch in e:
        depth += 1 if ch == "(" else -1 if ch == ")" else 0
        if depth < 0:
            return False
    return depth == 0


def remaining_factor(shape, known):
    """The size of a view's -1 dim: the elements of `shape` over the known dims' product, as a dim
    expression, when each known factor cancels one of the shape's (symbolically, and the integers
    divide); None otherwise."""
    have, number = [], 1
    for e in shape:
        f = product_factors(e)
        if f is None:
            f = ([e], 1)
        have += f[0]
        number *= f[1]
    for e in known:
        f = product_factors(e) or ([e], 1)
        for sym in f[0]:
            if sym not in have:
                return None
            have.remove(sym)
        if f[1] == 0 or number % f[1]:
            return None
        number //= f[1]
    factors = have + ([str(number)] if number != 1 or not have else [])
    return factors[0] if len(factors) == 1 else "(" + " * ".join(factors) + ")"


def is_float_dtype(d):
    return d.startswith(("float", "bfloat"))


def bind(sig, args, kwargs, op):
    """Positional and keyword arguments bound to a signature, defaults made explicit."""
    out = {}
    names = [n for n, _ in sig]
    if len(args) > len(sig):
        raise GraphError("unknown_op", f"{op}: {len(args)} positional arguments, at most {len(sig)}", op)
    for (n, _), a in zip(sig, args):
        out[n] = a
    for k, v in kwargs.items():
        if k not in names:
            raise GraphError("unknown_op", f"{op}: unknown argument '{k}'", op)
        out[k] = v
    for n, d in sig:
        if n not in out:
            if d is REQ:
                raise GraphError("malformed", f"{op}: argument '{n}' missing", op)
            out[n] = d
    return out


def norm_dim(d, rank, op):
    d = plain(d)
    if not isinstance(d, int) or isinstance(d, bool):
        raise GraphError("dynamic_shape", f"{op}: dim {d!r} is not an integer constant", op)
    if rank is None:
        return d
    if not -rank <= d < max(rank, 1):
        raise GraphError("malformed", f"{op}: dim {d} out of range for rank {rank}", op)
    return d % rank if rank else 0


def broadcast(a, b, op, g=None):
    """PyTorch's broadcasting of two shapes (trailing axes aligned). Two different expressions
    broadcast when their values are equal at the task's dims (or one of them is 1 there): the
    result takes the first's name and the graph records the assumption (`equal_dims`), which the
    lowering checks at every shape the task declares."""
    out = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else "1"
        y = b[-i] if i <= len(b) else "1"
        if x == y or y == "1":
            out.append(x)
        elif x == "1":
            out.append(y)
        else:
            vx = vy = None
            if g is not None and g.dims is not None:
                try:
                    vx, vy = eval_dim(x, g.dims), eval_dim(y, g.dims)
                except Exception:  # noqa: BLE001 (not an expression over the dims: no value)
                    vx = vy = None
            detail = f"{op}: broadcasting {a} against {b}"
            if vx is None or (vx != vy and vx != 1 and vy != 1):
                raise GraphError("dynamic_shape", f"{detail} needs {x} == {y}", op)
            if vx == vy:
                out.append(x)
                g.assume(op, x, y, detail)
            elif vy == 1:
                out.append(x)
                g.assume(op, y, "1", detail)
            else:
                out.append(y)
                g.assume(op, x, "1", detail)
    return list(reversed(out))


def conv_out(size, k, s, p, d, ceil=False):
    num = f"({size} + {2 * p} - {d * (k - 1)} - 1)"
    if ceil:
        num = f"({num} + {s - 1})"
    return f"({num} / {s} + 1)"


class GraphBuilder:
    def __init__(self, env, dims=None):
        self.env = env
        self.dims = dims  # the task's dims at one shape: the values broadcasting compares
        self.nodes = []
        self.state = []
        self.unsupported = []
        self.equal_dims = []
        self.count = 0

    def assume(self, op, x, y, detail):
        """Broadcasting took dims x and y (or "1") as equal: the lowering checks it at every shape."""
        e = {"op": op, "dims": [x, y], "detail": detail}
        if e not in self.equal_dims:
            self.equal_dims.append(e)

    def fresh(self):
        v = f"v{self.count}"
        self.count += 1
        return v

    def add(self, op, tensors, attrs, out_shapes, out_dtype, module=None, tensor_names=None):
        dtypes = out_dtype if isinstance(out_dtype, list) else [out_dtype] * len(out_shapes)
        outs = [Tensor(self.fresh(), s, d) for s, d in zip(out_shapes, dtypes)]
        node = {"op": op,
                "inputs": [{"value": t.id, "shape": t.shape, "dtype": t.dtype} if isinstance(t, Tensor)
                           else {"const": plain(t)} for t in tensors],
                "outputs": [{"value": t.id, "shape": t.shape, "dtype": t.dtype} for t in outs],
                "attrs": {k: plain(v) for k, v in attrs.items()}}
        if module:
            node["module"] = module
        self.nodes.append(node)
        return outs[0] if len(outs) == 1 else tuple(outs)


def shape_of_op(op, attrs, ts, g):
    """Output shapes and dtype of an op over input tensors ts (Tensors or numbers)."""
    tens = [t for t in ts if isinstance(t, Tensor)]
    x = tens[0] if tens else None
    if x is not None and x.shape is None:
        return [None], x.dtype
    dtype = x.dtype if x is not None else "float32"
    rank = len(x.shape) if x is not None else 0

    def reduced(dims, keepdim):
        if dims is None:
            return [] if not keepdim else ["1"] * rank
        dims = dims if isinstance(dims, (list, tuple)) else [dims]
        ds = {norm_dim(d, rank, op) for d in dims}
        return [("1" if i in ds else e) for i, e in enumerate(x.shape) if keepdim or i not in ds]

    short = op.split(".")[-1]
    if op in ("torch.add", "torch.sub", "torch.mul", "torch.div", "torch.maximum", "torch.minimum",
              "torch.pow", "torch.where"):
        shape = []
        for t in tens:
            shape = broadcast(shape, t.shape, op, g)
        return [shape], dtype
    if short in ("sum", "mean", "prod", "amax", "amin", "logsumexp", "var", "std"):
        return [reduced(attrs.get("dim"), attrs.get("keepdim", False))], dtype
    if short in ("max", "min") and op.startswith("torch."):
        if attrs.get("dim") is None:
            return [[]], dtype
        s = reduced(attrs["dim"], attrs["keepdim"])
        return [s, s], [dtype, "int64"]  # values, indices
    if short in ("argmax", "argmin"):
        return [reduced(attrs.get("dim"), attrs.get("keepdim"))], "int64"
    if op == "torch.norm":
        return [reduced(attrs.get("dim"), attrs.get("keepdim"))], dtype
    if op in ("torch.matmul", "torch.mm", "torch.bmm"):
        a, b = tens[0].shape, tens[1].shape
        if b is None:
            return [None], dtype
        if len(a) == 1 and len(b) == 1:
            return [[]], dtype
        if len(b) == 1:
            return [a[:-1]], dtype
        if len(a) == 1:
            return [b[:-2] + b[-1:]], dtype
        return [broadcast(a[:-2], b[:-2], op, g) + [a[-2], b[-1]]], dtype
    if op == "torch.transpose":
        s = list(x.shape)
        i, j = norm_dim(attrs["dim0"], rank, op), norm_dim(attrs["dim1"], rank, op)
        s[i], s[j] = s[j], s[i]
        return [s], dtype
    if op == "torch.t":
        return [list(reversed(x.shape))], dtype
    if op == "torch.diag":
        return [[x.shape[0], x.shape[0]] if rank == 1 else [x.shape[0]]], dtype
    if op == "torch.nn.functional.cosine_similarity":
        return [reduced(attrs["dim"], False)], dtype
    if op.startswith("torch.nn.functional.") and ("loss" in short or short == "kl_div" or
                                                  short == "cross_entropy"):
        red = attrs.get("reduction", "mean")
        if red == "none":
            return [x.shape if short != "cross_entropy" else [x.shape[0]] + x.shape[2:]], dtype
        return [[]], dtype
    if op == "torch.nn.functional.scaled_dot_product_attention":
        return [x.shape[:-1] + tens[2].shape[-1:]], dtype
    if op == "torch.narrow":
        s = list(x.shape)
        n = attrs["length"]
        s[attrs["dim"]] = n if isinstance(n, str) else expr_of(n)
        return [s], dtype
    if op == "torch.select":
        return [[e for i, e in enumerate(x.shape) if i != attrs["dim"]]], dtype
    return [list(x.shape)], dtype


class ForwardReader:
    """Walks a forward's statements, building the graph."""

    def __init__(self, builder, consts, modules):
        self.g = builder
        self.consts = consts     # self.<attr> -> constant (number, Dim, tuple, str)
        self.modules = modules   # self.<name> -> (type, bound ctor args)
        self.local = {}

    def const(self, node):
        try:
            return const_eval(node, self.env_consts())
        except Unsupported:
            return None

    def env_consts(self):
        env = dict(self.g.env)
        for k, v in self.local.items():
            if not isinstance(v, Tensor):
                env[k] = plain(v)
        return env

    def value(self, node):
        """A Tensor, a constant (number, Dim, str, tuple) or a tuple of them."""
        if isinstance(node, ast.Name):
            if node.id in self.local:
                return self.local[node.id]
            if node.id in self.g.env:
                return self.g.env[node.id]
            raise GraphError("malformed", f"unknown name '{node.id}'")
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == "self":
                if node.attr in self.consts:
                    return self.consts[node.attr]
                if self.modules.get(node.attr, ("",))[0] == "Parameter":
                    return self.parameter(node.attr)
                raise GraphError("malformed", f"self.{node.attr} is not a constant set in __init__")
            if isinstance(node.value, ast.Name) and node.value.id == "math":
                import math as m
                if isinstance(getattr(m, node.attr, None), float):
                    return getattr(m, node.attr)
            base = self.value(node.value)
            if isinstance(base, Tensor) and node.attr in ("T", "mT"):
                return self.call_op("torch.t" if node.attr == "T" else "torch.transpose",
                                    [base] if node.attr == "T" else [base, -2, -1], {})
            if isinstance(base, Tensor) and node.attr in ("device", "dtype"):
                return Placement(node.attr)
            if isinstance(base, Tensor) and node.attr == "shape":
                return tuple(Dim(e, None) for e in base.shape)
            if isinstance(base, tuple) and len(base) == 2 and node.attr in ("values", "indices"):
                return base[0 if node.attr == "values" else 1]  # torch.max(x, dim).values
            raise GraphError("unknown_op", f"attribute .{node.attr} not understood", node.attr)
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(self.value(e) for e in node.elts)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            v = self.value(node.operand)
            if isinstance(v, Tensor):
                return self.call_op("torch.neg", [v], {})
            return -plain(v)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd):
            return self.value(node.operand)
        if isinstance(node, ast.BinOp):
            ops = {ast.Add: "torch.add", ast.Sub: "torch.sub", ast.Mult: "torch.mul",
                   ast.Div: "torch.div", ast.Pow: "torch.pow", ast.MatMult: "torch.matmul"}
            if type(node.op) not in ops:
                raise GraphError("unknown_op", f"operator {ast.unparse(node)} not understood",
                                 type(node.op).__name__)
            a, b = self.value(node.left), self.value(node.right)
            if any(isinstance(v, Dim) and v.value is None for v in (a, b)) and \
                    isinstance(node.op, (ast.Add, ast.Sub, ast.Mult)):
                # A size read from a tensor (x.size(d)) in arithmetic: a shape expression.
                sym = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}[type(node.op)]
                return Dim(f"({expr_of(a)} {sym} {expr_of(b)})", None)
            if not isinstance(a, Tensor) and not isinstance(b, Tensor):
                return BINOPS[type(node.op)](plain(a), plain(b))
            op = ops[type(node.op)]
            if op == "torch.pow":
                return self.call_op(op, [a], {"exponent": b}) if isinstance(a, Tensor) else \
                    self.call_op(op, [a, b], {})
            return self.call_op(op, [a, b], {})
        if isinstance(node, ast.Subscript):
            base = self.value(node.value)
            idx = self.const(node.slice)
            if isinstance(base, tuple) and isinstance(idx, int):
                return base[idx]
            raise GraphError("unknown_op", f"indexing {ast.unparse(node)} not understood", "getitem")
        if isinstance(node, ast.Call):
            return self.call(node)
        raise GraphError("unknown_op", f"expression {ast.unparse(node)[:60]} not understood",
                         type(node).__name__)

    def constant_tensor(self, name, node):
        """torch.tensor(number[, device=..., dtype=float32]): a ScalarTensor. Any other
        constant tensor (a list, another dtype) is not an op the graph knows."""
        if len(node.args) != 1 or isinstance(node.args[0], ast.Starred):
            raise GraphError("unknown_op", f"{name} of anything but one number", name)
        v = plain(self.value(node.args[0]))
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise GraphError("unknown_op", f"{name} of anything but one number", name)
        for k in node.keywords:
            if k.arg == "device":
                if not isinstance(self.value(k.value), (Placement, str)):
                    raise GraphError("unknown_op", f"{name}: device {ast.unparse(k.value)}", name)
            elif k.arg == "dtype":
                if ast.unparse(k.value) not in ("torch.float32", "torch.float", "x.dtype") and \
                        not (isinstance(k.value, ast.Attribute) and k.value.attr == "dtype"):
                    raise GraphError("unknown_op", f"{name}: dtype {ast.unparse(k.value)}", name)
            elif k.arg != "requires_grad":
                raise GraphError("unknown_op", f"{name}: argument {k.arg}", name)
        return ScalarTensor(v)

    def parameter(self, name):
        """The module's own nn.Parameter `name` as a state tensor (state_<name>, as the task's
        state inputs are named from state_dict keys)."""
        vid = "state_" + re.sub(r"[^A-Za-z0-9_]", "_", name)
        shape = self.modules[name][1]["shape"]
        if not any(s["value"] == vid for s in self.g.state):
            self.g.state.append({"value": vid, "module": "", "name": name, "shape": shape,
                                 "dtype": "float32"})
        return Tensor(vid, list(shape), "float32")

    def call(self, node):
        name = call_name(node.func)
        if name in ("torch.tensor", "torch.as_tensor", "torch.scalar_tensor"):
            return self.constant_tensor(name, node)
        args = [self.value(a) for a in node.args if not isinstance(a, ast.Starred)]
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise GraphError("unknown_op", f"starred arguments in {name}", name)
        kwargs = {k.arg: self.value(k.value) for k in node.keywords if k.arg}
        if name.startswith("self.") and name.count(".") == 2 and \
                self.modules.get(name.split(".")[1], ("",))[0] == "Parameter":
            return self.method(self.parameter(name.split(".")[1]), name.split(".")[2], args, kwargs)
        if name.startswith("self."):
            mod = name[len("self."):]
            if mod not in self.modules:
                raise GraphError("unknown_op", f"self.{mod} is not a module built in __init__", name)
            return self.call_module(mod, args, kwargs)
        if name.startswith("math."):
            import math as m
            f = getattr(m, name[5:], None)
            if f is None or any(isinstance(a, Tensor) for a in args):
                raise GraphError("unknown_op", f"{name} not understood", name)
            return f(*[plain(a) for a in args])
        if isinstance(node.func, ast.Attribute) and not name.startswith(("torch.", "F.", "nn.")):
            base = self.value(node.func.value)
            if isinstance(base, Tensor):
                return self.method(base, node.func.attr, args, kwargs)
        pool = re.fullmatch(r"(?:F|torch\.nn\.functional|nn\.functional)\.adaptive_(avg|max)_pool([123])d", name)
        if pool and args and isinstance(args[0], Tensor):
            # The functional form reads as the module nn.Adaptive{Avg,Max}Pool<n>d would.
            size = args[1] if len(args) > 1 else kwargs.get("output_size")
            mod = f"adaptive_pool_{len(self.g.nodes)}"
            self.modules[mod] = (f"Adaptive{pool.group(1).capitalize()}Pool{pool.group(2)}d",
                                 {"output_size": size})
            return self.call_module(mod, [args[0]], {})
        op = canonical(name)
        if op is None:
            raise GraphError("unknown_op", f"{name} is not an op the graph knows", name)
        return self.call_op(op, args, kwargs)

    def method(self, x, m, args, kwargs):
        if m.endswith("_") and not m.startswith("_"):
            raise GraphError("inplace", f"in-place tensor method .{m}()", "torch." + m)
        if m == "size":
            if args:
                return Dim(x.shape[norm_dim(args[0], len(x.shape), "size")], None)
            return tuple(Dim(e, None) for e in x.shape)
        if m in ("contiguous", "float", "clone", "detach") and x.dtype == "float32" or m in ("contiguous", "detach"):
            return x
        if m in ("view", "reshape", "flatten", "unsqueeze", "squeeze", "permute", "transpose", "t",
                 "expand", "expand_as"):
            return self.shape_op(x, m, args, kwargs)
        op = canonical("torch." + m)
        if op is None:
            raise GraphError("unknown_op", f"tensor method .{m}() is not an op the graph knows", "torch." + m)
        return self.call_op(op, [x] + args, kwargs)

    def shape_op(self, x, m, args, kwargs):
        if m == "transpose":
            return self.call_op("torch.transpose", [x] + args, kwargs)
        if m == "t":
            return self.call_op("torch.t", [x], {})
        rank = len(x.shape)
        if m in ("view", "reshape"):
            dims = args[0] if len(args) == 1 and isinstance(args[0], tuple) else args
            out, minus = [], None
            for i, d in enumerate(dims):
                if plain(d) == -1 and not isinstance(d, Dim):
                    minus = i
                    out.append(None)
                else:
                    out.append(d.expr if isinstance(d, Dim) else expr_of(d))
            if minus is not None:
                known = [e for e in out if e is not None]
                if out[:minus] == x.shape[:minus] and minus == len(out) - 1:
                    tail = x.shape[minus:]
                    rest = tail[0] if len(tail) == 1 else "(" + " * ".join(tail) + ")"
                else:
                    rest = remaining_factor(x.shape, known)
                if rest is None:
                    raise GraphError("dynamic_shape", f".{m}({known}, -1) of {x.shape}", "torch.reshape")
                out[minus] = rest
            return self.g.add("torch.reshape", [x], {"shape": out}, [out], x.dtype)
        if m == "flatten":
            start = norm_dim(args[0] if args else kwargs.get("start_dim", 0), rank, "flatten")
            end = norm_dim(args[1] if len(args) > 1 else kwargs.get("end_dim", -1), rank, "flatten")
            mid = x.shape[start:end + 1]
            out = x.shape[:start] + [mid[0] if len(mid) == 1 else "(" + " * ".join(mid) + ")"] + x.shape[end + 1:]
            return self.g.add("torch.reshape", [x], {"shape": out}, [out], x.dtype)
        if m == "unsqueeze":
            d = norm_dim(args[0] if args else kwargs["dim"], rank + 1, "unsqueeze")
            out = x.shape[:d] + ["1"] + x.shape[d:]
            return self.g.add("torch.reshape", [x], {"shape": out}, [out], x.dtype)
        if m == "squeeze":
            if args:
                d = norm_dim(args[0], rank, "squeeze")
                out = [e for i, e in enumerate(x.shape) if not (i == d and e == "1")]
            else:
                out = [e for e in x.shape if e != "1"]
            return self.g.add("torch.reshape", [x], {"shape": out}, [out], x.dtype)
        if m == "permute":
            perm = args[0] if len(args) == 1 and isinstance(args[0], tuple) else args
            perm = [norm_dim(p, rank, "permute") for p in perm]
            out = [x.shape[p] for p in perm]
            return self.g.add("torch.permute", [x], {"dims": perm}, [out], x.dtype)
        raise GraphError("unknown_op", f".{m}() not understood", "torch." + m)

    def call_op(self, op, args, kwargs):
        if op in ("torch.min", "torch.max"):
            # torch.min(x, other) with a tensor (a 0-d one included) is the elementwise minimum.
            other = args[1] if len(args) > 1 else kwargs.get("other")
            if isinstance(other, (Tensor, ScalarTensor)) and len(args) <= 2 and \
                    set(kwargs) <= {"other"}:
                return self.call_op("torch.minimum" if op == "torch.min" else "torch.maximum",
                                    [args[0], other], {})
        if op == "torch.einsum":
            return self.einsum(args, kwargs)
        if op == "torch.cat":
            return self.cat(args, kwargs)
        sig = SIGS.get(op) or FUNCTION_SIGS_EXTRA.get(op)
        if sig is None:
            raise GraphError("unknown_op", f"{op} is not an op the graph knows", op)
        if plain(kwargs.get("inplace")) is True:
            raise GraphError("inplace", f"{op}(..., inplace=True)", op)
        kwargs = {k: v for k, v in kwargs.items() if k != "inplace" or "inplace" in dict(sig)}
        b = bind(sig, args, kwargs, op)
        if op == "torch.narrow":
            b["length"] = expr_of(b["length"])  # kept as the shape expression it is
        if b.get("inplace") is True:
            raise GraphError("inplace", f"{op}(..., inplace=True)", op)
        n = TENSOR_ARGS.get(op, 1)
        names = [nm for nm, _ in sig[:n]]
        tensors = [b.pop(nm) for nm in names]
        if not any(isinstance(t, Tensor) for t in tensors):
            raise GraphError("malformed", f"{op} on no tensor", op)
        for k, v in list(b.items()):
            if isinstance(v, Tensor):
                tensors.append(v)
                b[k] = {"input": len(tensors) - 1}
        if "dim" in b and b["dim"] is not None and op not in ("torch.nn.functional.cosine_similarity",):
            x = next(t for t in tensors if isinstance(t, Tensor))
            rank = len(x.shape) if x.shape is not None else None
            d = b["dim"]
            b["dim"] = [norm_dim(e, rank, op) for e in d] if isinstance(d, (tuple, list)) \
                else norm_dim(d, rank, op)
        elif op == "torch.nn.functional.cosine_similarity":
            b["dim"] = norm_dim(b["dim"], len(tensors[0].shape), op)
        floats = {t.dtype for t in tensors if isinstance(t, Tensor) and is_float_dtype(t.dtype)}
        if len(floats) > 1:
            raise GraphError("mixed_dtype", f"{op} over {sorted(floats)}", op)
        shapes, dtype = shape_of_op(op, b, tensors, self.g)
        return self.g.add(op, tensors, b, shapes, dtype)

    def einsum(self, args, kwargs):
        """torch.einsum(equation, a, b): an explicit equation over two tensors (the output's axes
        named after '->'); the output shape follows from the operands' axes."""
        op = "torch.einsum"
        eq = plain(args[0]) if args else None
        ops = list(args[1:])
        if len(ops) == 1 and isinstance(ops[0], (list, tuple)):
            ops = list(ops[0])
        if kwargs or not isinstance(eq, str) or len(ops) != 2 or \
                not all(isinstance(t, Tensor) and t.shape is not None for t in ops):
            raise GraphError("unknown_op", "torch.einsum: only an equation over two tensors", op)
        eq = eq.replace(" ", "")
        if "->" not in eq or "..." in eq or eq.count(",") != 1:
            raise GraphError("unknown_op", f"torch.einsum '{eq}': an explicit output and no '...'", op)
        lhs, rhs = eq.split("->")
        subs = lhs.split(",")
        axes = {}
        for sub, t in zip(subs, ops):
            if len(sub) != len(t.shape):
                raise GraphError("malformed", f"torch.einsum '{eq}': {sub} over a tensor of rank {len(t.shape)}", op)
            for c, e in zip(sub, t.shape):
                axes.setdefault(c, e)
        if any(c not in axes for c in rhs):
            raise GraphError("malformed", f"torch.einsum '{eq}': an output axis no operand has", op)
        floats = {t.dtype for t in ops if is_float_dtype(t.dtype)}
        if len(floats) > 1:
            raise GraphError("mixed_dtype", f"{op} over {sorted(floats)}", op)
        return self.g.add(op, ops, {"equation": eq}, [[axes[c] for c in rhs]], ops[0].dtype)

    def cat(self, args, kwargs):
        """torch.cat((a, b, ...), dim): tensors of one rank joined along dim."""
        op = "torch.cat"
        b = bind([("tensors", REQ), ("dim", 0)], args, kwargs, op)
        ts = b["tensors"]
        if not isinstance(ts, (tuple, list)) or not ts or \
                not all(isinstance(t, Tensor) and t.shape is not None for t in ts):
            raise GraphError("unknown_op", "torch.cat of something other than a list of tensors", op)
        rank = len(ts[0].shape)
        if any(len(t.shape) != rank for t in ts):
            raise GraphError("malformed", "torch.cat of tensors of different ranks", op)
        d = norm_dim(b["dim"], rank, op)
        floats = {t.dtype for t in ts if is_float_dtype(t.dtype)}
        if len(floats) > 1:
            raise GraphError("mixed_dtype", f"{op} over {sorted(floats)}", op)
        shape = list(ts[0].shape)
        shape[d] = "(" + " + ".join(t.shape[d] for t in ts) + ")"
        return self.g.add(op, list(ts), {"dim": d}, [shape], ts[0].dtype)

    def call_module(self, mod, args, kwargs):
        kind, ctor = self.modules[mod]
        if kind in FUNCTION_MODULES:
            op, sig = FUNCTION_MODULES[kind]
            sig_names = [n for n, _ in SIGS.get(op, FUNCTION_SIGS_EXTRA.get(op, []))]
            n = TENSOR_ARGS.get(op, 1)
            kw = dict(kwargs)
            for k, v in ctor.items():
                if k in sig_names:
                    kw[k] = v
            if ctor.get("inplace") is True:
                raise GraphError("inplace", f"nn.{kind}(inplace=True)", op)
            out = self.call_op(op, args[:n], kw)
            self.g.nodes[-1]["module"] = mod
            return out
        if kind not in STATE_MODULES:
            raise GraphError("unknown_op", f"nn.{kind} is not a module the graph knows", "nn." + kind)
        if len(args) != 1 or not isinstance(args[0], Tensor):
            raise GraphError("malformed", f"nn.{kind} called on {len(args)} arguments", "nn." + kind)
        x = args[0]
        if x.shape is None:
            raise GraphError("dynamic_shape", f"nn.{kind} on a tensor of unknown shape", "nn." + kind)
        c = ctor
        rank = len(x.shape)
        state = []

        def add_state(name, shape, dtype=None):
            t = Tensor("state_" + re.sub(r"[^A-Za-z0-9_]", "_", f"{mod}.{name}"), shape, dtype or x.dtype)
            self.g.state.append({"value": t.id, "module": mod, "name": name, "shape": shape,
                                 "dtype": t.dtype})
            state.append(t)

        spatial = x.shape[2:]
        out = list(x.shape)
        if kind == "LayerNorm" or kind == "RMSNorm":
            ns = c["normalized_shape"]
            ns = list(ns) if isinstance(ns, tuple) else [ns]
            shape = [expr_of(e) for e in ns]
            if len(shape) > rank:
                raise GraphError("dynamic_shape", f"nn.{kind}{shape} over {x.shape}", "nn." + kind)
            # A normalized dim written as another expression of equal value at the task's dims
            # (out_channels against a transposed convolution's output width): the graph records
            # the assumption, which the lowering checks at every shape, as broadcasting does.
            for have, want in zip(x.shape[rank - len(shape):], shape):
                if have != want:
                    if self.g.dims is None or not equal_at([have, want], self.g.dims):
                        raise GraphError("dynamic_shape", f"nn.{kind}{shape} over {x.shape}",
                                         "nn." + kind)
                    self.g.assume("nn." + kind, have, want,
                                  f"nn.{kind}{shape} over {x.shape}")
            if c["elementwise_affine"]:
                add_state("weight", shape)
                if kind == "LayerNorm" and c.get("bias", True):
                    add_state("bias", shape)
        elif kind.startswith(("BatchNorm", "InstanceNorm")):
            C = [expr_of(c["num_features"])]
            if c["affine"]:
                add_state("weight", C)
                add_state("bias", C)
            # Both normalize by the statistics of their input, as KernelBench's training-mode
            # forward does: the running statistics are removed (pytorch_oracle.batch_statistics),
            # so they are no state.
        elif kind == "GroupNorm":
            if c["affine"]:
                add_state("weight", [expr_of(c["num_channels"])])
                add_state("bias", [expr_of(c["num_channels"])])
        elif kind == "Linear":
            add_state("weight", [expr_of(c["out_features"]), expr_of(c["in_features"])])
            if c["bias"]:
                add_state("bias", [expr_of(c["out_features"])])
            out = x.shape[:-1] + [expr_of(c["out_features"])]
        elif kind.startswith("Adaptive"):
            nd = int(kind[-2])
            if len(spatial) != nd:
                raise GraphError("dynamic_shape", f"nn.{kind} over {x.shape}", "nn." + kind)
            size = plain(c["output_size"])
            size = list(size) if isinstance(size, (list, tuple)) else [size] * nd
            if len(size) != nd or any(not isinstance(v, int) and v is not None for v in size):
                raise GraphError("dynamic_shape", f"nn.{kind} output_size {size}", "nn." + kind)
            c = dict(c, output_size=[v if v is not None else -1 for v in size])
            out = x.shape[:2] + [e if v is None else str(v) for e, v in zip(spatial, size)]
        elif kind.startswith(("Conv", "MaxPool", "AvgPool")):
            nd = int(kind[-2])
            if len(spatial) != nd:
                raise GraphError("dynamic_shape", f"nn.{kind} over {x.shape}", "nn." + kind)

            def per(v, dflt=None):
                v = plain(v if v is not None else dflt)
                return list(v) if isinstance(v, (list, tuple)) else [v] * nd
            k = per(c["kernel_size"])
            s = per(c.get("stride"), c["kernel_size"]) if kind.startswith(("Max", "Avg")) else per(c["stride"])
            p = per(c["padding"])
            d = per(c.get("dilation", 1))
            if any(isinstance(e, str) for e in p):
                raise GraphError("dynamic_shape", f"nn.{kind} padding {p}", "nn." + kind)
            if kind.startswith("ConvTranspose"):
                op_ = per(c["output_padding"])
                sp = [f"(({e} - 1) * {si} - {2 * pi} + {di * (ki - 1)} + {oi} + 1)"
                      for e, si, pi, di, ki, oi in zip(spatial, s, p, d, k, op_)]
            else:
                sp = [conv_out(e, ki, si, pi, di, c.get("ceil_mode", False))
                      for e, si, pi, di, ki in zip(spatial, s, p, d, k)]
            if kind.startswith("Conv"):
                cin, cout, groups = expr_of(c["in_channels"]), expr_of(c["out_channels"]), plain(c["groups"])
                if kind.startswith("ConvTranspose"):
                    add_state("weight", [cin, f"({cout} / {groups})" if groups != 1 else cout] + [str(e) for e in k])
                else:
                    add_state("weight", [cout, f"({cin} / {groups})" if groups != 1 else cin] + [str(e) for e in k])
                if c["bias"]:
                    add_state("bias", [cout])
                out = x.shape[:1] + [cout] + sp
            else:
                out = x.shape[:2] + sp
        attrs = {k: v for k, v in c.items()}
        if kind.startswith(("MaxPool", "AvgPool")) and attrs.get("stride") is None:
            attrs["stride"] = attrs["kernel_size"]  # PyTorch's default: the window
        return self.g.add("nn." + kind, [x] + state, attrs, [out], x.dtype, module=mod)


def canonical(name):
    """The canonical op name of a call's dotted name, or None for one the graph does not know."""
    parts = name.split(".")
    short = parts[-1]
    if name.startswith(("F.", "torch.nn.functional.", "nn.functional.")):
        op = "torch." + short if short in SAME_AS_TORCH else "torch.nn.functional." + short
    elif name.startswith("torch."):
        op = "torch." + ".".join(parts[1:])
    else:
        return None
    op = ALIASES.get(op, op)
    if op in SIGS or op in FUNCTION_SIGS_EXTRA:
        return op
    if op.startswith("torch.") and "torch.nn.functional." + short in SIGS:
        return "torch.nn.functional." + short
    return None


TENSOR_MAKERS = {"randn", "rand", "ones", "zeros", "empty", "full", "tensor"}


def parameter_shape(call, val):
    """The shape (dim expressions) of nn.Parameter(torch.randn(shape) [* k]), torch.ones(a, b),
    torch.zeros(...), torch.full(shape, v) or torch.tensor(number); None for anything else."""
    if not call.args:
        return None
    inner = call.args[0]
    while isinstance(inner, ast.BinOp) and isinstance(inner.op, (ast.Mult, ast.Div, ast.Add, ast.Sub)):
        inner = inner.left if isinstance(inner.left, ast.Call) else inner.right
    if not isinstance(inner, ast.Call) or call_name(inner.func).split(".")[-1] not in TENSOR_MAKERS:
        return None
    maker = call_name(inner.func).split(".")[-1]
    try:
        if maker == "tensor":
            v = val(inner.args[0]) if inner.args else None
            return [] if isinstance(plain(v), (int, float)) and not isinstance(plain(v), bool) else None
        args = inner.args[:1] if maker == "full" else inner.args
        dims = [val(a) for a in args if not isinstance(a, ast.Starred)]
        if len(dims) == 1 and isinstance(dims[0], tuple):
            dims = list(dims[0])
        return [expr_of(d) for d in dims]
    except (Unsupported, GraphError, KeyError, TypeError):
        return None


def init_bindings(cls, init_args, env, dims):
    """__init__'s parameters bound to get_init_inputs() (Dims for dim expressions), then the
    self.<attr> constants and self.<name> = nn.<Module>(...) modules it sets."""
    init = next((i for i in cls.body if isinstance(i, ast.FunctionDef) and i.name == "__init__"), None)
    params = {}
    if init is not None:
        a = init.args
        names = [x.arg for x in a.args[1:]]
        defaults = [None] * (len(names) - len(a.defaults)) + list(a.defaults)
        for i, n in enumerate(names):
            if i < len(init_args):
                ia = init_args[i]
                if "expr" in ia:
                    params[n] = Dim(ia["expr"], eval_dim(ia["expr"], dims))
                elif "exprs" in ia:
                    params[n] = tuple(Dim(e, eval_dim(e, dims)) for e in ia["exprs"])
                else:
                    params[n] = tuple(ia["value"]) if isinstance(ia["value"], list) else ia["value"]
            elif defaults[i] is not None:
                d = defaults[i]
                params[n] = None if isinstance(d, ast.Constant) and d.value is None else const_eval(d, env)
    consts, modules = {}, {}
    if init is None:
        return consts, modules

    def val(node):
        if isinstance(node, ast.Constant) and node.value is None:
            return None
        if isinstance(node, ast.Name) and node.id in params:
            return params[node.id]
        if isinstance(node, (ast.Tuple, ast.List)):
            return tuple(val(e) for e in node.elts)
        e = dict(env)
        e.update({k: plain(v) for k, v in params.items()})
        return const_eval(node, e)

    for stmt in init.body:
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
            continue
        t = stmt.targets[0]
        if not (isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"):
            continue
        v = stmt.value
        if isinstance(v, ast.Call) and call_name(v.func).split(".")[-1] == "Parameter":
            shape = parameter_shape(v, val)
            if shape is not None:
                modules[t.attr] = ("Parameter", {"shape": shape})
            continue
        if isinstance(v, ast.Call):
            kind = call_name(v.func).split(".")[-1]
            if kind in FUNCTION_MODULES or kind in STATE_MODULES:
                sig = FUNCTION_MODULES[kind][1] if kind in FUNCTION_MODULES else STATE_MODULES[kind]
                try:
                    ctor = bind(sig, [val(a) for a in v.args],
                                {k.arg: val(k.value) for k in v.keywords}, "nn." + kind)
                except (Unsupported, GraphError):
                    continue
                modules[t.attr] = (kind, ctor)
                continue
            modules[t.attr] = (kind, {})
            continue
        try:
            consts[t.attr] = val(v)
        except Unsupported:
            pass
    return consts, modules


def forward_graph(cls, env, inputs, init_args, dims):
    """The forward's typed op graph (docs/task-format.md, "The op graph")."""
    b = GraphBuilder(dict(env), dict(dims))
    graph = {"version": GRAPH_VERSION, "inputs": [], "state": [], "nodes": [], "outputs": [],
             "unsupported": []}
    fwd = forward_of(cls)
    try:
        consts, modules = init_bindings(cls, init_args, env, dims)
    except (Unsupported, GraphError) as e:
        graph["unsupported"].append({"op": "__init__", "reason": "malformed", "detail": str(e)})
        return graph
    reader = ForwardReader(b, consts, modules)
    arg_names = [a.arg for a in fwd.args.args[1:]]
    for i, spec in enumerate(inputs):
        name = arg_names[i] if i < len(arg_names) else spec["name"]
        if "scalar" in spec:
            reader.local[name] = spec["scalar"]
            graph["inputs"].append({"value": name, "kind": "scalar", "scalar": spec["scalar"]})
        else:
            reader.local[name] = Tensor(name, list(spec["shape"]), spec["dtype"])
            graph["inputs"].append({"value": name, "kind": "tensor", "shape": list(spec["shape"]),
                                    "dtype": spec["dtype"]})
    result = None
    for stmt in fwd.body:
        try:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                continue  # docstring
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                reader.local[stmt.targets[0].id] = reader.value(stmt.value)
            elif isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and \
                    isinstance(stmt.targets[0], ast.Tuple):
                v = reader.value(stmt.value)
                for t, x in zip(stmt.targets[0].elts, v):
                    reader.local[t.id] = x
            elif isinstance(stmt, ast.AugAssign):
                raise GraphError("inplace", f"in-place update {ast.unparse(stmt)[:60]}",
                                 type(stmt.op).__name__)
            elif isinstance(stmt, ast.Return):
                result = reader.value(stmt.value)
                break
            else:
                raise GraphError("construct", f"statement not a straight line of calls: "
                                              f"{ast.unparse(stmt).splitlines()[0][:60]}", type(stmt).__name__)
        except GraphError as e:
            graph["unsupported"].append({"op": e.op or "?", "reason": e.reason, "detail": e.detail})
            break
        except (Unsupported, KeyError, IndexError, TypeError, ValueError, ZeroDivisionError) as e:
            graph["unsupported"].append({"op": "?", "reason": "malformed", "detail": f"{type(e).__name__}: {e}"})
            break
    graph["state"] = b.state
    graph["nodes"] = b.nodes
    if b.equal_dims:
        graph["equal_dims"] = b.equal_dims
    if not graph["unsupported"]:
        results = result if isinstance(result, tuple) else (result,)
        for r in results:
            if not isinstance(r, Tensor):
                graph["unsupported"].append({"op": "return", "reason": "malformed",
                                             "detail": "the forward does not return tensors"})
                break
            graph["outputs"].append({"value": r.id, "shape": r.shape, "dtype": r.dtype})
    return graph


def graph_of_file(path, inputs, init_args, dims):
    """The op graph of a problem file for inputs, init args and dims found another way (the
    executed file: scripts/pytorch_oracle.py resolve). Never raises: a file that cannot be read
    gives a graph whose `unsupported` says why."""
    empty = {"version": GRAPH_VERSION, "inputs": [], "state": [], "nodes": [], "outputs": []}
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), filename=path)
        env, cls = {}, None
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                try:
                    env[stmt.targets[0].id] = const_eval(stmt.value, env)
                except Unsupported:
                    pass
            elif isinstance(stmt, ast.ClassDef) and stmt.name == "Model":
                cls = stmt
        if cls is None or forward_of(cls) is None:
            return dict(empty, unsupported=[{"op": "?", "reason": "malformed", "detail": "no Model.forward"}])
        env.update(dims)
        # The executed file's dims are one per input axis (in0_1, in1_1) at one shape: equal
        # sizes get one name, so that the graph sees which axes match (broadcasting, losses).
        first = {}
        for k in sorted(dims, key=lambda n: (not re.match(r"in\d+_\d+$", n), n)):
            first.setdefault(dims[k], k)
        canon = [dict(i, shape=[first.get(dims.get(e), e) if e in dims else e for e in i["shape"]])
                 if "shape" in i else i for i in inputs]
        return forward_graph(cls, env, canon, init_args, dims)
    except Exception as e:  # noqa: BLE001 (a graph that cannot be read never stops the import)
        return dict(empty, unsupported=[{"op": "?", "reason": "malformed", "detail": f"{type(e).__name__}: {e}"}])


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
