#!/usr/bin/env python3
"""Draws the include graph between the modules of src/ (its folders) as a mermaid flowchart in
docs/include-graph.md.

    scripts/include-graph.py            writes docs/include-graph.md
    scripts/include-graph.py --check    exits 1 when docs/include-graph.md is not what it would write
    scripts/include-graph.py --out F    writes F instead

Every `#include "module/..."` line of src/**/*.{hpp,cpp,cu,cuh} that names another folder of src/
is one include of that module; the drawing has one arrow per pair of modules, labelled with the
number of such lines. It reads the same lines as tests/unit/architecture_test.cpp, which keeps the
graph acyclic and gpu/ below eval/.
"""
import argparse
import os
import re
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
EXTENSIONS = (".hpp", ".cpp", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')
DEFAULT_OUT = os.path.join("docs", "include-graph.md")


def module_edges(src):
    """(modules, {(from, to): count}) over the sources under `src`."""
    modules = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
    known = set(modules)
    edges = {}
    for module in modules:
        for dirpath, dirnames, filenames in os.walk(os.path.join(src, module)):
            dirnames.sort()
            for name in sorted(filenames):
                if not name.endswith(EXTENSIONS):
                    continue
                with open(os.path.join(dirpath, name), encoding="utf-8", errors="replace") as f:
                    for line in f:
                        m = INCLUDE.match(line)
                        if m and m.group(1) != module and m.group(1) in known:
                            key = (module, m.group(1))
                            edges[key] = edges.get(key, 0) + 1
    return modules, edges


def render(modules, edges):
    lines = [
        "# Module include graph",
        "",
        "<!-- Written by scripts/include-graph.py; `scripts/include-graph.py --check` fails when",
        "     this file is stale. Do not edit by hand. -->",
        "",
        "The folders of `src/` and who includes whom: an arrow `a --> b` says that sources of `a/`",
        "include headers of `b/`, labelled with the number of `#include` lines. The graph has no",
        "cycle and no module includes another's `detail/` (tests/unit/architecture_test.cpp);",
        "`scripts/include-graph.py` redraws it from the sources.",
        "",
        "```mermaid",
        "flowchart TD",
    ]
    # Node ids carry a prefix: some module names (graph) are mermaid keywords.
    for module in modules:
        lines.append(f'  m_{module}["{module}/"]')
    for (a, b), n in sorted(edges.items()):
        lines.append(f"  m_{a} -->|{n}| m_{b}")
    lines += ["```", "", "| module | includes (lines) |", "| --- | --- |"]
    for module in modules:
        out = [f"{b} ({n})" for (a, b), n in sorted(edges.items()) if a == module]
        lines.append(f"| {module}/ | {', '.join(out) if out else '-'} |")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when the file is not what this script would write")
    parser.add_argument("--out", default=os.path.join(ROOT, DEFAULT_OUT),
                        help=f"the markdown file (default: {DEFAULT_OUT})")
    args = parser.parse_args()

    text = render(*module_edges(os.path.join(ROOT, "src")))
    if args.check:
        try:
            with open(args.out, encoding="utf-8") as f:
                current = f.read()
        except FileNotFoundError:
            current = None
        if current != text:
            print(f"include-graph: {os.path.relpath(args.out, ROOT)} is stale "
                  "(run scripts/include-graph.py)", file=sys.stderr)
            return 1
        return 0
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
