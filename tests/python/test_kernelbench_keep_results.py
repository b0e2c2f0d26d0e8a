"""scripts/kernelbench_keep_results.py keeps a pass's results small with the device, build and
toolkit that measured them, seeds back only those of the named device without overwriting work
already done, and the summary names each row's build."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
KEEP = os.path.join(ROOT, "scripts", "kernelbench_keep_results.py")
SUMMARY = os.path.join(ROOT, "scripts", "kernelbench_optimize_summary.py")


def result(device, outcome="improved", speedup=1.5):
    return {
        "run": 3,
        "candidates_evaluated": 4,
        "preflight": {"checks": [
            {"name": "store", "status": "ok", "data": {}},
            {"name": "device", "status": "ok", "data": {"name": device, "sm_count": 132}},
        ]},
        "tasks": [{
            "task": "L1_019", "outcome": outcome, "reason": "confirm." + outcome,
            "speedup": speedup, "evaluations": 4, "floor_fraction": 0.8,
            "baseline_seconds": 0.002, "best_seconds": 0.002 / speedup,
            "best_strategy": "elementwise.vectorized", "best_source": "x" * 5000,
            "baseline_state": {"state": "memory_bound", "sentence": "s", "numbers": {"bytes": 1}},
            "steps": [{"strategy": "elementwise.vectorized", "verdict": "improved",
                       "hypothesis": "h" * 2000, "new_state": {"numbers": {}}, "why": "w"}],
        }],
    }


def run(*args):
    return subprocess.run([sys.executable, *args], check=True, capture_output=True, text=True).stdout


class KeepResults(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="kb-keep-")
        self.work = os.path.join(self.tmp, "work")
        self.dest = os.path.join(self.tmp, "kept")
        os.makedirs(os.path.join(self.work, "results"))
        with open(os.path.join(self.work, "env.json"), "w") as f:
            json.dump({"device": "GPU A", "driver": "580", "toolkit": "13.0",
                       "commit": "abc", "build": "commit abc"}, f)
        with open(os.path.join(self.work, "results", "L1_019.json"), "w") as f:
            json.dump(result("GPU A"), f)
        with open(os.path.join(self.work, "results", "L1_020.blocked.json"), "w") as f:
            json.dump(result("GPU A", "blocked"), f)

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def kept(self, name="L1_019.json"):
        with open(os.path.join(self.dest, name)) as f:
            return json.load(f)

    def test_keep_trims_and_records_the_environment(self):
        self.assertIn("kept 1 results", run(KEEP, "keep", self.work, self.dest))
        self.assertEqual(os.listdir(self.dest), ["L1_019.json"])  # a blocked run is not a result
        k = self.kept()
        t = k["tasks"][0]
        self.assertEqual((t["outcome"], t["speedup"], t["best_strategy"]), ("improved", 1.5, "elementwise.vectorized"))
        self.assertNotIn("best_source", t)
        self.assertNotIn("numbers", t["baseline_state"])
        self.assertEqual(t["steps"], [{"strategy": "elementwise.vectorized", "verdict": "improved"}])
        self.assertEqual([c["name"] for c in k["preflight"]["checks"]], ["device"])
        self.assertEqual(k["environment"]["build"], "commit abc")
        self.assertLess(os.path.getsize(os.path.join(self.dest, "L1_019.json")), 2000)
        # Kept again from a later call (another build), the result keeps the build that measured it.
        with open(os.path.join(self.work, "env.json"), "w") as f:
            json.dump({"build": "commit def"}, f)
        run(KEEP, "keep", self.work, self.dest)
        self.assertEqual(self.kept()["environment"]["build"], "commit abc")
        # Measured again by that later build (another run), it is stamped with the later build.
        again = result("GPU A", "improved", 1.7)
        again["run"] = 4
        with open(os.path.join(self.work, "results", "L1_019.json"), "w") as f:
            json.dump(again, f)
        run(KEEP, "keep", self.work, self.dest)
        self.assertEqual(self.kept()["environment"]["build"], "commit def")
        self.assertEqual(self.kept()["tasks"][0]["speedup"], 1.7)

    def test_seed_takes_only_the_named_devices_results_and_overwrites_nothing(self):
        run(KEEP, "keep", self.work, self.dest)
        other = os.path.join(self.tmp, "other")
        self.assertIn("seeded 0 results", run(KEEP, "seed", self.dest, other, "GPU B"))
        self.assertEqual(os.listdir(os.path.join(other, "results")), [])
        self.assertIn("seeded 1 results", run(KEEP, "seed", self.dest, other, "GPU A"))
        with open(os.path.join(other, "results", "L1_019.json")) as f:
            self.assertEqual(json.load(f)["tasks"][0]["outcome"], "improved")
        # A result the work folder already holds stays as it is.
        with open(os.path.join(other, "results", "L1_019.json"), "w") as f:
            json.dump(result("GPU A", "no_improvement", 1.0), f)
        self.assertIn("seeded 0 results", run(KEEP, "seed", self.dest, other, "GPU A"))
        with open(os.path.join(other, "results", "L1_019.json")) as f:
            self.assertEqual(json.load(f)["tasks"][0]["outcome"], "no_improvement")

    def test_the_summary_names_each_rows_build(self):
        run(KEEP, "keep", self.work, self.dest)
        shutil.rmtree(os.path.join(self.work, "results"))
        run(KEEP, "seed", self.dest, self.work, "GPU A")
        with open(os.path.join(self.work, "import.json"), "w") as f:
            json.dump([{"file": "/kb/level1/19_ReLU.py", "status": "imported", "task": "L1_019"}], f)
        out = os.path.join(self.tmp, "summary.json")
        run(SUMMARY, self.work, out)
        with open(out) as f:
            s = json.load(f)
        self.assertEqual(s["rows"][0]["build"], "commit abc")
        self.assertEqual(s["builds"], ["commit abc"])
        self.assertEqual(s["rows"][0]["outcome"], "improved")


if __name__ == "__main__":
    unittest.main()
