"""tests/llm_double/server.py: the loopback model answers each task's prompts with its scripted
answers in order, in the fences the LLM proposer reads, and `kblaster llm check` accepts it."""
import json
import os
import subprocess
import sys
import unittest
import urllib.request

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SERVER = os.path.join(ROOT, "tests", "llm_double", "server.py")


def post(url, body):
    req = urllib.request.Request(url + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json",
                                          "Authorization": "Bearer any"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


class LlmDouble(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.log = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"llm-double-{os.getpid()}.jsonl")
        cls.proc = subprocess.Popen([sys.executable, SERVER, "--log", cls.log],
                                    stdout=subprocess.PIPE, text=True)
        line = cls.proc.stdout.readline()
        assert line.startswith("listening on "), line
        cls.url = line.split()[-1]

    @classmethod
    def tearDownClass(cls):
        cls.proc.terminate()
        cls.proc.wait(timeout=10)
        if os.path.exists(cls.log):
            os.remove(cls.log)

    def ask(self, task, n=1):
        prompt = f"# Task {task} (core10/x): something\n\nmore text"
        return post(self.url, {"model": "double", "n": n,
                               "messages": [{"role": "system", "content": "rules"},
                                            {"role": "user", "content": prompt}]})

    def test_answers_come_in_order_with_both_fences(self):
        first = self.ask("095")["choices"][0]["message"]["content"]
        self.assertIn("```json", first)
        self.assertIn("```cuda", first)
        meta = json.loads(first.split("```json\n", 1)[1].split("\n```", 1)[0])
        self.assertEqual(meta["strategy"], "loss.llm_warp_row")
        with open(os.path.join(ROOT, "portfolio", "core10", "095_cross_entropy.cu")) as f:
            self.assertIn(f.read().strip().splitlines()[-1], first)
        second = self.ask("095")["choices"][0]["message"]["content"]
        self.assertIn("loss.llm_subsample", second)
        answer = self.ask("095", n=2)
        self.assertEqual(len(answer["choices"]), 2)
        self.assertIn("loss.llm_constant", answer["choices"][0]["message"]["content"])
        self.assertIn("loss.llm_warp_row", answer["choices"][1]["message"]["content"])  # round again
        self.assertGreater(answer["usage"]["total_tokens"], 0)

    def test_a_task_without_answers_gets_no_candidate(self):
        content = self.ask("999")["choices"][0]["message"]["content"]
        self.assertNotIn("```cuda", content)

    def test_every_answer_file_exists(self):
        sys.path.insert(0, os.path.dirname(SERVER))
        import server  # noqa: E402 (the module under test)
        answers = server.load_answers(os.path.join(ROOT, "tests", "llm_double", "answers.toml"), ROOT)
        kinds = {a["kind"] for items in answers.values() for a in items}
        self.assertEqual(kinds, {"correct", "broken", "wrong", "cheating"})

    def test_kblaster_llm_check_accepts_it(self):
        binary = os.path.join(ROOT, "build", "release", "kblaster")
        if not os.path.exists(binary):
            self.skipTest("no build/release/kblaster")
        # No config file of the machine's user: the flags and the key alone.
        env = {k: v for k, v in os.environ.items() if not k.startswith("KBLASTER_")}
        env.update(KBLASTER_LLM_API_KEY="double", XDG_CONFIG_HOME=os.path.dirname(self.log),
                   HOME=os.path.dirname(self.log))
        r = subprocess.run([binary, "llm", "check", "--llm-base-url", self.url, "--llm-model", "double"],
                           env=env, capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("ok", r.stdout)


if __name__ == "__main__":
    unittest.main()
