"""The op graph scripts/kernelbench_parse.py reads from a problem file (no torch, never executed),
over the lowering's problem files in tests/data/kernelbench/lowering, and the optimize summary
(scripts/kernelbench_optimize_summary.py) over a hand-made pass."""
import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

import kernelbench_optimize_summary as summary  # noqa: E402
import kernelbench_parse as kp  # noqa: E402

PROBLEMS = os.path.join(ROOT, "tests", "data", "kernelbench", "lowering", "level1")


def graph(name):
    r = kp.parse_file(os.path.join(PROBLEMS, name))
    assert r["status"] == "ok", r
    return r["graph"]


class GraphTest(unittest.TestCase):
    def test_every_file_has_a_graph_that_is_json(self):
        for f in sorted(os.listdir(PROBLEMS)):
            if f.endswith(".py"):
                g = graph(f)
                json.dumps(g)  # plain JSON
                self.assertEqual(g["version"], 1)
                self.assertTrue(g["nodes"] or g["unsupported"], f)

    def test_canonical_ops_shapes_and_explicit_defaults(self):
        g = graph("104_HardTanh.py")
        (n,) = g["nodes"]
        self.assertEqual(n["op"], "torch.nn.functional.hardtanh")
        self.assertEqual(n["attrs"], {"min_val": -2.0, "max_val": 2.0, "inplace": False})
        self.assertEqual(n["outputs"][0]["shape"], ["batch_size", "dim"])
        # A module built in __init__ is its function; its constructor's arguments are attributes.
        (m,) = graph("102_LeakyReLUModule.py")["nodes"]
        self.assertEqual((m["op"], m["module"], m["attrs"]["negative_slope"]),
                         ("torch.nn.functional.leaky_relu", "act", 0.2))
        # self.dim from the constructor's argument, normalised; keepdim made explicit.
        (s,) = graph("108_SumKeepdim.py")["nodes"]
        self.assertEqual((s["attrs"]["dim"], s["attrs"]["keepdim"]), (1, True))
        self.assertEqual(s["outputs"][0]["shape"], ["batch_size", "1", "cols"])
        (lsm,) = graph("112_LogSoftmaxMethod.py")["nodes"]
        self.assertEqual((lsm["op"], lsm["attrs"]["dim"]), ("torch.log_softmax", 1))

    def test_module_state_is_named_as_the_described_state(self):
        g = graph("113_LayerNorm.py")
        self.assertEqual([s["value"] for s in g["state"]], ["state_ln_weight", "state_ln_bias"])
        self.assertEqual(g["state"][0]["shape"], ["dim1", "dim2"])
        (n,) = g["nodes"]
        self.assertEqual([i["value"] for i in n["inputs"]], ["x", "state_ln_weight", "state_ln_bias"])
        self.assertEqual(n["attrs"]["eps"], 1e-5)

    def test_numbers_and_scalar_inputs_are_constants(self):
        g = graph("106_ScaleByScalar.py")
        self.assertEqual(g["inputs"][1], {"value": "s", "kind": "scalar", "scalar": 3.5})
        (n,) = g["nodes"]
        self.assertEqual(n["inputs"][1], {"const": 3.5})
        ops = [n["op"] for n in graph("105_TanhGelu.py")["nodes"]]
        self.assertIn("torch.tanh", ops)
        consts = [i["const"] for n in graph("105_TanhGelu.py")["nodes"] for i in n["inputs"] if "const" in i]
        self.assertIn(0.044715, consts)
        self.assertAlmostEqual(min(consts, key=lambda c: abs(c - 0.7978845608)), 0.7978845608028654)  # sqrt(2 / pi)

    def test_max_with_a_dim_has_values_and_int64_indices(self):
        (n,) = graph("110_MaxValues.py")["nodes"]
        self.assertEqual([o["dtype"] for o in n["outputs"]], ["float32", "int64"])
        self.assertEqual(graph("110_MaxValues.py")["outputs"][0]["value"], n["outputs"][0]["value"])

    def test_forms_outside_a_straight_line_are_recorded_with_a_reason(self):
        expected = {"130_UnknownOp.py": ("unknown_op", "torch.special.bessel_j0"),
                    "131_InplaceRelu.py": ("inplace", "torch.relu"),
                    "132_DynamicView.py": ("dynamic_shape", "torch.reshape"),
                    "133_MixedDtype.py": ("mixed_dtype", "torch.add"),
                    "134_ControlFlow.py": ("construct", "If"),
                    "169_BroadcastUnequal.py": ("dynamic_shape", "torch.mul")}
        for f, (reason, op) in expected.items():
            u = graph(f)["unsupported"]
            self.assertEqual((u[0]["reason"], u[0]["op"]), (reason, op), f)
            self.assertTrue(u[0]["detail"])

    def parse_source(self, forward, init="", init_args="[]"):
        src = ("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n"
               "    def __init__(self, *args):\n        super().__init__()\n" + init +
               "\n    def forward(self, x):\n" + forward +
               "\n\nbatch_size = 8\ndim = 16\n\ndef get_inputs():\n"
               "    return [torch.rand(batch_size, dim)]\n\ndef get_init_inputs():\n"
               f"    return {init_args}\n")
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "1_Problem.py")
            with open(path, "w") as f:
                f.write(src)
            return kp.parse_file(path)

    def test_a_views_minus_one_is_the_elements_left_when_the_known_dims_cancel(self):
        # A parameter viewed per channel (KernelBench level 2: self.p.view(1, -1, 1, 1)), and -1
        # anywhere once the known dims' factors cancel the input's.
        r = self.parse_source(
            "        y = x.view(-1, x.size(0))\n"
            "        return x * self.p.view(1, -1)",
            init="        self.p = nn.Parameter(torch.randn(dim))\n")
        self.assertEqual(r["status"], "ok", r)
        self.assertFalse(r["graph"]["unsupported"])
        shapes = [n["outputs"][0]["shape"] for n in r["graph"]["nodes"]
                  if n["op"] == "torch.reshape"]
        self.assertEqual(shapes, [["dim", "batch_size"], ["1", "16"]])
        self.assertEqual(kp.remaining_factor(["b", "(c * d)", "16"], ["b", "4", "d"]), "(c * 4)")
        self.assertEqual(kp.remaining_factor(["b", "(h - 1) * 2 + 1", "c"], ["b", "c"]),
                         "(h - 1) * 2 + 1")
        self.assertEqual(kp.remaining_factor(["b", "c"], ["b", "c"]), "1")
        # Known dims that do not divide the input's symbolically stay refused, by name.
        self.assertIsNone(kp.remaining_factor(["b", "c"], ["d"]))
        self.assertIsNone(kp.remaining_factor(["b", "6"], ["4"]))
        u = self.parse_source("        return x.view(3, -1)")["graph"]["unsupported"]
        self.assertEqual((u[0]["reason"], u[0]["op"]), ("dynamic_shape", "torch.reshape"))

    def test_a_min_or_max_of_two_tensors_is_elementwise_and_a_number_tensor_a_constant(self):
        # KernelBench level 2 writes torch.min(x, torch.tensor(v, device=x.device)) and
        # torch.min(x, self.constant) with a 0-d parameter: the elementwise minimum, not a dim.
        r = self.parse_source(
            "        x = torch.min(x, torch.tensor(0.5, device=x.device))\n"
            "        x = torch.max(x, self.c)\n"
            "        x = x + torch.tensor(2.0, dtype=torch.float32)\n"
            "        return torch.max(x, 1)[0]",
            init="        self.c = nn.Parameter(torch.tensor(0.25))\n")
        self.assertEqual(r["status"], "ok", r)
        g = r["graph"]
        self.assertFalse(g["unsupported"])
        ops = [(n["op"], n["inputs"][1] if len(n["inputs"]) > 1 else n["attrs"].get("dim"))
               for n in g["nodes"]]
        self.assertEqual(ops[0], ("torch.minimum", {"const": 0.5}))
        self.assertEqual((ops[1][0], ops[1][1]["value"], ops[1][1]["shape"]),
                         ("torch.maximum", "state_c", []))
        self.assertEqual(ops[2], ("torch.add", {"const": 2.0}))
        self.assertEqual(ops[3], ("torch.max", 1))  # a number second argument is still the dim
        # Constant tensors the graph cannot read as one number are named, not guessed.
        for forward, detail in (("        return x + torch.tensor([1.0, 2.0])", "one number"),
                                ("        return x + torch.tensor(1.0, dtype=torch.float16)",
                                 "dtype torch.float16")):
            u = self.parse_source(forward)["graph"]["unsupported"]
            self.assertEqual((u[0]["reason"], u[0]["op"]), ("unknown_op", "torch.tensor"))
            self.assertIn(detail, u[0]["detail"])

    def test_check_shapes_keep_the_equalities_the_graph_assumes(self):
        # nn.LayerNorm(16) over x [batch_size, dim] with dim = 16: equal by value only, so the
        # graph assumes it and the check shapes keep dim at 16 (the tail shape's 17 would break it).
        r = self.parse_source("        return self.norm(x)",
                              init="        self.norm = nn.LayerNorm(16)\n", init_args="[]")
        self.assertEqual(r["status"], "ok", r)
        self.assertFalse(r["graph"]["unsupported"])
        self.assertEqual([d["dims"] for d in r["graph"]["equal_dims"]], [["dim", "16"]])
        self.assertTrue(r["check_shapes"])
        for c in r["check_shapes"]:
            self.assertEqual(c["dims"]["dim"], 16, c)
        # A normalized dim of another value is still refused by name.
        u = self.parse_source("        return self.norm(x)",
                              init="        self.norm = nn.LayerNorm(12)\n")["graph"]["unsupported"]
        self.assertEqual((u[0]["reason"], u[0]["op"]), ("dynamic_shape", "nn.LayerNorm"))

    def test_broadcasting_dims_of_equal_value_is_recorded(self):
        # Trailing alignment: targets [batch_size] against [batch_size, input_shape_0] pairs
        # input_shape_0 with batch_size, legal because both are 512; the graph records it.
        g = graph("167_HingeBroadcast.py")
        self.assertEqual(g["unsupported"], [])
        self.assertEqual([e["dims"] for e in g["equal_dims"]], [["input_shape_0", "batch_size"]])
        mul = g["nodes"][0]
        self.assertEqual((mul["op"], mul["outputs"][0]["shape"]),
                         ("torch.mul", ["batch_size", "input_shape_0"]))
        # Different values: PyTorch refuses, and so does the reader, naming the dims.
        (u,) = graph("169_BroadcastUnequal.py")["unsupported"]
        self.assertIn("needs dim == batch_size", u["detail"])
        self.assertNotIn("equal_dims", graph("118_MSE.py"))
        # A dim that is 1 at the import's dims broadcasts too, recorded against "1".
        b = kp.GraphBuilder({}, {"n": 8, "one": 1})
        self.assertEqual(kp.broadcast(["n", "one"], ["n"], "torch.add", b), ["n", "n"])
        self.assertEqual([e["dims"] for e in b.equal_dims], [["one", "1"]])

    def test_integers_cast_to_floating_point_are_floating_point_inputs(self):
        r = kp.parse_file(os.path.join(PROBLEMS, "167_HingeBroadcast.py"))
        targets = r["inputs"][1]
        self.assertEqual(targets["dtype"], "float32")  # randint(0, 2, ...).float() * 2 - 1
        self.assertEqual(targets["distribution"], {"kind": "uniform", "low": -1.0, "high": 1.0})
        ce = kp.parse_file(os.path.join(PROBLEMS, "121_CrossEntropy.py"))["inputs"][1]
        self.assertEqual(ce["dtype"], "int64")

    def test_convolution_output_sizes_are_dim_expressions(self):
        (n,) = graph("126_Conv2d.py")["nodes"]
        self.assertEqual(n["op"], "nn.Conv2d")
        h = n["outputs"][0]["shape"][2]
        self.assertEqual(kp.eval_dim(h, {"height": 32}), 32)  # padding 1, kernel 3
        self.assertEqual([s["name"] for s in graph("126_Conv2d.py")["state"]], ["weight", "bias"])

    def test_executed_files_get_a_graph_with_matching_axes(self):
        inputs = [{"name": "predictions", "shape": ["in0_0", "in0_1"], "dtype": "float32"},
                  {"name": "targets", "shape": ["in1_0", "in1_1"], "dtype": "float32"}]
        dims = {"in0_0": 4, "in0_1": 5, "in1_0": 4, "in1_1": 5}
        g = kp.graph_of_file(os.path.join(PROBLEMS, "118_MSE.py"), inputs, [], dims)
        self.assertEqual(g["unsupported"], [])
        self.assertEqual(g["inputs"][0]["shape"], g["inputs"][1]["shape"])
        bad = kp.graph_of_file(os.path.join(PROBLEMS, "nonexistent.py"), inputs, [], dims)
        self.assertEqual(bad["unsupported"][0]["reason"], "malformed")


    def test_einsum_flip_and_the_exclusive_scan_forms(self):
        g = graph("150_Einsum4DMatrix.py")
        (n,) = g["nodes"]
        self.assertEqual(n["op"], "torch.einsum")
        self.assertEqual(n["attrs"]["equation"], "bijl,lk->bijk")
        self.assertEqual(n["outputs"][0]["shape"], ["b", "i", "j", "k"])
        g = graph("144_CumsumReverse.py")
        self.assertEqual([n["op"] for n in g["nodes"]], ["torch.flip", "torch.cumsum", "torch.flip"])
        self.assertEqual(g["nodes"][0]["attrs"]["dims"], 1)
        g = graph("166_CumsumExclusive.py")
        ops = [n["op"] for n in g["nodes"]]
        self.assertEqual(ops[-1], "torch.cat")
        narrow = g["nodes"][ops.index("torch.narrow")]
        # x.size(d) - 1 stays a shape expression
        self.assertEqual(narrow["attrs"]["length"], "(dim - 1)")
        self.assertEqual(narrow["outputs"][0]["shape"], ["batch_size", "(dim - 1)"])
        self.assertEqual(g["nodes"][-1]["outputs"][0]["shape"], ["batch_size", "(1 + (dim - 1))"])
        # an einsum of three operands is recorded as unsupported, not guessed
        src = "import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n    def forward(self, a, b, c):\n        return torch.einsum('ij,jk,kl->il', a, b, c)\nN = 8\ndef get_inputs():\n    return [torch.rand(N, N), torch.rand(N, N), torch.rand(N, N)]\ndef get_init_inputs():\n    return []\n"
        with tempfile.TemporaryDirectory() as d:
            f = os.path.join(d, "1_Three.py")
            with open(f, "w") as h:
                h.write(src)
            r = kp.parse_file(f)
        self.assertEqual(r["graph"]["unsupported"][0]["op"], "torch.einsum")


class SummaryTest(unittest.TestCase):
    def test_rows_geomeans_and_no_applicable(self):
        with tempfile.TemporaryDirectory() as work:
            def put(name, obj):
                os.makedirs(os.path.dirname(os.path.join(work, name)), exist_ok=True)
                with open(os.path.join(work, name), "w") as f:
                    json.dump(obj, f)
            put("import.json", [{"file": "/kb/21_Sigmoid.py", "status": "imported", "task": "L1_021"},
                                {"file": "/kb/50_conv.py", "status": "imported", "task": "L1_050"},
                                {"file": "/kb/93_masked.py", "status": "failed", "reason": "a bool mask"}])
            put("lower.json", [{"task": "L1_021", "status": "lowered", "rule": "elementwise:sigmoid",
                                "family": "elementwise"},
                               {"task": "L1_050", "status": "not_lowered", "unsupported_ops": ["nn.Conv2d"],
                                "reasons": ["nn.Conv2d: no_lowering (a convolution)"]}])
            put("results/L1_021.json", {"tasks": [{"outcome": "improved", "reason": "search.improved",
                                                   "speedup": 2.0, "evaluations": 12,
                                                   "floor_fraction": 0.8, "baseline_seconds": 0.002,
                                                   "best_seconds": 0.001}]})
            put("results/L1_050.json", {"tasks": [{"outcome": "no_improvement",
                                                   "reason": "search.no_applicable_strategy",
                                                   "speedup": 1.0, "evaluations": 0,
                                                   "unsupported": ["nn.Conv2d: no_lowering (a convolution)"]}]})
            put("pytorch.json", {"device": "NVIDIA H200", "tasks": {
                "L1_021": {"official": {"eager": {"correct": True, "median_s": 0.002},
                                        "compile": {"correct": True, "median_s": 0.0015,
                                                    "compile": {"status": "compiled"}},
                                        "max-autotune": {"correct": True, "median_s": 0.0001,
                                                         "compile": {"status": "not_compiled"}}}}}})
            s = summary.summarize(work)
        self.assertEqual(s["problems"], 3)
        rows = {r["problem"]: r for r in s["rows"]}
        self.assertEqual(rows["21_Sigmoid.py"]["speedup_vs_eager"], 2.0)
        # The fastest method that compiled cleanly (compile, 1.5 ms) against our 1 ms.
        self.assertAlmostEqual(rows["21_Sigmoid.py"]["speedup_vs_fastest_pytorch"], 1.5)
        self.assertEqual(rows["21_Sigmoid.py"]["lowering"], "elementwise:sigmoid")
        self.assertEqual(rows["50_conv.py"]["speedup_vs_eager"], 1.0)
        self.assertEqual(rows["93_masked.py"]["outcome"], "not_imported")
        self.assertEqual(s["verified"], ["21_Sigmoid.py"])
        self.assertEqual(s["no_applicable"][0]["ops"], ["nn.Conv2d"])
        self.assertAlmostEqual(s["geomean_vs_eager"], 2.0 ** (1 / 3))
        self.assertAlmostEqual(s["fast_1_vs_eager"], 1 / 3)
        self.assertAlmostEqual(s["fast_1_vs_fastest_pytorch"], 1 / 3)


if __name__ == "__main__":
    unittest.main()
