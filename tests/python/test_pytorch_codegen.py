"""CPU tests of the PyTorch provider's code generation and compile classification (no torch).

Every task contract's expression is turned into a function and called with symbolic stand-ins
for torch, F and the inputs: the recorded call tree must be the expression with the inputs as
the arguments and the params as their values, and the function must not evaluate text at call
time. Run: python3 -m unittest discover -s tests/python (from the repository root).
"""
import ast
import glob
import math
import os
import sys
import tempfile
import tomllib
import types
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import pytorch_codegen as cg  # noqa: E402


class Sym:
    """A value that records the operations applied to it as text."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return self.text

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return Sym(f"{self.text}.{name}")

    def __call__(self, *args, **kwargs):
        parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
        return Sym(f"{self.text}({', '.join(parts)})")

    def __getitem__(self, key):
        return Sym(f"{self.text}[{key!r}]")

    def _bin(op, swap=False):
        def f(self, other):
            a, b = (other, self) if swap else (self, other)
            return Sym(f"({a!r} {op} {b!r})")
        return f

    __add__, __radd__ = _bin("+"), _bin("+", True)
    __sub__, __rsub__ = _bin("-"), _bin("-", True)
    __mul__, __rmul__ = _bin("*"), _bin("*", True)
    __truediv__, __rtruediv__ = _bin("/"), _bin("/", True)
    __pow__, __rpow__ = _bin("**"), _bin("**", True)
    __matmul__ = _bin("@")

    def __neg__(self):
        return Sym(f"(-{self.text})")


def fake_scope():
    torch = Sym("torch")
    return {"torch": torch, "F": Sym("F"), "math": math}


def contracts():
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "tasks", "*", "*", "task.toml"))):
        with open(path, "rb") as f:
            out.append(tomllib.load(f))
    return out


class GeneratedFunctions(unittest.TestCase):
    def test_every_task_expression_becomes_a_plain_function(self):
        tasks = contracts()
        self.assertGreaterEqual(len(tasks), 13)
        for task in tasks:
            with self.subTest(task=task["id"]):
                src = cg.function_source(task)
                tree = ast.parse(src)
                self.assertEqual(len(tree.body), 1)
                fn = tree.body[0]
                self.assertIsInstance(fn, ast.FunctionDef)
                self.assertEqual([a.arg for a in fn.args.args], [i["name"] for i in task["inputs"]])
                calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
                self.assertFalse(calls & {"eval", "exec", "compile", "__import__"}, src)
                # The body's last statement is the contract's expression, unchanged.
                self.assertEqual(ast.dump(fn.body[-1].value), ast.dump(ast.parse(task["pytorch"], mode="eval").body))

    def test_calls_trace_the_expression_with_params_bound(self):
        by_id = {t["id"]: t for t in contracts()}
        f = cg.build_function(by_id["019"], fake_scope())
        self.assertEqual(repr(f(Sym("x"))), "torch.relu(x)")
        f = cg.build_function(by_id["036"], fake_scope())
        self.assertEqual(repr(f(Sym("x"))), "(x / torch.sqrt((torch.mean((x ** 2), dim=1, keepdim=True) + 1e-05)))")
        f = cg.build_function(by_id["040"], fake_scope())
        self.assertEqual(repr(f(Sym("x"), Sym("w"), Sym("b"))),
                         "torch.nn.functional.layer_norm(x, x.shape[slice(1, None, None)], w, b, 1e-05)")
        f = cg.build_function(by_id["101"], fake_scope())
        self.assertEqual(repr(f(Sym("x"), Sym("w"))),
                         "torch.nn.functional.rms_norm(x, (x.shape[-1],), w, 1e-06)")
        f = cg.build_function(by_id["088"], fake_scope())
        self.assertIn(repr(math.sqrt(2.0 / math.pi)), repr(f(Sym("x"))))

    def test_module_file_is_importable(self):
        task = {"id": "t1", "inputs": [{"name": "a"}, {"name": "b"}], "params": [{"name": "k", "value": 2}],
                "pytorch": "a * k + torch.relu(b)"}
        self.assertIn("import torch", cg.module_source(task))
        fn = cg.build_function(task, {"torch": Sym("torch"), "F": None, "math": math})
        self.assertEqual(repr(fn(Sym("a"), Sym("b"))), "((a * 2.0) + torch.relu(b))")
        # The written module imports torch; a stand-in module takes its place here.
        fake = types.ModuleType("torch")
        fake.relu = lambda v: max(v, 0)
        fake.nn = types.ModuleType("torch.nn")
        fake.nn.functional = types.ModuleType("torch.nn.functional")
        saved = {k: sys.modules.get(k) for k in ("torch", "torch.nn", "torch.nn.functional")}
        sys.modules.update({"torch": fake, "torch.nn": fake.nn, "torch.nn.functional": fake.nn.functional})
        try:
            with tempfile.TemporaryDirectory() as d:
                fn = cg.load_module(task, d)
                self.assertEqual(fn(3, -1), 6.0)
                self.assertEqual(fn(3, 1), 7.0)
                self.assertTrue(os.path.isfile(os.path.join(d, "kb_task_t1.py")))
                self.assertEqual(fn.__code__.co_filename, os.path.join(d, "kb_task_t1.py"))
        finally:
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v

    def test_unsafe_or_unknown_expressions_are_refused(self):
        base = {"id": "t", "inputs": [{"name": "x"}], "params": []}
        for expr in ("__import__('os').system('true')", "x.__class__", "y + x", "lambda: x", "x +"):
            with self.subTest(expr=expr):
                with self.assertRaises(cg.ExpressionError):
                    cg.function_source(dict(base, pytorch=expr))
        with self.assertRaises(cg.ExpressionError):
            cg.function_source({"id": "t", "inputs": [{"name": "torch"}], "pytorch": "torch"})
        with self.assertRaises(cg.ExpressionError):
            cg.function_source({"id": "t", "inputs": [{"name": "x"}], "params": [{"name": "x", "value": 1}],
                                "pytorch": "x"})


class CompileClassification(unittest.TestCase):
    def test_graph_breaks_mean_not_compiled(self):
        before = {"stats": {"unique_graphs": 3}, "graph_break": {"call to eval": 1}}
        after = {"stats": {"unique_graphs": 5}, "graph_break": {"call to eval": 3, "data dependent": 1}}
        graphs, breaks, reasons = cg.counters_delta(before, after)
        self.assertEqual((graphs, breaks, reasons), (2, 3, ["call to eval", "data dependent"]))
        r = cg.classify_compile(graphs, breaks, reasons)
        self.assertEqual((r["status"], r["reason"]), ("not_compiled", "graph_break"))

    def test_no_graph_means_not_compiled(self):
        r = cg.classify_compile(*cg.counters_delta({}, {"stats": {}, "graph_break": {}}))
        self.assertEqual((r["status"], r["reason"], r["graphs"]), ("not_compiled", "no_graph", 0))

    def test_one_graph_without_breaks_is_compiled(self):
        r = cg.classify_compile(*cg.counters_delta({"stats": {"unique_graphs": 1}},
                                                   {"stats": {"unique_graphs": 2}, "graph_break": {}}))
        self.assertEqual((r["status"], r["graphs"], r["graph_breaks"]), ("compiled", 1, 0))


class OrderStatistics(unittest.TestCase):
    def test_median_and_interval(self):
        self.assertEqual(cg.median([3, 1, 2]), 2)
        self.assertEqual(cg.median([4, 1, 2, 3]), 2.5)
        xs = list(range(100))
        lo, hi = cg.median_ci(xs)
        self.assertLess(lo, 50)
        self.assertGreater(hi, 49)
        self.assertEqual(cg.median_ci([5.0]), [5.0, 5.0])
        with self.assertRaises(ValueError):
            cg.median([])


if __name__ == "__main__":
    unittest.main()
