"""The reference process's tolerance check over chunks gives the verdict of one pass over the
whole tensor (it is chunked so that tensors of many GiB fit beside their float64 reference).
Needs torch; skipped without it. Run: python3 -m unittest discover -s tests/python."""
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "scripts"))

try:
    import torch
except ImportError:  # the CPU machine's interpreter may lack it
    torch = None


def one_pass(y, ref, tol):
    """The rule written over the whole tensor at once."""
    y = y.double()
    scale = ref.pow(2).mean().sqrt()
    err = (y - ref).abs()
    bound = tol["atol"] * scale + tol["rtol"] * ref.abs()
    finite = torch.isfinite(ref)
    if not bool(torch.isfinite(y[finite]).all()):
        return False, "non-finite"
    if bool((err[finite] > bound[finite]).any()):
        return False, "max"
    norm = float(ref[finite].norm())
    diff = float((y - ref)[finite].norm())
    rel = diff / norm if norm > 0 else diff
    return (False, "relative") if rel > tol["rel_l2"] else (True, "ok")


@unittest.skipIf(torch is None, "no torch")
class ChunkedCompare(unittest.TestCase):
    def test_every_chunk_size_gives_the_one_pass_verdict(self):
        import pytorch_oracle as po
        gen = torch.Generator().manual_seed(0)
        tol = {"atol": 1e-4, "rtol": 1e-4, "rel_l2": 1e-5}
        verdicts = set()
        for trial in range(200):
            n = int(torch.randint(1, 3000, (), generator=gen))
            ref = torch.randn(n, dtype=torch.float64, generator=gen) * 10
            noise = float(torch.rand((), generator=gen)) * 1e-3
            y = (ref + torch.randn(n, dtype=torch.float64, generator=gen) * noise).float()
            if trial % 5 == 0:
                ref[int(torch.randint(0, n, (), generator=gen))] = float("inf")
            if trial % 7 == 0:
                y[int(torch.randint(0, n, (), generator=gen))] = float("nan")
            want = one_pass(y, ref, tol)
            verdicts.add(want[1])
            for chunk in (7, 256, 1 << 25):
                ok, why = po.compare(torch, y, ref, tol, chunk=chunk)
                self.assertEqual(ok, want[0], (trial, chunk, why, want))
                self.assertTrue(why.startswith(want[1]) or (ok and why == "ok"), (why, want))
        # The cases cover every outcome of the rule.
        self.assertEqual(verdicts, {"ok", "non-finite", "max", "relative"})

    def test_a_shape_mismatch_is_named(self):
        import pytorch_oracle as po
        ok, why = po.compare(torch, torch.zeros(3), torch.zeros(4, dtype=torch.float64),
                             {"atol": 0, "rtol": 0, "rel_l2": 0})
        self.assertFalse(ok)
        self.assertIn("shape", why)


if __name__ == "__main__":
    unittest.main()
