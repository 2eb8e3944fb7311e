"""Shell completion and the man page, made from the flag tables (cli/completion.h):

1. `mlk help --bash` is a bash script (`bash -n`) that, sourced, completes
   commands, a command's flags, a command's subcommands, and file names after
   a flag that takes a value; every flag of every command is in it.
2. `mlk help --zsh` is the same through bashcompinit, as a `#compdef mlk` file.
3. `mlk help --man` is roff that groff formats without a warning, naming every
   command and flag.

usage: completion.py MLK_BINARY WORK_DIR
"""
import os
import re
import shutil
import subprocess
import sys

MLK, WORK = sys.argv[1:3]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_common import check, results  # noqa: E402

shutil.rmtree(WORK, ignore_errors=True)
os.makedirs(WORK)


def out(*args):
    p = subprocess.run([MLK, *args], capture_output=True, text=True)
    check("mlk %s exits 0 with nothing on stderr" % " ".join(args), p.returncode == 0 and p.stderr == "", p.stderr)
    return p.stdout


# Every command and its flags, from `mlk help --markdown` (the same tables).
commands = re.findall(r"^  (\w+) ", out("--help").split("commands:")[1], re.M)
flags = {c: set(re.findall(r"^ {2,}(--[a-z0-9-]+|-[a-z])\b", out(c, "--help"), re.M)) for c in commands}
check("the commands are found", {"check", "run", "serve", "tune", "cache"} <= set(commands), commands)
check("their flags are found", len(flags["serve"]) > 20 and "--json" in flags["check"], flags["serve"])

bash = out("help", "--bash")
path = os.path.join(WORK, "mlk.bash")
with open(path, "w") as f:
    f.write(bash)
p = subprocess.run(["bash", "-n", path], capture_output=True, text=True)
check("the bash completion is valid bash", p.returncode == 0, p.stderr)
for c in commands:
    missing = [f for f in flags[c] if f not in bash]
    check("every flag of `mlk %s` is in the bash completion" % c, not missing, missing)


def complete(*words):
    """The completions bash gives for `mlk WORDS` with the cursor at the last word."""
    script = "source %s; COMP_WORDS=(mlk %s); COMP_CWORD=%d; _mlk; printf '%%s\\n' \"${COMPREPLY[@]}\"" % (
        path, " ".join("'%s'" % w for w in words), len(words))
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=WORK)
    return p.stdout.split()


check("a command from its prefix", complete("ch") == ["check"], complete("ch"))
check("a command's flag", complete("check", "--js") == ["--json"], complete("check", "--js"))
check("a subcommand", "gc" in complete("cache", "g"), complete("cache", "g"))
check("a serve flag", "--access-log-json" in complete("serve", "--access-log"), complete("serve", "--access-log"))
check("file names after a flag with a value", "mlk.bash" in complete("run", "--inputs", "mlk."),
      complete("run", "--inputs", "mlk."))

zsh = out("help", "--zsh")
check("the zsh completion is a #compdef file over bashcompinit",
      zsh.startswith("#compdef mlk\n") and "bashcompinit" in zsh and "complete -F _mlk mlk" in zsh, zsh[:200])

man = out("help", "--man")
path = os.path.join(WORK, "mlk.1")
with open(path, "w") as f:
    f.write(man)
check("the man page starts with .TH MLK 1", man.startswith(".TH MLK 1 "), man[:80])
if shutil.which("groff"):
    p = subprocess.run(["groff", "-man", "-Tutf8", "-ww", "-z", path], capture_output=True, text=True)
    check("groff formats the man page without a warning", p.returncode == 0 and p.stderr == "", p.stderr[-800:])
    text = subprocess.run(["groff", "-man", "-Tutf8", "-P-c", "-P-b", "-P-u", path], capture_output=True,
                          text=True).stdout
    for c in commands:
        missing = [f for f in flags[c] if f not in text]
        check("`mlk %s` and its flags are in the formatted man page" % c, "mlk " + c in text and not missing, missing)
else:
    print("skipped: groff is not installed, so the man page is not formatted")

failed = [r for r in results if not r[1]]
for name, ok, note in results:
    print("%s %s%s" % ("ok  " if ok else "FAIL", name, "" if ok else "\n     %s" % (note,)))
print("%d checks, %d failed" % (len(results), len(failed)))
sys.exit(1 if failed else 0)
