#!/usr/bin/env python3
"""Keeps a KernelBench optimize pass's per-problem results in the tree, small, so that a pass
spread over several GPU calls on fresh machines resumes where it stopped.

  scripts/kernelbench_keep_results.py keep WORK DEST     # WORK/results/*.json -> DEST/*.json
  scripts/kernelbench_keep_results.py seed DEST WORK DEVICE
                                      # DEST/*.json measured on DEVICE -> WORK/results/

`keep` writes each problem's `optimize --json` result without what only explains a step (the
hypotheses, the bottleneck states' numbers): what the summary reads stays, with the device the
result was measured on and the build, driver and toolkit of the call that measured it (kept from
the first time the result was kept). `seed` copies back the results measured on the named device (a pass never
mixes devices) that WORK does not hold yet; it prints how many.
"""
import json
import os
import sys


def device_of(result):
    for check in result.get("preflight", {}).get("checks", []):
        if check.get("name") == "device":
            return (check.get("data") or {}).get("name")
    return None


def trim_state(state):
    if not isinstance(state, dict):
        return state
    return {k: state[k] for k in ("state", "sentence", "source") if k in state}


def trim(result):
    out = {k: result[k] for k in ("run", "candidates_evaluated", "screening") if k in result}
    out["preflight"] = {
        "checks": [c for c in result.get("preflight", {}).get("checks", []) if c.get("name") == "device"]
    }
    tasks = []
    for t in result.get("tasks", []):
        t = dict(t)
        t.pop("best_source", None)
        for k in ("baseline_state", "final_state"):
            if k in t:
                t[k] = trim_state(t[k])
        t["steps"] = [
            {k: v for k, v in s.items() if k not in ("hypothesis", "new_state", "why")}
            for s in t.get("steps", [])
        ]
        tasks.append(t)
    out["tasks"] = tasks
    return out


def without_environment(result):
    return {k: v for k, v in result.items() if k != "environment"}


def keep(work, dest):
    os.makedirs(dest, exist_ok=True)
    n = 0
    try:
        with open(os.path.join(work, "env.json")) as f:
            env = json.load(f)
    except (OSError, ValueError):
        env = {}
    src = os.path.join(work, "results")
    for name in sorted(os.listdir(src)):
        if not name.endswith(".json") or name.endswith(".blocked.json"):
            continue
        with open(os.path.join(src, name)) as f:
            result = json.load(f)
        kept = trim(result)
        # The build and toolkit the call that measured it ran (a pass may span several builds).
        kept.setdefault("environment", {k: env.get(k) for k in ("build", "commit", "driver", "toolkit")})
        # Kept before from the same measurement (a work folder that spans calls), it keeps the
        # build kept then; a problem measured again is stamped with this call's.
        if os.path.exists(os.path.join(dest, name)):
            with open(os.path.join(dest, name)) as f:
                before = json.load(f)
            if without_environment(before) == without_environment(kept):
                kept["environment"] = before.get("environment", kept["environment"])
        with open(os.path.join(dest, name), "w") as f:
            json.dump(kept, f, indent=None, sort_keys=True, separators=(",", ":"))
            f.write("\n")
        n += 1
    print(f"kept {n} results in {dest}")


def seed(dest, work, device):
    os.makedirs(os.path.join(work, "results"), exist_ok=True)
    n = skipped = 0
    if os.path.isdir(dest):
        for name in sorted(os.listdir(dest)):
            to = os.path.join(work, "results", name)
            if not name.endswith(".json") or os.path.exists(to):
                continue
            with open(os.path.join(dest, name)) as f:
                result = json.load(f)
            if device_of(result) != device:
                skipped += 1
                continue
            with open(to, "w") as f:
                json.dump(result, f)
            n += 1
    print(f"seeded {n} results from {dest}" + (f" ({skipped} from another device left out)" if skipped else ""))


def main(argv):
    if len(argv) == 4 and argv[1] == "keep":
        keep(argv[2], argv[3])
    elif len(argv) == 5 and argv[1] == "seed":
        seed(argv[2], argv[3], argv[4])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
