"""scripts/check-tree-size.sh fails on a tracked file or a tracked tree over its limit and passes
under it; scripts/evidence-archive.sh puts an archive that left the tree back from git's history,
checking its SHA-256, and refuses a blob that does not match. Each test works in a scratch
repository holding copies of the two scripts."""
import hashlib
import os
import shutil
import subprocess
import tempfile
import unittest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True,
                          text=True).stdout.strip()


class EvidenceScripts(unittest.TestCase):
    def setUp(self):
        self.repo = tempfile.mkdtemp(prefix="kb-evidence-")
        os.makedirs(os.path.join(self.repo, "scripts"))
        for name in ("check-tree-size.sh", "evidence-archive.sh"):
            shutil.copy(os.path.join(ROOT, "scripts", name), os.path.join(self.repo, "scripts"))
        git(self.repo, "init", "-q")
        git(self.repo, "config", "user.email", "test@example.com")
        git(self.repo, "config", "user.name", "test")
        os.makedirs(os.path.join(self.repo, "evidence", "run"))
        self.archive = "evidence/run/run.tar.gz"
        self.payload = os.urandom(300_000)
        with open(os.path.join(self.repo, self.archive), "wb") as f:
            f.write(self.payload)
        git(self.repo, "add", "-A")
        git(self.repo, "commit", "-q", "-m", "a run with its archive")
        self.holder = git(self.repo, "rev-parse", "HEAD")

    def tearDown(self):
        shutil.rmtree(self.repo)

    def run_script(self, *args):
        return subprocess.run([os.path.join(self.repo, "scripts", args[0]), *args[1:]],
                              capture_output=True, text=True)

    def test_tree_size_fails_over_either_limit_and_passes_under_both(self):
        ok = self.run_script("check-tree-size.sh")
        self.assertEqual(ok.returncode, 0, ok.stdout + ok.stderr)
        big_file = self.run_script("check-tree-size.sh", "--file-limit", "200000")
        self.assertNotEqual(big_file.returncode, 0)
        self.assertIn(self.archive, big_file.stdout)
        big_tree = self.run_script("check-tree-size.sh", "--tree-limit", "250000")
        self.assertNotEqual(big_tree.returncode, 0)
        self.assertIn("over its limit", big_tree.stdout)
        bad_option = self.run_script("check-tree-size.sh", "--no-such-option")
        self.assertEqual(bad_option.returncode, 2)

    def write_list(self, sha):
        with open(os.path.join(self.repo, "evidence", "ARCHIVES.tsv"), "w") as f:
            f.write("path\tbytes\tsha256\tcommit\n")
            f.write(f"{self.archive}\t{len(self.payload)}\t{sha}\t{self.holder}\n")
        git(self.repo, "rm", "-q", self.archive)
        git(self.repo, "add", "-A")
        git(self.repo, "commit", "-q", "-m", "the archive leaves the tree")

    def test_restore_puts_the_archive_back_from_history(self):
        self.write_list(hashlib.sha256(self.payload).hexdigest())
        path = os.path.join(self.repo, self.archive)
        self.assertFalse(os.path.exists(path))
        listed = self.run_script("evidence-archive.sh", "list")
        self.assertIn(self.archive, listed.stdout)
        self.assertIn("1 archives", listed.stdout)
        restored = self.run_script("evidence-archive.sh", "restore", "evidence/run/")
        self.assertEqual(restored.returncode, 0, restored.stderr)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), self.payload)
        again = self.run_script("evidence-archive.sh", "restore", "all")
        self.assertIn("present", again.stdout)

    def test_restore_refuses_a_blob_that_does_not_match_and_unknown_paths(self):
        self.write_list("0" * 64)
        bad = self.run_script("evidence-archive.sh", "restore", self.archive)
        self.assertNotEqual(bad.returncode, 0)
        self.assertIn("does not match", bad.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.repo, self.archive)))
        unknown = self.run_script("evidence-archive.sh", "restore", "evidence/nothing/")
        self.assertNotEqual(unknown.returncode, 0)
        self.assertIn("nothing in", unknown.stderr)


if __name__ == "__main__":
    unittest.main()
