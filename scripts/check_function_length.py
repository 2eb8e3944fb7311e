#!/usr/bin/env python3
"""Fails when a function body anywhere in the tree but tests/ is over 120 lines.

The folders scanned are found, not listed: every top-level folder holding a
.cpp, .h or .cc file, but tests/, build trees (build/, build-*/) and hidden
folders (.venv/, .git/, ...); see source_dirs.

A simple scan, not a C++ parser: comments, string and character literals are
blanked out, then braces are matched. A brace opened directly inside a
namespace, class, struct or union (or at file level) whose header ends in `)`
(optionally followed by qualifiers such as `const`, `override`, an
initializer list or a trailing return type) opens a function body; its length
is the number of lines from the header's `{` to the matching `}`. Lambdas and
local classes count toward the function that holds them.

Functions listed in scripts/function_length_pending.txt (`path name`) are
reported but do not fail the check; a listed function that is no longer long
does fail it, so that the list only shrinks.

Usage: check_function_length.py ROOT [--limit N] [--self-test]
"""
import pathlib
import re
import sys
import tempfile

SOURCE_SUFFIXES = (".cpp", ".h", ".cc")
# Top-level folders never scanned: the tests, and build trees.
SKIPPED_DIRS = re.compile(r"^(tests|build|build-.*)$")
CONTAINER = re.compile(r"^(template\s*<.*>\s*)?(inline\s+)?(namespace|class|struct|union|enum)\b[^()]*$")
# `) const`, `) override`, `) -> T`, `) : member_(x), other_{y}`.
FUNCTION_HEADER = re.compile(r"\)\s*(const|override|noexcept|final|mutable|&|\s)*(->[^{]*)?$|\)\s*:[^;]*$")
CONTROL = re.compile(r"\b(if|for|while|switch|catch|do|else|return)\s*$")


def blank(text):
    """Comments and literals replaced by spaces; newlines kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == 'R' and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            k = text.find("(", i)
            delim = ")" + text[i + 2:k] + '"'
            j = text.find(delim, k)
            j = n if j < 0 else j + len(delim)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # digit separator 1'000
                out.append(" ")
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(" " * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    # Preprocessor lines (with their continuations) are not code here.
    return re.sub(r"(?m)^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", lambda m: re.sub(r"[^\n]", " ", m.group(0)), "".join(out))


def functions(text):
    """Yields (name, first_line, line_count) for each function body."""
    code = blank(text)
    stack = []  # for each open brace: "container", "function" or "other"
    starts = []
    last = 0  # where the current header began (after the previous ; { or })
    for i, c in enumerate(code):
        if c == "{":
            header = code[last:i]
            kind = "other"
            inside_container = all(k == "container" for k in stack)
            if inside_container:
                h = " ".join(header.split())
                h = re.sub(r"^(public|private|protected)\s*:\s*", "", h)
                if CONTAINER.match(h) or re.fullmatch(r"extern\s*", h):
                    kind = "container"
                elif FUNCTION_HEADER.search(h) and "(" in h:
                    head = h.split("(")[0]
                    if not CONTROL.search(head) and "=" not in head and not head.rstrip().endswith("]"):
                        kind = "function"
            stack.append(kind)
            if kind == "function":
                name = re.findall(r"([~\w:]+)\s*\(", header)
                starts.append((name[0] if name else "?", code.count("\n", 0, i) + 1, len(stack)))
            last = i + 1
        elif c == "}":
            if stack:
                if stack[-1] == "function" and starts and starts[-1][2] == len(stack):
                    name, line, _ = starts.pop()
                    yield name, line, code.count("\n", 0, i) + 1 - line + 1
                stack.pop()
            last = i + 1
        elif c == ";":
            last = i + 1


def pending(root):
    p = root / "scripts" / "function_length_pending.txt"
    if not p.exists():
        return set()
    return {tuple(l.split()) for l in p.read_text().splitlines() if l.strip() and not l.startswith("#")}


def source_dirs(root):
    """The top-level folders of `root` that hold C++ sources (at any depth),
    in name order: all but hidden ones, tests/ and build trees."""
    out = []
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        if d.name.startswith(".") or SKIPPED_DIRS.match(d.name):
            continue
        if any(p.suffix in SOURCE_SUFFIXES for p in d.rglob("*")):
            out.append(d.name)
    return out


def scan(root, limit, dirs):
    allowed = pending(root)
    seen = set()
    bad = []
    for d in dirs:
        for p in sorted((root / d).rglob("*")):
            if p.suffix not in SOURCE_SUFFIXES or not p.is_file():
                continue
            rel = p.relative_to(root).as_posix()
            if any(part.startswith(".") for part in p.relative_to(root).parts):
                continue
            for name, line, count in functions(p.read_text(errors="replace")):
                if count <= limit:
                    continue
                if (rel, name) in allowed:
                    seen.add((rel, name))
                    print(f"{rel}:{line}: function `{name}` is {count} lines long (pending split, listed)")
                    continue
                bad.append(f"{rel}:{line}: function `{name}` is {count} lines long (limit {limit})")
    for rel, name in sorted(allowed - seen):
        bad.append(f"{rel}: `{name}` is listed in scripts/function_length_pending.txt but is no longer over "
                   f"{limit} lines; remove the line")
    return bad


def self_test():
    short = "namespace a {\nint f(int x) {\n  return x;\n}\n}\n"
    long_body = "struct S {\n  void g() const {\n" + "    x();\n" * 130 + "  }\n};\n"
    tricky = 'int h() {\n  const char* s = "}";\n  // }\n  return 0;\n}\n'
    got = list(functions(short))
    assert got == [("f", 2, 3)], got
    got = list(functions(long_body))
    assert got == [("g", 2, 132)], got
    got = list(functions(tricky))
    assert got == [("h", 1, 5)], got
    ctrl = "void k() {\n  if (x) {\n  }\n}\n"
    assert list(functions(ctrl)) == [("k", 1, 4)]
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        for f in ["lang/a.cpp", "service/sub/b.cc", "tests/c.cpp", "build/d.cpp", "build-asan/e.h", ".venv/f.h",
                  "docs/g.md"]:
            (root / f).parent.mkdir(parents=True, exist_ok=True)
            (root / f).write_text("")
        got = source_dirs(root)
        assert got == ["lang", "service"], got
    print("self-test passed")


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--")]
    limit = 120
    if "--limit" in argv:
        limit = int(argv[argv.index("--limit") + 1])
        args = [a for a in args if a != str(limit)]
    if "--self-test" in argv:
        self_test()
        return 0
    root = pathlib.Path(args[0] if args else ".")
    dirs = source_dirs(root)
    bad = scan(root, limit, dirs)
    for b in bad:
        print(b)
    if bad:
        print(f"{len(bad)} function(s) over {limit} lines; split them into steps")
        return 1
    print(f"every function in {', '.join(d + '/' for d in dirs)} is at most {limit} lines, but those listed as pending")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
