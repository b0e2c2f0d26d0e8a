#!/usr/bin/env python3
"""One record per KernelBench problem from the files scripts/kernelbench-import-h200.sh writes
under OUT: the import's status and reason, the checker self-test's degenerate flags and the
baseline's A/A verdict (or the error that stopped it).

    python3 scripts/kernelbench_summary.py OUT

writes OUT/summary.json ({problems, counts, aa_verdicts}) and OUT/summary.md (a table), and
prints the counts."""
import json
import os
import sys


def last_line(text):
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 64
    out = sys.argv[1]
    static = load(os.path.join(out, "import-static.json"))
    resolved = {}
    p = os.path.join(out, "import-resolved.json")
    if os.path.exists(p):
        resolved = {r["file"]: r for r in load(p)}
    rows = []
    for r in static:
        r = resolved.get(r["file"], r)
        row = {"file": os.path.basename(r["file"]), "status": r["status"], "reason": r["reason"],
               "task": r.get("task", ""), "degenerate": r.get("degenerate", [])}
        folder = os.path.basename(r.get("dir", "")) if r.get("dir") else ""
        for kind in ("selftest", "aa"):
            f = os.path.join(out, kind, folder + ".json")
            e = os.path.join(out, kind, folder + ".err")
            if folder and os.path.exists(f):
                j = load(f)
                if kind == "selftest":
                    row["selftest_degenerate"] = j.get("degenerate", [])
                    row["eager_outside_tolerance"] = len(j.get("eager_outside_tolerance", []))
                    row["nonfinite_references"] = len(j.get("nonfinite_references", []))
                    if row["selftest_degenerate"] and row["status"] == "imported":
                        row["status"] = "flagged"
                else:
                    row["aa"] = {k: j.get(k) for k in
                                 ("verdict", "checks", "aa_ratio", "median_a_s", "failures")}
            elif folder and os.path.exists(e):
                with open(e, encoding="utf-8", errors="replace") as fe:
                    text = fe.read()
                row[kind + "_error"] = last_line(text)[:500]
        rows.append(row)
    counts, aa = {}, {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
        v = r.get("aa", {}).get("verdict") or ("error" if "aa_error" in r else "not_run")
        aa[v] = aa.get(v, 0) + 1
    with open(os.path.join(out, "summary.json"), "w", encoding="utf-8") as f:
        json.dump({"problems": rows, "counts": counts, "aa_verdicts": aa}, f, indent=1)
    with open(os.path.join(out, "summary.md"), "w", encoding="utf-8") as f:
        f.write(f"KernelBench import: {counts}; baseline A/A: {aa}\n\n"
                "| file | status | task | A/A | A/A ratio | reason or error |\n"
                "|---|---|---|---|---:|---|\n")
        for r in rows:
            a = r.get("aa", {})
            verdict = a.get("verdict") or ("error" if "aa_error" in r else "-")
            ratio = f"{a['aa_ratio']:.3f}" if a.get("aa_ratio") else ""
            why = r["reason"]
            if a.get("failures"):
                why = (why + "; " if why else "") + "eager outside the tolerance: " + \
                    a["failures"][0].get("why", "")
            if "aa_error" in r:
                why = (why + "; " if why else "") + r["aa_error"]
            why = why.replace("|", "/").replace("\n", " ")
            f.write(f"| {r['file']} | {r['status']} | {r['task']} | {verdict} | {ratio} | "
                    f"{why[:160]} |\n")
    print(json.dumps({"counts": counts, "aa_verdicts": aa}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
