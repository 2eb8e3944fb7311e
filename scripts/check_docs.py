"""Checks that what docs/ quotes from mlk exists: every flag, constant,
environment variable, exit status and quoted message must be found in the
sources or in `mlk --help` / `mlk COMMAND --help`. Used by the test
docs.quoted_names_exist; docs.check_docs_self_test runs --self-test.

usage: check_docs.py MLK_BINARY SOURCE_ROOT [DOC.md...]   (default: every SOURCE_ROOT/docs/**/*.md,
       SOURCE_ROOT/decisions/*.md and SOURCE_ROOT/phase-1/*.md)
       check_docs.py MLK_BINARY SOURCE_ROOT --self-test

Prints `DOC:LINE: WHAT` for each quote that is not found and exits 1; exits 0
when everything is found.

What is checked, and where it must be found (the convention docs follow,
described for writers in docs/ci.md):

- Flags (`--name`). In a code block line or an inline code span that starts
  with an mlk invocation (`mlk CMD ...`, `$ mlk CMD ...`, `build/mlk CMD ...`)
  or with a message of mlk (`mlk CMD: ...`), a flag must be in the help of
  CMD (`mlk CMD --help`). In prose, a flag must be in the help of one of the
  mlk commands named in the same paragraph, list item or table row, or in the
  headings above it, when any is named; otherwise in some command's help.
  Flags of a repository script (a line or span that starts with a path of the
  repository, e.g. `scripts/sync_cli_docs.py ... --check`) must occur in that
  script. Lines and spans that start with another program (cc, cmake, ctest,
  curl, ...) are not checked.
- Constants and environment variables: every `MLK_NAME` (also `$MLK_NAME`,
  and `MLK_PREFIX_*` as a prefix) must occur as a word in the sources; every
  other `$NAME` quoted in prose or an inline span (not in code blocks, where
  `$` is the shell's) must occur in the sources too (a getenv).
- Exit statuses: "exit N", "exits N", "exit status N", "exit code N" must be
  a status that the help of the command it is attributed to (as for flags) or
  `mlk --help` names.
- Messages (text presented as program output):
  * inline code written with double backticks (``like `this` one``), the
    docs' way of quoting a message that contains backticks;
  * inline code that starts with `mlk: `, `mlk CMD: ` or `error: `;
  * inline code in a table column whose header contains "message";
  * in code blocks without a language (or `console`, `text`): the output lines
    after a `$ mlk ...` prompt line (until the next `$ ` line), and any line
    that starts with `mlk: `, `mlk CMD: ` or `error: `;
  * every line of a code block whose language is `output` (templates of
    output lines, with CAPITALISED placeholders).
  A message is found when its fixed text is made of the string literals of
  the sources (C, C++ and Python, split at format directives and newlines):
  every run of text taken from a literal must be used as the program prints it
  (up to a placeholder, a variable value or the quote's own ends), and no two
  ordinary words may be left that no literal accounts for. Variable parts are
  numbers, paths, names in backticks, CAPITALISED placeholders, `...`, the
  names of examples/*.tl, profiles and commands, and text after Halide's
  `Error: ` or a system error (`No such file or directory`).
"""
import ast
import glob
import io
import os
import re
import subprocess
import sys
import tempfile
import tokenize

SOURCE_DIRS = ["artifact", "autotune", "base", "bench", "cache", "cli", "client", "interop", "lang", "python", "runtime", "scheduler", "service",
               "targets", "spmd", "verify", "examples", "scripts"]
C_EXT = (".cpp", ".cc", ".c", ".h", ".hpp")
EXTERNAL_TOOLS = {
    "cc", "gcc", "g++", "clang", "c++", "cmake", "ctest", "ninja", "make", "curl", "wget", "ptxas", "nvcc", "readelf",
    "nm", "objdump", "ldd", "git", "pip", "pip3", "python", "python3", "ccache", "docker", "sudo", "apt-get", "apt",
    "sqlite3", "jq", "ls", "cat", "rm", "wc", "grep", "echo", "cd", "export", "ssh", "tar", "kill", "timeout", "env",
    "perf", "numactl", "taskset", "valgrind", "gdb", "torchrun", "nproc", "flock", "head", "tail", "sed", "awk",
}
SYSTEM_ERRORS = ["No such file or directory", "Permission denied", "cannot open shared object file",
                 "Connection refused", "File exists", "Is a directory", "No space left on device",
                 "Read-only file system", "Address already in use"]

# Host names and the like that the docs' examples show.
EXAMPLE_NAMES = {"vm"}
# All-capitals words that are words, not placeholders such as NAME or DIR.
ACRONYMS = {"GPU", "CPU", "NOT", "UTC", "ETA", "JIT", "PTX", "CUDA", "ABI", "OK", "API", "HTTP", "JSON", "SHA",
            "NULL", "IR", "RMS", "AVX", "SM"}
FLAG_RE = re.compile(r"(?<![\w\-/.=])--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)")
CONST_RE = re.compile(r"(?<![\w])\$?(MLK_[A-Z0-9_]*[A-Z0-9](?:_\*)?|MLK_[A-Z0-9_]*_\*)")
ENV_RE = re.compile(r"(?<![\w$\\])\$\{?([A-Z][A-Z0-9_]*)\}?")
EXIT_RE = re.compile(r"\bexit(?:s|ed|ing)?(?:\s+(?:with\s+)?(?:status|code))?(?:\s+(?:is|of))?\s+(\d+)\b", re.I)
MLK_CMD_RE = re.compile(r"^(?:\$\s+)?(?:[A-Z_][A-Z0-9_]*=\S*\s+)*(?:\S*/)?mlk(?:\s+([a-z][a-z-]*))?(?=[\s:]|$)")


# --- the sources ---------------------------------------------------------------

def source_files(root):
    out = []
    for d in SOURCE_DIRS:
        for dirpath, _, names in os.walk(os.path.join(root, d)):
            for n in names:
                if n.endswith(C_EXT + (".py", ".cmake", ".sh", ".txt", ".map", ".json", ".tl")):
                    out.append(os.path.join(dirpath, n))
    out += [os.path.join(root, "CMakeLists.txt")]
    me = os.path.abspath(__file__)
    return [f for f in out if os.path.isfile(f) and os.path.abspath(f) != me]


C_TOKEN = re.compile(r'''//[^\n]*|/\*.*?\*/|R"([^(\s]*)\((.*?)\)\1"|"((?:[^"\\\n]|\\.)*)"|'(?:[^'\\\n]|\\.)*\'''', re.S)
C_ESC = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'", "?": "?", "a": "", "b": "",
         "f": "", "v": ""}


def c_unescape(s):
    out, i = [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            n = s[i + 1]
            if n == "x":
                m = re.match(r"[0-9a-fA-F]+", s[i + 2:])
                out.append(chr(int(m.group(0), 16)) if m else "")
                i += 2 + (len(m.group(0)) if m else 0)
                continue
            out.append(C_ESC.get(n, n))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


def c_literals(text):
    """String literals of a C/C++ file; adjacent literals are concatenated."""
    lits, last_end, cur = [], -1, None
    for m in C_TOKEN.finditer(text):
        tok = m.group(0)
        if tok.startswith("//") or tok.startswith("/*") or tok.startswith("'"):
            continue
        s = m.group(2) if tok.startswith("R") else c_unescape(m.group(3) or "")
        if cur is not None and text[last_end:m.start()].strip() == "":
            cur += s
        else:
            if cur is not None:
                lits.append(cur)
            cur = s
        last_end = m.end()
    if cur is not None:
        lits.append(cur)
    return lits


def py_literals(text):
    lits = []
    try:
        toks = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return lits
    for t in toks:
        if t.type != tokenize.STRING:
            continue
        s = t.string
        prefix = re.match(r"[A-Za-z]*", s).group(0).lower()
        body = s[len(prefix):]
        if "f" in prefix:
            q = 3 if body[:3] in ('"""', "'''") else 1
            inner = body[q:-q]
            lits.append(re.sub(r"\{[^{}]*\}", "\0", inner))
            continue
        try:
            v = ast.literal_eval(s)
        except (ValueError, SyntaxError):
            continue
        if isinstance(v, bytes):
            v = v.decode("latin-1")
        lits.append(v)
    return lits


FORMAT_RE = re.compile(r"%[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?(?:hh|h|ll|l|z|j|t|L)?[a-zA-Z]|\{\d*(?::[^{}]*)?\}")


def pieces_of(literal):
    """A literal's fixed texts: split at format directives and line ends,
    whitespace collapsed."""
    out = []
    for part in FORMAT_RE.split(literal.replace("%%", "\1")):
        for line in re.split(r"[\n\0]", part):
            line = re.sub(r"\s+", " ", line.replace("\1", "%"))
            if line.strip():
                out.append(line)
    return out


class Corpus:
    def __init__(self, root):
        self.words = set()
        self.values = set(EXAMPLE_NAMES)
        self.files = {}
        pieces = set()
        for f in source_files(root):
            try:
                text = open(f, encoding="utf-8", errors="replace").read()
            except OSError:
                continue
            self.files[os.path.relpath(f, root)] = text
            self.words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
            if f.endswith(C_EXT):
                lits = c_literals(text)
            elif f.endswith(".py"):
                lits = py_literals(text)
            else:
                continue
            for lit in lits:
                pieces.update(pieces_of(lit))
                if re.fullmatch(r"[A-Za-z][A-Za-z0-9_]*", lit):
                    self.values.add(lit)  # "ok", "default", "cpu": values that messages print
        self.pieces = sorted(pieces)
        self.joined = "\x01" + "\x01".join(self.pieces) + "\x01"
        self.by_word = {}
        for i, p in enumerate(self.pieces):
            for w in set(re.findall(r"[A-Za-z]{3,}", p)):
                self.by_word.setdefault(w, []).append(i)
        self.names = set()
        for f, text in self.files.items():
            if f.endswith(".tl"):
                self.names.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
            if f.startswith("targets/profiles/") and f.endswith(".json"):
                self.names.update(re.findall(r'"([^"\s]+)"', text))

    def candidates(self, span):
        words = re.findall(r"[A-Za-z]{3,}", span)
        if not words:
            return None
        best = min(words, key=lambda w: len(self.by_word.get(w, [])))
        return [self.pieces[i] for i in self.by_word.get(best, [])]

    def contains(self, span):
        c = self.candidates(span)
        if c is None:
            return span in self.joined
        return any(span in p for p in c)

    def fits(self, span, at_start, at_end):
        """Whether one literal piece contains span such that span starts where
        the piece starts (unless at_start: the quote's own start) and ends
        where it ends (unless at_end)."""
        c = self.candidates(span)
        sp = span.strip()
        if c is None:
            c = self.pieces
        for p in c:
            ps = p.strip()
            if sp in ps and (at_start or ps.startswith(sp)) and (at_end or ps.endswith(sp)):
                return True
        return False


# --- mlk --help --------------------------------------------------------------

class Help:
    def __init__(self, mlk):
        run = lambda *a: subprocess.run([mlk, *a], capture_output=True, text=True, timeout=60).stdout
        self.main = run("--help")
        self.commands = re.findall(r"^  ([a-z][a-z-]*)\s{2,}", self.main, re.M)
        self.text = {c: run(c, "--help") for c in self.commands}
        self.flags = {c: set(FLAG_RE.findall(t)) | {"help"} for c, t in self.text.items()}
        self.flags[""] = set(FLAG_RE.findall(self.main)) | {"help"}
        self.all_flags = set().union(*self.flags.values())
        self.exits = {"": self.exit_codes(self.main)}
        for c, t in self.text.items():
            self.exits[c] = self.exits[""] | self.exit_codes(t)
        self.all_exits = set().union(*self.exits.values())

    @staticmethod
    def exit_codes(text):
        codes = set()
        for m in re.finditer(r"exit(?:s)?(?: status)?:?(.*?)(?:\n\n|\Z)", text, re.I | re.S):
            codes.update(int(n) for n in re.findall(r"(?:^|[\s,;(])(\d{1,3})(?=[\s,;)])", " " + m.group(1)))
        codes.update(int(n) for n in re.findall(r"\bexit(?:s)? (\d{1,3})\b", text, re.I))
        return codes


# --- the docs ------------------------------------------------------------------

class Doc:
    """The parts of one markdown file: prose blocks (with inline code spans)
    and code block lines, each with its line number and context."""

    def __init__(self, path, text):
        self.path = path
        self.lines = text.split("\n")


def code_spans(text):
    """(content, start, end, ticks) of every inline code span of a block."""
    out, i = [], 0
    while True:
        m = re.compile(r"`+").search(text, i)
        if not m:
            return out
        ticks = m.group(0)
        close = re.compile(r"(?<!`)" + ticks + r"(?!`)").search(text, m.end())
        if not close:
            i = m.end()
            continue
        content = text[m.end():close.start()]
        if len(content) >= 2 and content[0] == " " and content[-1] == " " and content.strip():
            content = content[1:-1]
        out.append((content.replace("\n", " "), m.start(), close.end(), len(ticks)))
        i = close.end()


def mlk_commands_named(text, help_):
    return {c for c in re.findall(r"\bmlk ([a-z][a-z-]*)", text) if c in help_.text}


class Checker:
    def __init__(self, corpus, help_, root):
        self.corpus, self.help, self.root = corpus, help_, root
        self.problems = []

    def report(self, path, line, what):
        self.problems.append("%s:%d: %s" % (path, line, what))

    # -- attribution
    def command_of(self, text):
        """('mlk', CMD or ''), ('script', path), ('external', word) or None."""
        t = text.strip()
        m = MLK_CMD_RE.match(t)
        if m:
            cmd = m.group(1) or ""
            return ("mlk", cmd if cmd in self.help.text else "")
        t = re.sub(r"^\$\s+", "", t)
        t = re.sub(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)+", "", t)
        word = t.split()[0] if t.split() else ""
        if word.endswith((".py", ".sh")) and os.path.isfile(os.path.join(self.root, word)):
            return ("script", word)
        if word in EXTERNAL_TOOLS or (word and os.path.basename(word) in EXTERNAL_TOOLS):
            return ("external", word)
        if word.startswith(("./", "build/", "/")):
            return ("external", word)
        return None

    def in_code(self, f, cmd):
        """Whether the parser of mlk CMD (cli/CMD_command.cpp, */CMD_cli.cpp,
        or cli/main.cpp for every command) takes --f, documented or not."""
        lit = '"--' + f + '"'
        return any(lit in t for p, t in self.corpus.files.items()
                   if p in ("cli/main.cpp", "cli/args.cpp") or (cmd and (p == "cli/%s_command.cpp" % cmd or
                                                                        p.endswith("/%s_cli.cpp" % cmd))))

    def check_flags(self, path, line, text, owner, context):
        for m in FLAG_RE.finditer(text):
            f = m.group(1)
            if f in ("flag", "opt", "option") or re.search(r"unknown option `$", text[:m.start()]):
                continue  # `--flag VALUE` (any flag), and ``unknown option `--x` ``
            if owner and owner[0] == "external":
                continue
            if owner and owner[0] == "script":
                try:
                    script = open(os.path.join(self.root, owner[1]), encoding="utf-8", errors="replace").read()
                except OSError:
                    script = ""
                if "--" + f not in script:
                    self.report(path, line, "flag --%s is not an option of %s" % (f, owner[1]))
                continue
            if owner and owner[0] == "mlk":
                cmd = owner[1]
                if f not in self.help.flags[cmd] and not self.in_code(f, cmd):
                    self.report(path, line, "flag --%s is not in `mlk %s--help`%s" % (
                        f, cmd + " " if cmd else "", self.where_else(f)))
                continue
            cmds = [c for c in context if c in self.help.flags]
            if cmds:
                if not any(f in self.help.flags[c] or self.in_code(f, c) for c in cmds):
                    self.report(path, line, "flag --%s is not in the --help of %s%s" % (
                        f, ", ".join("`mlk %s`" % c for c in sorted(cmds)), self.where_else(f)))
            elif f not in self.help.all_flags and not any(
                    ('"--' + f + '"') in t or ("'--" + f + "'") in t for p, t in self.corpus.files.items()
                    if p.endswith((".py", ".sh"))):
                self.report(path, line, "flag --%s is in no `mlk COMMAND --help`" % f)

    def where_else(self, f):
        cmds = sorted(c for c, fl in self.help.flags.items() if c and f in fl)
        return " (it is an option of %s)" % ", ".join("`mlk %s`" % c for c in cmds) if cmds else ""

    def check_consts(self, path, line, text, env_too):
        for c in CONST_RE.findall(text):
            if c.endswith("_*"):
                pre = c[:-1]
                if not any(w.startswith(pre) for w in self.corpus.words):
                    self.report(path, line, "no name starting with %s in the sources" % pre)
            elif c not in self.corpus.words:
                self.report(path, line, "%s is not in the sources" % c)
        if env_too:
            for v in ENV_RE.findall(text):
                if not v.startswith("MLK_") and v not in self.corpus.words:
                    self.report(path, line, "environment variable $%s is not in the sources" % v)

    def check_exits(self, path, line, text, owner, context):
        for n in EXIT_RE.findall(text):
            n = int(n)
            if owner and owner[0] in ("external", "script"):
                continue
            cmds = [owner[1]] if owner and owner[0] == "mlk" else [c for c in context if c in self.help.exits]
            allowed = set().union(*(self.help.exits[c] for c in cmds)) if cmds else self.help.all_exits
            if n not in allowed:
                self.report(path, line, "exit status %d is not named by the --help of %s" % (
                    n, ", ".join("`mlk %s`" % c for c in cmds) if cmds else "any command"))

    # -- messages
    def check_message(self, path, line, msg):
        problem = self.message_problem(msg)
        if problem:
            self.report(path, line, "message not found in the sources: %s" % problem)

    def ordinary(self, tok):
        return re.fullmatch(r"[A-Za-z]+", tok) is not None and (not self.is_name(tok) or tok in ACRONYMS)

    def is_name(self, tok):
        if not re.fullmatch(r"[A-Za-z]+", tok):
            return True  # numbers, identifiers with _ or digits
        if tok.isupper() or len(tok) < 2 or re.fullmatch(r"[A-Z]+(?:s|x|ms)", tok):
            return True  # placeholders (NAME, DIR) and single letters
        return tok in self.corpus.names or tok in self.corpus.values or tok in self.help.text or tok == "mlk"

    def message_problem(self, msg):
        msg = re.sub(r"\s+", " ", msg).strip()
        # Text of other programs: Halide's errors, system errors.
        cut = re.search(r"\bError: |\[json\.exception\.", msg)
        if cut:
            msg = msg[:cut.start()] + " \0"
        for e in SYSTEM_ERRORS:
            msg = msg.replace(e, " \0 ")
        # Wildcards: `...`, `[...]`, names in backticks, paths.
        msg = msg.replace("[...]", "[\0]").replace("...", "\0").replace("\u2026", "\0")
        msg = re.sub(r"`[^`\s]+`", lambda m: "`\0`", msg)
        msg = re.sub(r"(?<![\w])(?:[\w.\-~]*/)+[\w.\-]*", "\0", msg)
        msg = re.sub(r"(?<![\w.])[\w\-]+(?:\.[\w\-]+)*\.(?:json|jsonl|tl|safetensors|db|svg|so|md|txt|py|cpp|h|o|ptx|cubin)\b",
                     "\0", msg)
        toks = re.findall(r"\0|(?<![\w.])\d+(?:\.\d+)?(?:e[-+]?\d+)?|[A-Za-z0-9_]+|\s+|[^\w\s\0]", msg)
        n = len(toks)
        covered = [False] * n
        i = 0
        while i < n:
            if toks[i] == "\0" or toks[i].isspace():
                i += 1
                continue
            j = i
            while j < n and toks[j] != "\0" and self.corpus.contains("".join(toks[i:j + 1])):
                j += 1
            accepted = False
            for k in range(j, i, -1):  # the longest acceptable span from i
                span = "".join(toks[i:k])
                words = [t for t in toks[i:k] if re.fullmatch(r"[A-Za-z]{2,}", t)]
                if not words:
                    continue
                edge_start = i == 0 or toks[i - 1] == "\0"
                edge_end = k == n or toks[k] == "\0"
                if len(words) == 1:
                    continue  # single words: below
                ok = self.corpus.fits(span, edge_start, edge_end)
                if ok:
                    for t in range(i, k):
                        covered[t] = True
                    i = k
                    accepted = True
                    break
            if not accepted:
                i += 1
        # A single word is a literal of its own ("measured" in `", " + (m ?
        # "measured" : ...)`) only between punctuation, placeholders or values.
        def neighbour(t, step):
            t += step
            while 0 <= t < n and toks[t].isspace():
                t += step
            return toks[t] if 0 <= t < n and not covered[t] else None
        for t in range(n):
            if covered[t] or not re.fullmatch(r"[A-Za-z]{2,}", toks[t]):
                continue
            if all(nb is None or not self.ordinary(nb) for nb in (neighbour(t, -1), neighbour(t, 1))) and \
                    self.corpus.fits(toks[t], False, False):
                covered[t] = True
        # Uncovered runs of words (separated by spaces only) with two or more
        # ordinary words that are not names: text no literal accounts for.
        run, runs = [], []
        for t, c in zip(toks, covered):
            if not c and re.fullmatch(r"[A-Za-z0-9_]+", t):
                run.append(t)
            elif not c and t == " " and run:
                continue
            else:
                if run:
                    runs.append(run)
                run = []
        if run:
            runs.append(run)
        for r in runs:
            plain = [t for t in r if self.ordinary(t)]
            if len(plain) >= 2:
                return "`%s` (no string literal of the sources reads so)" % " ".join(r)
        return None

    @staticmethod
    def is_word(tok):
        return bool(re.fullmatch(r"\w+", tok))

    # -- one document
    def check_doc(self, path, text, rel):
        lines = text.split("\n")
        headings = {}  # level -> set of commands
        i = 0
        block, block_start = [], 0
        table_header = None

        def flush_block():
            if not block:
                return
            self.check_prose(rel, block, block_start, headings, table_header)

        while i < len(lines):
            ln = lines[i]
            fence = re.match(r"^(\s*)(```+|~~~+)\s*([\w+-]*)", ln)
            if fence:
                flush_block()
                block = []
                lang = fence.group(3)
                j = i + 1
                body = []
                while j < len(lines) and not lines[j].lstrip().startswith(fence.group(2)):
                    body.append((j + 1, lines[j]))
                    j += 1
                self.check_fence(rel, lang, body, headings)
                i = j + 1
                continue
            h = re.match(r"^(#{1,6})\s+(.*)", ln)
            if h:
                flush_block()
                block = []
                level = len(h.group(1))
                for lv in list(headings):
                    if lv >= level:
                        del headings[lv]
                headings[level] = mlk_commands_named(h.group(2), self.help)
                table_header = None
                self.check_prose(rel, [ln], i + 1, {}, None, heading=True)
                i += 1
                continue
            if ln.strip() == "":
                flush_block()
                block = []
                table_header = None
                i += 1
                continue
            if ln.lstrip().startswith("|"):
                flush_block()
                block = []
                cells = [c.strip() for c in ln.strip().strip("|").split("|")]
                if table_header is None:
                    table_header = cells
                    self.check_prose(rel, [ln], i + 1, headings, None)
                elif not all(re.fullmatch(r":?-{3,}:?", c) for c in cells if c):
                    self.check_table_row(rel, ln, i + 1, headings, table_header)
                i += 1
                continue
            if re.match(r"^\s*(?:[-*+]|\d+\.)\s", ln):
                flush_block()
                block = []
            if not block:
                block_start = i + 1
            block.append(ln)
            i += 1
        flush_block()

    def context(self, headings, text):
        ctx = set()
        for cmds in headings.values():
            ctx |= cmds
        return ctx | mlk_commands_named(text, self.help)

    def check_table_row(self, rel, ln, lineno, headings, header):
        cells = re.split(r"(?<!\\)\|", ln.strip().strip("|"))
        ctx = self.context(headings, ln)
        for k, cell in enumerate(cells):
            is_msg = k < len(header) and "message" in header[k].lower()
            self.check_text(rel, lineno, cell, ctx, message_spans=is_msg)

    def check_prose(self, rel, block, start, headings, header, heading=False):
        text = "\n".join(block)
        ctx = self.context(headings, text)
        self.check_text(rel, start, text, ctx, message_spans=False, line_of=lambda off: start + text.count("\n", 0, off))

    def check_text(self, rel, lineno, text, ctx, message_spans, line_of=None):
        line_of = line_of or (lambda off: lineno)
        spans = code_spans(text)
        prose, last = [], 0
        for content, s, e, ticks in spans:
            prose.append((text[last:s], last))
            last = e
            ln = line_of(s)
            owner = self.command_of(content)
            self.check_flags(rel, ln, content, owner, ctx)
            self.check_consts(rel, ln, content, env_too=not (owner and owner[0] == "external"))
            self.check_exits(rel, ln, content, owner, ctx)
            if ticks == 2 or message_spans or re.match(r"^(?:mlk(?: [a-z-]+)?|error): ", content):
                self.check_message(rel, ln, content)
        prose.append((text[last:], last))
        for chunk, off in prose:
            for k, part in enumerate(chunk.split("\n")):
                ln = line_of(off) + k
                self.check_flags(rel, ln, part, None, ctx)
                self.check_consts(rel, ln, part, env_too=True)
                self.check_exits(rel, ln, part, None, ctx)

    def check_fence(self, rel, lang, body, headings):
        transcript = lang in ("", "console", "text", "output")
        mlk_output = False
        for lineno, ln in body:
            s = ln.strip()
            owner = self.command_of(s) if s else None
            is_prompt = s.startswith("$ ")
            is_msg_line = bool(re.match(r"^(?:mlk(?: [a-z-]+)?|error): ", s)) or bool(re.match(r"^\S+:\d+:\d+: error: ", s))
            if is_prompt:
                mlk_output = bool(owner and owner[0] == "mlk")
            if owner and owner[0] == "mlk" and not is_msg_line and not is_prompt and lang not in ("output",):
                # a command line without a prompt (sh blocks)
                pass
            ctx = set()
            if owner and owner[0] == "mlk":
                self.check_flags(rel, lineno, s, owner, ctx)
            elif lang in ("", "sh", "bash", "shell", "console", "text", "output") and not is_prompt and \
                    not (owner and owner[0] in ("external", "script")) and (mlk_output or is_msg_line or lang == "output"):
                self.check_flags(rel, lineno, s, None, self.context(headings, ""))
            elif owner and owner[0] == "script":
                self.check_flags(rel, lineno, s, owner, ctx)
            self.check_consts(rel, lineno, s, env_too=False)
            if not transcript or not s or s in ("...", "\u2026"):
                continue
            if lang == "output" or is_msg_line or (mlk_output and not is_prompt):
                # `  # note` after an output line is the doc's annotation
                self.check_message(rel, lineno, re.sub(r"\s{2,}# .*$", "", s))


# --- main ----------------------------------------------------------------------

def run_check(mlk, root, docs):
    checker = Checker(Corpus(root), Help(mlk), root)
    for d in docs:
        rel = os.path.relpath(d, root) if os.path.abspath(d).startswith(os.path.abspath(root) + os.sep) else d
        checker.check_doc(d, open(d, encoding="utf-8").read(), rel)
    return checker.problems


SELF_TEST_DOC = """# A doc for the self-test

Tune with `mlk tune FILE.tl --target host --no-such-flag`.

```
$ mlk run a.tl --fn f --inputs i.safetensors --output o.safetensors --bogus-run-flag
mlk run: the frobnicator exploded at step 3
```

The entry returns `MLK_ERR_BOGUS_CODE` and reads `$MLK_NO_SUCH_VARIABLE`.
`mlk tune` then exits with status 7.
It fails with ``no candidate schedule for `f` was ever considered by anyone``.
"""

SELF_TEST_GOOD = """# A doc for the self-test that must pass

`mlk tune FILE.tl --target host --trials 8` tunes; `--no-cache` skips the cache.
It returns `MLK_ERR_SHAPE` and reads `$MLK_CACHE`; bad usage exits 2.
It fails with ``no candidate schedule for `f` compiled and verified``.
"""


def self_test(mlk, root):
    with tempfile.TemporaryDirectory() as tmp:
        bad = os.path.join(tmp, "bad.md")
        good = os.path.join(tmp, "good.md")
        open(bad, "w").write(SELF_TEST_DOC)
        open(good, "w").write(SELF_TEST_GOOD)
        problems = run_check(mlk, root, [bad, good])
    print("\n".join(problems))
    expect = [("bad.md:3:", "--no-such-flag"), ("bad.md:6:", "--bogus-run-flag"), ("bad.md:7:", "frobnicator exploded"),
              ("bad.md:10:", "MLK_ERR_BOGUS_CODE"), ("bad.md:10:", "MLK_NO_SUCH_VARIABLE"),
              ("bad.md:11:", "exit status 7"), ("bad.md:12:", "was ever considered")]
    failed = False
    for where, what in expect:
        if not any(where in p and what in p for p in problems):
            print("self-test: expected a problem at %s naming %s" % (where, what), file=sys.stderr)
            failed = True
    for p in problems:
        if "good.md" in p:
            print("self-test: a correct doc was flagged: " + p, file=sys.stderr)
            failed = True
    if len(problems) != len(expect):
        print("self-test: expected %d problems, got %d" % (len(expect), len(problems)), file=sys.stderr)
        failed = True
    if failed:
        sys.exit(1)
    print("check_docs self-test passed")


def main():
    if len(sys.argv) < 3:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        sys.exit(2)
    mlk, root = sys.argv[1], sys.argv[2]
    rest = sys.argv[3:]
    if rest == ["--self-test"]:
        self_test(mlk, root)
        return
    docs = rest or sorted(glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True) +
                          glob.glob(os.path.join(root, "decisions", "*.md")) +
                          glob.glob(os.path.join(root, "phase-1", "*.md")))
    problems = run_check(mlk, root, docs)
    for p in problems:
        print(p)
    if problems:
        print("%d quote(s) in the docs not found in the sources or in `mlk --help` (scripts/check_docs.py "
              "describes what is checked)" % len(problems), file=sys.stderr)
        sys.exit(1)
    print("every flag, constant, variable, exit status and message quoted in %d doc(s) is found" % len(docs))


if __name__ == "__main__":
    main()
