#!/usr/bin/env python3
"""Lists the functions of the C++/CUDA sources that are longer than a limit, longest first.

    scripts/long-functions.py [--limit LINES] [--check] [PATH ...]   (default: src/, 200 lines)
    scripts/long-functions.py --check LIMIT [PATH ...]   (--limit LIMIT --check)

A function is counted from the line its declaration begins on to the line of its closing brace.
The scan matches braces over the source with comments, string and character literals and
preprocessor lines blanked out: a `{` met at namespace or class scope opens a function when the
text before it (back to the previous `;`, `{` or `}`) holds a parameter list and is not a
namespace, class, struct, union, enum or an initialised variable (`= {`, a table). Lambdas and
local classes are part of the function they are written in. Prints `LINES path:line name`; with
--check, exits 1 when any function is over the limit (without it, always 0): `--check 200` is the
build's check that no function of src/ is over 200 lines.
"""
import argparse
import os
import re
import sys

EXTENSIONS = (".cpp", ".hpp", ".h", ".cu", ".cuh", ".cc")
SCOPE_HEAD = re.compile(r"^\s*(template\s*<.*>\s*)?(inline\s+)?(namespace|class|struct|union|enum)\b",
                        re.S)
EXTERN_C = re.compile(r'^\s*extern\s+"C"\s*$')


def blank(text):
    """The source with comments, literals and preprocessor lines replaced by spaces (newlines
    kept, so that offsets and line numbers stay those of the file)."""
    out = list(text)
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":
            # a preprocessor line, with its continuations
            while i < n and text[i] != "\n":
                if text[i] == "\\" and i + 1 < n and text[i + 1] == "\n":
                    out[i] = " "
                    i += 2
                    continue
                out[i] = " "
                i += 1
            continue
        if c == "\n":
            line_start = True
            i += 1
            continue
        if not c.isspace():
            line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                out[i] = " "
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
            for k in range(i, end):
                if text[k] != "\n":
                    out[k] = " "
            i = end
            continue
        raw = re.match(r'R"([^(\s]*)\(', text[i:i + 20])
        if raw and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = ")" + raw.group(1) + '"'
            end = text.find(close, i + raw.end())
            end = n if end < 0 else end + len(close)
            for k in range(i, end):
                if text[k] != "\n":
                    out[k] = " "
            out[i] = '"'
            out[end - 1] = '"'
            i = end
            continue
        if c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator: 1'000
                i += 1
                continue
            k = i + 1
            while k < n and text[k] != c and text[k] != "\n":
                k += 2 if text[k] == "\\" else 1
            for m in range(i + 1, min(k, n)):
                out[m] = " "
            i = k + 1
            continue
        i += 1
    return "".join(out)


def opens_function(head):
    """Whether the text before a `{` at namespace or class scope is a function's declaration."""
    h = head.strip()
    if not h or "(" not in h:
        return False
    if SCOPE_HEAD.match(h) or EXTERN_C.match(h):
        return False
    depth = 0
    for ch in h:  # an `=` outside parentheses: an initialised variable (or a table)
        if ch in "([<":
            depth += 1
        elif ch in ")]>":
            depth -= 1
        elif ch == "=" and depth == 0:
            return False
    return h.endswith(")") or re.search(r"\)\s*[\w\s:&*<>,\-]*$", h) is not None or \
        re.search(r"\)\s*:\s*", h) is not None


def name_of(head):
    h = re.sub(r"\s+", " ", head.strip())
    m = re.search(r"([~\w:]+(?:operator\s*[^\s(]+)?)\s*\(", h)
    return m.group(1) if m else h[:60]


def functions(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    code = blank(text)
    line_of = []
    line = 1
    for ch in code:
        line_of.append(line)
        if ch == "\n":
            line += 1
    stack = []  # one entry per open brace: "scope" or ("function", start offset, name)
    last_stop = 0
    for i, ch in enumerate(code):
        if ch in ";":
            if not any(s != "scope" for s in stack):
                last_stop = i + 1
        elif ch == "{":
            inside = any(s != "scope" for s in stack)
            if inside:
                stack.append("block")
                continue
            head = code[last_stop:i]
            if opens_function(head):
                start = last_stop + (len(head) - len(head.lstrip()))
                stack.append(("function", start, name_of(head)))
            elif "=" in head or head.strip().endswith("]") or head.strip().endswith(","):
                stack.append("block")  # an initialiser: its braces are data
            else:
                stack.append("scope")
            last_stop = i + 1
        elif ch == "}":
            if not stack:
                continue
            top = stack.pop()
            if isinstance(top, tuple):
                first, last = line_of[top[1]], line_of[i]
                yield last - first + 1, first, top[2]
            if not any(s != "scope" for s in stack):
                last_stop = i + 1


def sources(paths):
    for p in paths:
        if os.path.isfile(p):
            yield p
            continue
        for dirpath, dirnames, filenames in os.walk(p):
            dirnames.sort()
            for name in sorted(filenames):
                if name.endswith(EXTENSIONS):
                    yield os.path.join(dirpath, name)


def check_limit_args(argv):
    """`--check LIMIT` (or `--check=LIMIT`) as `--check --limit LIMIT`; a plain `--check` stays."""
    out = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--check" and i + 1 < len(argv) and argv[i + 1].isdigit():
            out += ["--check", "--limit", argv[i + 1]]
            i += 2
            continue
        if a.startswith("--check="):
            out += ["--check", "--limit", a[len("--check="):]]
        else:
            out.append(a)
        i += 1
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=200, help="report functions longer than this")
    ap.add_argument("--check", action="store_true",
                    help="exit 1 when any function is reported (--check LIMIT: over LIMIT lines)")
    ap.add_argument("paths", nargs="*", default=["src"])
    args = ap.parse_args(check_limit_args(sys.argv[1:]))
    found = []
    for path in sources(args.paths):
        for lines, line, name in functions(path):
            if lines > args.limit:
                found.append((lines, path, line, name))
    found.sort(key=lambda f: (-f[0], f[1], f[2]))
    for lines, path, line, name in found:
        print(f"{lines:5d} {path}:{line} {name}")
    print(f"long-functions: {len(found)} function(s) over {args.limit} lines", file=sys.stderr)
    return 1 if args.check and found else 0


if __name__ == "__main__":
    sys.exit(main())
