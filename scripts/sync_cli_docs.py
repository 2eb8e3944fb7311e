"""Keeps the generated blocks of docs/cli.md equal to what the mlk binary
makes from its flag tables (cli/flags.h): `mlk help --markdown` prints, for
`mlk --help` and for each command, a fenced block of its help text between

    <!-- BEGIN GENERATED: mlk NAME --help (...) -->
    <!-- END GENERATED -->

markers; docs/cli.md holds the same markers, each under its command's
heading, with hand-written text around them. This script replaces every
marked block of the page with the binary's. With --check it changes nothing
and fails (exit 1) when a block differs, when the page lacks a block the
binary prints (a new command: put its markers under its heading) or holds one
the binary does not, or when a block is not exactly what `mlk NAME --help`
prints. Used by the test cli.docs_generated (with --check), and by hand
after changing a flag table.

usage: sync_cli_docs.py MLK_BINARY DOCS_CLI_MD [--check]
"""
import re
import subprocess
import sys

BLOCK = re.compile(r"^<!-- BEGIN GENERATED: (mlk [^(]*?) \([^\n]*-->\n.*?^<!-- END GENERATED -->\n", re.M | re.S)


def blocks(text):
    """{`mlk NAME --help`: the whole block} of a text, in order."""
    return {m.group(1): m.group(0) for m in BLOCK.finditer(text)}


def main():
    mlk, path = sys.argv[1], sys.argv[2]
    check = "--check" in sys.argv[3:]
    generated = subprocess.run([mlk, "help", "--markdown"], capture_output=True, text=True, check=True).stdout
    want = blocks(generated)
    problems = []
    for what, block in want.items():
        helptext = subprocess.run([mlk, *what.split()[1:]], capture_output=True, text=True).stdout
        if block.split("```\n")[1] != helptext:
            problems.append(f"`mlk help --markdown` does not hold exactly what `{what}` prints")
    text = open(path).read()
    have = blocks(text)
    stale = [w for w in have if w in want and have[w] != want[w]]
    problems += [f"{path} has no generated block for `{w}` (add its markers under its heading)" for w in want if w not in have]
    problems += [f"{path} has a generated block for `{w}`, which mlk does not print" for w in have if w not in want]
    if check:
        if stale:
            problems.append(f"{path} is out of date for: " + ", ".join(f"`{w}`" for w in stale) +
                            f" (run scripts/sync_cli_docs.py build/mlk {path})")
        for p in problems:
            print(p, file=sys.stderr)
        if problems:
            sys.exit(1)
        print(f"{path}: all {len(want)} generated blocks match the flag tables")
        return
    updated = BLOCK.sub(lambda m: want.get(m.group(1), m.group(0)), text)
    open(path, "w").write(updated)
    for p in problems:
        print(p, file=sys.stderr)
    print("updated: " + (", ".join(stale) if stale else "nothing"))
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
