"""scripts/check-format.sh lists the checked sources clang-format would change and fails on them,
leaves out the excluded folders, and formats them with --fix; scripts/long-functions.py finds the
functions over its limit by matching braces, past comments, strings, initialiser tables and
lambdas. The format check works in a scratch repository holding a copy of the script and of the
repository's .clang-format."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

FORMATTED = "int add(int a, int b) {\n  return a + b;\n}\n"
UNFORMATTED = "int add(int a,int b){return a+b;}\n"


def git(repo, *args):
    return subprocess.run(["git", "-C", repo, *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def have_clang_format_14():
    for name in ("clang-format-14", "clang-format"):
        path = shutil.which(name)
        if path:
            out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
            if "version 14." in out:
                return True
    return False


@unittest.skipUnless(have_clang_format_14(), "clang-format 14 is not installed")
class CheckFormat(unittest.TestCase):
    def setUp(self):
        self.repo = tempfile.mkdtemp(prefix="kb-format-")
        os.makedirs(os.path.join(self.repo, "scripts"))
        shutil.copy(os.path.join(ROOT, "scripts", "check-format.sh"),
                    os.path.join(self.repo, "scripts"))
        shutil.copy(os.path.join(ROOT, ".clang-format"), self.repo)
        git(self.repo, "init", "-q")
        self.write("include/kblaster/good.h", FORMATTED)
        self.write("portfolio/core10/001_good.cu", FORMATTED)
        self.write("tests/data/golden.cuh", UNFORMATTED)  # excluded: compared byte for byte
        self.write("src/search/other.cpp", UNFORMATTED)  # not a checked module
        git(self.repo, "add", "-A")

    def tearDown(self):
        shutil.rmtree(self.repo)

    def write(self, path, text):
        full = os.path.join(self.repo, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)

    def check(self, *args):
        return subprocess.run([os.path.join(self.repo, "scripts", "check-format.sh"), *args],
                              capture_output=True, text=True)

    def test_passes_when_the_checked_sources_are_formatted(self):
        ok = self.check()
        self.assertEqual(ok.returncode, 0, ok.stdout + ok.stderr)
        self.assertIn("2 file(s) clang-format clean", ok.stdout)

    def test_lists_an_unformatted_source_and_fails_until_fixed(self):
        self.write("tasks/core10/001_x/baseline.cu", UNFORMATTED)
        self.write("include/kblaster/bad.cuh", UNFORMATTED)
        git(self.repo, "add", "-A")
        bad = self.check()
        self.assertEqual(bad.returncode, 1, bad.stdout + bad.stderr)
        self.assertIn("tasks/core10/001_x/baseline.cu", bad.stdout)
        self.assertIn("include/kblaster/bad.cuh", bad.stdout)
        self.assertNotIn("golden.cuh", bad.stdout)
        self.assertNotIn("other.cpp", bad.stdout)
        fixed = self.check("--fix")
        self.assertEqual(fixed.returncode, 0, fixed.stdout + fixed.stderr)
        with open(os.path.join(self.repo, "include/kblaster/bad.cuh")) as f:
            self.assertEqual(f.read(), FORMATTED)
        with open(os.path.join(self.repo, "tests/data/golden.cuh")) as f:
            self.assertEqual(f.read(), UNFORMATTED)
        again = self.check()
        self.assertEqual(again.returncode, 0, again.stdout + again.stderr)

    def test_refuses_an_unknown_option(self):
        self.assertEqual(self.check("--no-such-option").returncode, 2)


class LongFunctions(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kb-long-")

    def tearDown(self):
        shutil.rmtree(self.dir)

    def scan(self, text, *args):
        path = os.path.join(self.dir, "a.cpp")
        with open(path, "w") as f:
            f.write(text)
        return subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "long-functions.py"),
                               *args, path], capture_output=True, text=True)

    def test_counts_a_function_from_its_declaration_to_its_closing_brace(self):
        body = "".join(f"  x += {i};\n" for i in range(10))
        text = ("namespace kb {\n"
                "// a comment with a brace {\n"
                "static const int table[] = {\n  1,\n  2,\n};\n"
                "struct s {\n  int f() const { return 1; }\n};\n"
                "int long_one(int x,\n             int y) {\n"
                "  const char* s = \"}\";\n"
                "  auto l = [&] { return '}'; };\n"
                + body +
                "  return x;\n"
                "}\n"
                "} // namespace kb\n")
        out = self.scan(text, "--limit", "10")
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertEqual(len(lines), 1, out.stdout)
        self.assertTrue(lines[0].split()[0] == "16", out.stdout)  # 2 + 2 + 10 + 2 lines
        self.assertIn("a.cpp:10 long_one", lines[0])
        self.assertEqual(self.scan(text, "--limit", "16").stdout, "")

    def test_check_fails_only_when_a_function_is_over_the_limit(self):
        text = "void f() {\n" + "  g();\n" * 5 + "}\n"
        self.assertEqual(self.scan(text, "--limit", "4", "--check").returncode, 1)
        self.assertEqual(self.scan(text, "--limit", "7", "--check").returncode, 0)
        self.assertEqual(self.scan(text, "--limit", "4").returncode, 0)

    def test_check_with_a_limit_checks_against_that_limit(self):
        text = "void f() {\n" + "  g();\n" * 5 + "}\n"
        over = self.scan(text, "--check", "4")
        self.assertEqual(over.returncode, 1, over.stderr)
        self.assertIn("a.cpp:1 f", over.stdout)
        self.assertEqual(self.scan(text, "--check", "7").returncode, 0)
        self.assertEqual(self.scan(text, "--check=4").returncode, 1)


if __name__ == "__main__":
    unittest.main()
