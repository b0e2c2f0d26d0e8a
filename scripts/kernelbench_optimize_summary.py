#!/usr/bin/env python3
"""The summary of an optimize pass over imported KernelBench problems, from the files
scripts/kernelbench-optimize-h200.sh writes under WORK:

  WORK/import.json           `kblaster tasks import` (file -> task, status), merged with
  WORK/import-resolved.json  the files resolved by executing them, when any
  WORK/lower.json            `kblaster tasks lower --json`: the rule, or the unsupported ops
  WORK/results/<task>.json   `kblaster optimize --task T --json`: outcome, reason, timings
  WORK/pytorch.json          scripts/pytorch_baselines.py: eager, compile, max-autotune medians
  WORK/env.json              device, driver, toolkit, commit

    python3 scripts/kernelbench_optimize_summary.py WORK OUT.json

One row per problem file: problem, task, outcome, reason, speedup_vs_eager (the search's
confirmed ratio against the eager baseline; 1.0 without a verified improvement),
speedup_vs_fastest_pytorch (the fastest correct PyTorch method's median over the best kernel's,
the eager baseline's where nothing faster was verified; methods that did not compile cleanly are
not "fastest", as in `kblaster bench`), floor_fraction, evaluations, the lowering rule or the
unsupported ops. Then `problems`, `verified` (a verified candidate at least as fast as eager),
`no_applicable` (each with its unsupported ops), geometric means (a problem without a verified
candidate counts 1.0x against eager), fast_1 fractions (verified and faster than the reference)
and the environment."""
import json
import math
import os
import sys

METHODS = ("eager", "compile", "max-autotune")


def load(path, default=None):
    if not os.path.exists(path):
        return default
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def fastest_pytorch(entry):
    """(seconds, method) of the fastest correct method of one task's official shape."""
    best = None
    for shape in (entry or {}).values():
        if not isinstance(shape, dict):
            continue
        for m in METHODS:
            r = shape.get(m)
            if not r or not r.get("correct") or not r.get("median_s"):
                continue
            if m != "eager" and (r.get("compile") or {}).get("status") != "compiled":
                continue
            if best is None or r["median_s"] < best[0]:
                best = (r["median_s"], m)
        break  # the official shape
    return best


def eager_seconds(entry):
    for shape in (entry or {}).values():
        if isinstance(shape, dict) and (shape.get("eager") or {}).get("correct"):
            return shape["eager"].get("median_s")
        break
    return None


def summarize(work):
    imports = {}
    for name in ("import.json", "import-resolved.json"):
        for r in load(os.path.join(work, name), []):
            if name == "import.json" or r.get("status") in ("imported", "flagged"):
                imports[os.path.basename(r["file"])] = r
    lowering = {r["task"]: r for r in load(os.path.join(work, "lower.json"), [])}
    pytorch = load(os.path.join(work, "pytorch.json"), {}) or {}
    env = load(os.path.join(work, "env.json"), {}) or {}
    rows = []
    for problem in sorted(imports, key=lambda f: (int(f.split("_")[0]) if f.split("_")[0].isdigit() else 1 << 30, f)):
        imp = imports[problem]
        task = imp.get("task", "")
        row = {"problem": problem, "task": task, "outcome": None, "reason": None,
               "speedup_vs_eager": 1.0, "speedup_vs_fastest_pytorch": None,
               "floor_fraction": None, "evaluations": 0}
        low = lowering.get(task, {})
        if low.get("status") == "lowered":
            row["lowering"] = low.get("rule")
            row["family"] = low.get("family")
        elif low.get("status") == "not_lowered":
            row["unsupported_ops"] = low.get("unsupported_ops", [])
            row["unsupported"] = low.get("reasons", [])
        res = load(os.path.join(work, "results", f"{task}.json")) if task else None
        result = (res or {}).get("tasks", [None])[0] if res else None
        if not task:
            row.update(outcome="not_imported", reason=f"import.{imp.get('status')}: {imp.get('reason', '')}")
        elif result is None:
            row.update(outcome="not_run", reason="no optimize result (the pass did not reach it)")
        else:
            row.update(outcome=result["outcome"], reason=result["reason"],
                       evaluations=result.get("evaluations", 0),
                       floor_fraction=result.get("floor_fraction"),
                       baseline_ms=1e3 * result.get("baseline_seconds", 0) or None,
                       best_ms=1e3 * result.get("best_seconds", 0) or None,
                       best_strategy=result.get("best_strategy"))
            if (res or {}).get("environment"):
                row["build"] = res["environment"].get("build") or res["environment"].get("commit")
            if result.get("unsupported"):
                row["unsupported"] = result["unsupported"]
            if result.get("detail"):
                # What kept the task from being evaluated (a describe's error), its last lines.
                row["detail"] = result["detail"][-800:]
            improved = result["outcome"] == "improved" and result.get("speedup", 1.0) >= 1.0
            row["speedup_vs_eager"] = result.get("speedup", 1.0) if improved else 1.0
            row["verified"] = improved
        fast = fastest_pytorch(pytorch.get("tasks", {}).get(task))
        eager = eager_seconds(pytorch.get("tasks", {}).get(task))
        if fast and eager:
            # Our figure: the best kernel's time as a multiple of eager's, against the fastest
            # method's, both from the provider's eager measurement of this task.
            ours = eager / row["speedup_vs_eager"]
            row["speedup_vs_fastest_pytorch"] = fast[0] / ours
            row["fastest_pytorch_method"] = fast[1]
            row["eager_ms_provider"] = 1e3 * eager
            row["fastest_pytorch_ms"] = 1e3 * fast[0]
        rows.append(row)
    n = len(rows)
    verified = [r["problem"] for r in rows if r.get("verified")]
    no_app = [{"problem": r["problem"], "task": r["task"], "ops": r.get("unsupported_ops", []),
               "reasons": r.get("unsupported", [])}
              for r in rows if r["reason"] == "search.no_applicable_strategy"]
    vs_fast = [r["speedup_vs_fastest_pytorch"] for r in rows if r["speedup_vs_fastest_pytorch"]]
    summary = {
        "rows": rows,
        "problems": n,
        "verified": verified,
        "no_applicable": no_app,
        "geomean_vs_eager": geomean([r["speedup_vs_eager"] for r in rows]),
        "geomean_vs_fastest_pytorch": geomean(vs_fast),
        "geomean_vs_fastest_pytorch_problems": len(vs_fast),
        "fast_1_vs_eager": (sum(1 for r in rows if r.get("verified") and r["speedup_vs_eager"] > 1.0) / n) if n else None,
        "fast_1_vs_fastest_pytorch": (sum(1 for r in rows if r.get("verified") and (r["speedup_vs_fastest_pytorch"] or 0) > 1.0) / n) if n else None,
        "outcomes": {},
        "device": env.get("device") or pytorch.get("device"),
        "driver": env.get("driver") or pytorch.get("driver"),
        "toolkit": env.get("toolkit") or pytorch.get("toolkit"),
        "commit": env.get("commit"),
        # A pass spread over several calls may span builds: each row names its own where kept.
        "builds": sorted({r["build"] for r in rows if r.get("build")}),
        "torch": pytorch.get("torch"),
        "pytorch_settings": pytorch.get("settings"),
    }
    for r in rows:
        summary["outcomes"][r["outcome"]] = summary["outcomes"].get(r["outcome"], 0) + 1
    return summary


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 64
    s = summarize(argv[1])
    os.makedirs(os.path.dirname(os.path.abspath(argv[2])), exist_ok=True)
    with open(argv[2], "w", encoding="utf-8") as f:
        json.dump(s, f, indent=1, sort_keys=False)
        f.write("\n")
    g = s["geomean_vs_eager"]
    print(f"{s['problems']} problems, {len(s['verified'])} verified faster, "
          f"{len(s['no_applicable'])} with no applicable strategy; geomean vs eager "
          f"{g:.3f}x" if g else "no rows")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
