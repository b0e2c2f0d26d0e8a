"""`kernelbench_parse.py` reads problem files without running them: a hostile file (a division
by zero, 10**10**10, nesting deeper than the parser takes) fails alone, with a reason, quickly,
and the files after it in the batch are still read. Run: python3 -m unittest discover -s
tests/python."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOOD = os.path.join(ROOT, "tests", "data", "kernelbench", "level1", "14_SoftsignArith.py")


class HostileFiles(unittest.TestCase):
    def test_each_hostile_file_fails_alone_and_the_batch_goes_on(self):
        with open(GOOD, encoding="utf-8") as f:
            good = f.read()
        self.assertIn("dim = 16384", good)
        hostile = {
            "1_DivZero.py": good.replace("dim = 16384", "dim = 1 // 0"),
            "2_HugePow.py": good.replace("dim = 16384", "dim = 10**10**10"),
            "3_HugeMul.py": good.replace("dim = 16384", "dim = (2**64) * (2**64) * (2**64) * (2**64) * 3"),
            "4_Deep.py": good.replace("dim = 16384", "dim = " + "(" * 5000 + "1" + ")" * 5000),
            "5_Unary.py": good.replace("dim = 16384", "dim = " + "-" * 200000 + "1"),
            "6_Good.py": good,
        }
        with tempfile.TemporaryDirectory() as d:
            paths = []
            for name, text in hostile.items():
                path = os.path.join(d, name)
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
                paths.append(path)
            out = os.path.join(d, "out.json")
            r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "kernelbench_parse.py"),
                                "--out", out] + paths, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(out, encoding="utf-8") as f:
                results = {x["name"]: x for x in json.load(f)}
        self.assertEqual(len(results), 6)
        self.assertEqual(results["6_Good"]["status"], "ok", results["6_Good"])
        for name in ("1_DivZero", "2_HugePow", "3_HugeMul", "4_Deep", "5_Unary"):
            self.assertNotEqual(results[name]["status"], "ok", results[name])
            self.assertTrue(results[name].get("reason"), results[name])


if __name__ == "__main__":
    unittest.main()
