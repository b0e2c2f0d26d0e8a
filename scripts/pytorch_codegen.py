"""The parts of the PyTorch provider that need no PyTorch: a task's expression turned into a real
Python function (so that TorchDynamo traces it), the classification of a compiled method from
its graph counters, and the order statistics of a sample.

A task's `pytorch` field is a Python expression over its inputs (by name), its params (by name)
and the modules `torch`, `F` (torch.nn.functional) and `math`. `function_source` writes it once
as the body of a `def` whose arguments are the inputs in contract order and whose params are
literals bound inside the body; `module_source` adds the imports and `load_module` writes the
module to a file and imports it, so the function has a file, a code object and line numbers like
any user function and `torch.compile` sees plain tensor code (no `eval` at call time).
"""
import ast
import importlib.util
import math
import os
import re

ALLOWED_MODULES = ("torch", "F", "math")
IDENTIFIER = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


class ExpressionError(ValueError):
    """The task's expression cannot be turned into a function (bad name, syntax, unsafe use)."""


def function_name(task):
    return "kb_task_" + re.sub(r"[^A-Za-z0-9_]", "_", str(task["id"]))


def _validate(task):
    names = [i["name"] for i in task["inputs"]]
    params = [p["name"] for p in task.get("params", [])]
    for n in names + params:
        if not IDENTIFIER.match(n) or n in ALLOWED_MODULES:
            raise ExpressionError(f"task {task['id']}: '{n}' is not usable as an argument name")
    if len(set(names + params)) != len(names) + len(params):
        raise ExpressionError(f"task {task['id']}: an input and a param share a name")
    body = task["pytorch"]
    try:
        tree = ast.parse(body, mode="eval")
    except SyntaxError as e:
        raise ExpressionError(f"task {task['id']}: expression does not parse: {e.msg}") from e
    known = set(names) | set(params) | set(ALLOWED_MODULES)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in known:
            raise ExpressionError(f"task {task['id']}: unknown name '{node.id}' in the expression")
        if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            raise ExpressionError(f"task {task['id']}: private attribute '{node.attr}' in the expression")
        if isinstance(node, (ast.Lambda, ast.NamedExpr, ast.Await, ast.Yield, ast.YieldFrom)):
            raise ExpressionError(f"task {task['id']}: {type(node).__name__} is not allowed in the expression")
    return names, params, body


def function_source(task):
    """The `def` of the task's computation: inputs as arguments, params bound as literals."""
    names, params, body = _validate(task)
    values = {p["name"]: p["value"] for p in task.get("params", [])}
    lines = [f"def {function_name(task)}({', '.join(names)}):"]
    for p in params:
        v = float(values[p])
        if not math.isfinite(v):
            raise ExpressionError(f"task {task['id']}: param {p} = {v} is not finite")
        lines.append(f"    {p} = {v!r}")
    lines.append(f"    return {body}")
    return "\n".join(lines) + "\n"


def module_source(task):
    return ("# Generated from the task contract's `pytorch` expression.\n"
            "import math\n\nimport torch\nimport torch.nn.functional as F\n\n\n" + function_source(task))


def build_function(task, scope):
    """The task's function compiled against `scope` (a dict holding torch, F and math)."""
    code = compile(function_source(task), f"<{function_name(task)}>", "exec")
    namespace = dict(scope)
    exec(code, namespace)  # noqa: S102 (validated expression, compiled once, not called per sample)
    return namespace[function_name(task)]


def load_module(task, folder):
    """Writes the task's module under `folder` and imports it; returns the function."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, function_name(task) + ".py")
    with open(path, "w") as f:
        f.write(module_source(task))
    spec = importlib.util.spec_from_file_location(function_name(task), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, function_name(task))


# ---- compile status ---------------------------------------------------------------------------

def classify_compile(graphs, graph_breaks, break_reasons=()):
    """A compiled method is `compiled` only when Dynamo captured at least one graph and broke
    none: a graph break runs part of the function eagerly and zero graphs means it all ran
    eagerly. Anything else is `not_compiled` and is not a torch.compile figure."""
    record = {"graphs": int(graphs), "graph_breaks": int(graph_breaks),
              "break_reasons": [str(r) for r in break_reasons][:10]}
    if graphs < 1:
        record.update(status="not_compiled", reason="no_graph")
    elif graph_breaks > 0:
        record.update(status="not_compiled", reason="graph_break")
    else:
        record.update(status="compiled", reason="")
    return record


def counters_delta(before, after):
    """Graphs and breaks between two snapshots of torch._dynamo.utils.counters, given as
    {"stats": {...}, "graph_break": {reason: count}} plain dicts."""
    graphs = after.get("stats", {}).get("unique_graphs", 0) - before.get("stats", {}).get("unique_graphs", 0)
    reasons = {k: v - before.get("graph_break", {}).get(k, 0) for k, v in after.get("graph_break", {}).items()}
    reasons = {k: v for k, v in reasons.items() if v > 0}
    return graphs, sum(reasons.values()), sorted(reasons)


# ---- order statistics -------------------------------------------------------------------------

def median(samples):
    x = sorted(samples)
    n = len(x)
    if n == 0:
        raise ValueError("median of no samples")
    return x[n // 2] if n % 2 else 0.5 * (x[n // 2 - 1] + x[n // 2])


def median_ci(samples):
    """Distribution-free 95% interval of the median: order statistics n/2 -+ 0.98 sqrt(n)."""
    x = sorted(samples)
    n = len(x)
    lo = max(0, int(math.floor(n / 2 - 0.98 * math.sqrt(n))))
    hi = min(n - 1, int(math.ceil(n / 2 + 0.98 * math.sqrt(n))))
    return [x[lo], x[hi]]
