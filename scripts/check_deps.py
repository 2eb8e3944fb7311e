"""Checks the dependency rules between mlk's folders (docs/architecture.md,
"Folders and their dependencies"): every `#include "x/..."` of a C or C++
file must name a folder that the including file's folder may include, and a
folder marked Halide-free must not include Halide.h. The rules are read from
the tables of docs/architecture.md, so the document and the test cannot
disagree. Used by the test arch.dependencies; arch.dependencies_self_test
runs --self-test.

usage: check_deps.py SOURCE_ROOT
       check_deps.py SOURCE_ROOT --self-test

Prints `FILE:LINE: includes "PATH": RULE` for each forbidden include and
exits 1; exits 0 when every include is allowed. A known violation (the table
"Known violations", a file and the path it includes) is allowed; one that is
no longer in the tree is reported as a note, so that the table shrinks.
"""
import os
import re
import sys
import tempfile

DOC = os.path.join("docs", "architecture.md")
SOURCE_EXT = (".c", ".cc", ".cpp", ".h", ".hpp", ".def", ".inc")
# Trees that are not sources of mlk: build outputs, the virtual environments (.venv-bench: the benchmark peers,
# .venv-moto: the S3 endpoint of scripts/cluster.sh),
# the language definition (text only).
SKIP_DIRS = {".git", ".venv", ".venv-bench", ".venv-moto", "build", "phase-0", "__pycache__"}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')
HALIDE_RE = re.compile(r"^Halide(Runtime[A-Za-z]*)?\.h$")
CELL_RE = re.compile(r"`([^`]+)`")


class Rules:
    """The folder table and the known violations of docs/architecture.md."""

    def __init__(self):
        self.allowed = {}        # folder -> set of folders, or None for anything
        self.halide_free = set()  # folders that must not include Halide.h
        self.known = {}          # (file, included path) -> rule text


def cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def read_tables(doc_text):
    """Yields (header cells, [row cells]) for every Markdown table."""
    lines = doc_text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].lstrip().startswith("|") and i + 1 < len(lines) and re.match(r"^\s*\|[\s:|-]+\|\s*$", lines[i + 1]):
            header = [c.lower() for c in cells(lines[i])]
            rows = []
            i += 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                rows.append(cells(lines[i]))
                i += 1
            yield header, rows
        else:
            i += 1


def parse_rules(doc_text):
    """Rules from the doc's tables; raises ValueError when a table is missing or malformed."""
    rules = Rules()
    for header, rows in read_tables(doc_text):
        if header[:1] == ["folder"] and "may include" in header and "halide" in header:
            inc, hal = header.index("may include"), header.index("halide")
            for row in rows:
                folder = CELL_RE.findall(row[0])
                if len(folder) != 1 or not folder[0].endswith("/"):
                    raise ValueError(f"{DOC}: folder table row `{row[0]}` does not name one folder like `lang/`")
                name = folder[0].rstrip("/")
                text = row[inc].lower()
                if text == "anything":
                    rules.allowed[name] = None
                elif text == "nothing":
                    rules.allowed[name] = set()
                else:
                    deps = CELL_RE.findall(row[inc])
                    if not deps or any(not d.endswith("/") for d in deps):
                        raise ValueError(f"{DOC}: folder `{name}/`: \"may include\" must be nothing, anything or "
                                         f"folders like `base/`, not `{row[inc]}`")
                    rules.allowed[name] = {d.rstrip("/") for d in deps}
                if row[hal].lower().startswith("no"):
                    rules.halide_free.add(name)
        elif header[:2] == ["file", "includes"] and "rule" in header:
            rule = header.index("rule")
            for row in rows:
                f, inc = CELL_RE.findall(row[0]), CELL_RE.findall(row[1])
                if len(f) != 1 or len(inc) != 1:
                    raise ValueError(f"{DOC}: known violation row `{' | '.join(row)}` needs one `file` and one `path`")
                rules.known[(f[0], inc[0])] = row[rule]
    if not rules.allowed:
        raise ValueError(f"{DOC}: no folder table (columns: folder, ..., may include, Halide)")
    for name, deps in rules.allowed.items():
        for d in deps or ():
            if d not in rules.allowed:
                raise ValueError(f"{DOC}: folder `{name}/` may include `{d}/`, which has no row of its own")
    return rules


def rule_text(rules, folder):
    deps = rules.allowed[folder]
    if not deps:
        return f"{folder}/ depends on nothing of mlk"
    return f"{folder}/ may include only " + ", ".join(f"{d}/" for d in sorted(deps))


def sources(root):
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = sorted(d for d in dirnames
                             if d not in SKIP_DIRS and not (rel_dir == "." and d.startswith("build")))
        for name in sorted(filenames):
            if name.endswith(SOURCE_EXT):
                yield os.path.relpath(os.path.join(dirpath, name), root)


def check(root, rules, used=None):
    """Returns (violations, notes): lines `FILE:LINE: ...` to print. `used`, when given, collects
    the edges (folder, folder it includes) the tree uses."""
    violations, used_known, unruled = [], set(), set()
    for rel in sources(root):
        parts = rel.split(os.sep)
        if len(parts) < 2:
            continue  # a file at the top of the tree belongs to no folder
        folder = parts[0]
        if folder not in rules.allowed:
            unruled.add(folder)
            continue
        if used is not None:
            used.add((folder, ""))  # the folder has sources: its row's edges are checked
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                m = INCLUDE_RE.match(line)
                if not m:
                    continue
                quote, path = m.groups()
                where = f"{rel}:{lineno}: includes {quote}{path}{'>' if quote == '<' else quote}"
                if HALIDE_RE.match(os.path.basename(path)) and folder in rules.halide_free:
                    violations.append(f"{where}: {folder}/ is Halide-free")
                    continue
                if quote != '"':
                    continue
                if path.startswith("."):
                    target = os.path.normpath(os.path.join(os.path.dirname(rel), path)).split(os.sep)[0]
                else:
                    target = path.split("/")[0] if "/" in path else folder
                if target == folder or target not in rules.allowed:
                    continue  # the folder itself, or not a folder of mlk ("nlohmann/json.hpp")
                if used is not None:
                    used.add((folder, target))
                deps = rules.allowed[folder]
                if deps is None or target in deps:
                    continue
                key = (rel.replace(os.sep, "/"), path)
                if key in rules.known:
                    used_known.add(key)
                    continue
                violations.append(f"{where}: {rule_text(rules, folder)}")
    for folder in sorted(unruled):
        violations.append(f"{folder}/: has sources but no row in the folder table of {DOC}")
    notes = [f"{DOC}: known violation `{f}` includes `{p}` is no longer in the tree; remove its row"
             for (f, p) in sorted(set(rules.known) - used_known)]
    return violations, notes


def unused_edges(rules, used):
    """The table's edges no include of the tree uses: an edge is listed only once code needs it,
    so a new one is caught (and reviewed) when it first appears."""
    present = {f for (f, _) in used}
    return [f"{DOC}: `{folder}/` may include `{d}/`, but nothing in {folder}/ does; remove `{d}/` from its row"
            for folder, deps in sorted(rules.allowed.items()) if deps and folder in present
            for d in sorted(deps) if d and (folder, d) not in used]


def run(root):
    try:
        with open(os.path.join(root, DOC), encoding="utf-8") as f:
            rules = parse_rules(f.read())
    except (OSError, ValueError) as e:
        print(f"check_deps: {e}")
        return 1
    used = set()
    violations, notes = check(root, rules, used)
    violations += unused_edges(rules, used)
    for n in notes:
        print(f"note: {n}")
    for v in violations:
        print(v)
    if violations:
        print(f"{len(violations)} forbidden include(s) or unused edge(s); the rules are in {DOC}")
        return 1
    return 0


def self_test(root):
    """Plants forbidden includes in a copy of the rules and checks each is caught."""
    with open(os.path.join(root, DOC), encoding="utf-8") as f:
        rules = parse_rules(f.read())
    failures = []

    def tree(files):
        d = tempfile.mkdtemp(prefix="check_deps_")
        for rel, text in files.items():
            os.makedirs(os.path.join(d, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(d, rel), "w", encoding="utf-8") as out:
                out.write(text)
        return d

    def expect(name, files, wanted):
        violations, _ = check(tree(files), rules)
        if wanted is None:
            if violations:
                failures.append(f"{name}: expected no violation, got {violations}")
        elif not any(wanted in v for v in violations):
            failures.append(f"{name}: expected a violation containing `{wanted}`, got {violations}")

    expect("base on lang", {"base/planted.h": '#pragma once\n\n#include "lang/ir.h"\n'},
           'base/planted.h:3: includes "lang/ir.h": base/ depends on nothing of mlk')
    expect("lang on cache", {"lang/planted.cpp": '#include "base/status.h"\n#include "cache/store.h"\n'},
           'lang/planted.cpp:2: includes "cache/store.h": lang/ may include only base/')
    expect("client on lang", {"client/planted.cpp": '#include "lang/ir.h"\n'}, 'client/planted.cpp:1:')
    expect("cache with Halide", {"cache/planted.cpp": "#include <Halide.h>\n"},
           "cache/planted.cpp:1: includes <Halide.h>: cache/ is Halide-free")
    expect("runtime on autotune", {"runtime/planted.cpp": '#include "autotune/tuner.h"\n'}, "runtime/planted.cpp:1:")
    expect("relative path", {"cache/sub/planted.cpp": '#include "../../lang/ir.h"\n'}, "cache/sub/planted.cpp:1:")
    expect("a folder without a rule", {"newfolder/planted.cpp": '#include "base/status.h"\n'},
           "newfolder/: has sources but no row")
    expect("cli on anything", {"cli/planted.cpp": '#include "scheduler/lower.h"\n#include "service/api.h"\n'}, None)
    expect("allowed edges", {"lang/ok.cpp": '#include "base/status.h"\n#include "lang/ir.h"\n#include <vector>\n'},
           None)
    used = set()
    check(tree({"lang/ok.cpp": '#include "base/status.h"\n', "interop/x.cpp": '#include "base/status.h"\n'}),
          rules, used)
    unused = unused_edges(rules, used)
    if not any("`interop/` may include `lang/`, but nothing in interop/ does" in u for u in unused) or \
            any(u.startswith(f"{DOC}: `lang/`") for u in unused):
        failures.append(f"unused edges: expected interop/ -> lang/ and nothing of lang/, got {unused}")
    if rules.known:
        (f, p) = sorted(rules.known)[0]
        expect("a known violation", {f: f'#include "{p}"\n'}, None)
    try:
        parse_rules("| folder | may include | Halide |\n| --- | --- | --- |\n| `lang/` | `base/` | no |\n")
        failures.append("a rule naming a folder without a row was accepted")
    except ValueError:
        pass
    for f in failures:
        print(f"self-test: {f}")
    if failures:
        return 1
    print("self-test: every planted forbidden include was caught")
    return 0


def main(argv):
    if len(argv) not in (2, 3) or (len(argv) == 3 and argv[2] != "--self-test"):
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    return self_test(argv[1]) if len(argv) == 3 else run(argv[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
