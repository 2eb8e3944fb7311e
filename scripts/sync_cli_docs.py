"""Keeps the usage blocks of docs/cli.md equal to what `mlk COMMAND --help`
prints: the first ``` block after each "## `mlk X`" heading is replaced by
the binary's output. Used by the test cli.docs_match_help (with --check),
and by hand after changing a usage text.

usage: sync_cli_docs.py MLK_BINARY DOCS_CLI_MD [--check]
"""
import re
import subprocess
import sys


def main():
    mlk, path = sys.argv[1], sys.argv[2]
    check = "--check" in sys.argv[3:]
    text = open(path).read()
    out, pos, stale = [], 0, []
    for m in re.finditer(r"^## `mlk ([a-z-]+)`[^\n]*\n", text, re.M):
        cmd = m.group(1)
        args = ["--help"] if cmd == "--help" else [cmd, "--help"]
        helptext = subprocess.run([mlk, *args], capture_output=True, text=True).stdout.rstrip("\n")
        start = text.find("```\n", m.end())
        end = text.find("\n```", start + 4)
        if start < 0 or end < 0:
            continue
        if text[start + 4:end] != helptext:
            stale.append(cmd)
        out.append(text[pos:start + 4] + helptext)
        pos = end
    out.append(text[pos:])
    if check:
        if stale:
            print("docs/cli.md is out of date for: " + ", ".join(stale) +
                  " (run scripts/sync_cli_docs.py build/mlk docs/cli.md)", file=sys.stderr)
            sys.exit(1)
        print("docs/cli.md matches --help for every command")
        return
    open(path, "w").write("".join(out))
    print("updated: " + (", ".join(stale) if stale else "nothing"))


if __name__ == "__main__":
    main()
