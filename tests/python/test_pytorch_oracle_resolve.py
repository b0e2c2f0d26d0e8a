"""`pytorch_oracle.py resolve` executes a problem file whose inputs the static reader cannot see
and describes them for the importer: tensors with their shapes, dtypes and a distribution,
numbers as scalars, and a bool tensor (no such dtype in contracts) as a failure with its reason.
Needs torch; skipped without it. Run: python3 -m unittest discover -s tests/python."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

try:
    import torch  # noqa: F401
except ImportError:  # the CPU machine's interpreter may lack it
    torch = None

PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, {second}):
        return x * {second}


def get_inputs():
    return [torch.rand(4, 8), {value}]


def get_init_inputs():
    return []
'''


def resolve(text):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "1_Problem.py")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        out = os.path.join(d, "out.json")
        subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "pytorch_oracle.py"), "resolve",
                        path, "--out", out], check=True, capture_output=True, timeout=300)
        with open(out, encoding="utf-8") as f:
            return json.load(f)[0]


@unittest.skipIf(torch is None, "no torch in this interpreter")
class Resolve(unittest.TestCase):
    def test_a_tensor_and_a_number_are_described_by_their_names(self):
        r = resolve(PROBLEM.format(second="s", value="0.5"))
        self.assertEqual(r["status"], "ok", r)
        self.assertEqual([i["name"] for i in r["inputs"]], ["x", "s"])
        self.assertEqual(r["inputs"][0]["dtype"], "float32")
        self.assertEqual(r["inputs"][0]["distribution"], "uniform01")
        self.assertEqual(r["inputs"][1]["scalar"], 0.5)

    def test_a_bool_tensor_fails_with_its_reason(self):
        r = resolve(PROBLEM.format(second="mask", value="torch.rand(4, 8) > 0.5"))
        self.assertEqual(r["status"], "failed", r)
        self.assertIn("input 1 (mask) is a bool tensor", r["reason"])


if __name__ == "__main__":
    unittest.main()
