"""Control flow for the launch-script reader (scripts.py): shell functions called with literal
arguments, ``if``/``elif``/``else`` on tests it can decide, ``${x#pat}``/``${x%pat}``, and where each
word of a variable's value was written (so a finding points at the text that set it).

Benchmark scripts wrap their launch in a function (KempnerForge's mfu_bench.sh: ``run_experiment NAME
"torchrun:2" "ARGS"``, which picks torchrun or srun with ``[[ "$mode" == torchrun:* ]]``): each call is
read as its own launch, with the branch its arguments select. A test meshlint cannot decide leaves
both branches read, as before. Nothing is executed.
"""

from __future__ import annotations

import bisect
from fnmatch import fnmatchcase

from meshlint.errors import InputError
from meshlint.inputs.launch_words import UNKNOWN_CHAR, Word

MAX_CALL_DEPTH = 16          # functions calling functions
MAX_CALLED_COMMANDS = 100_000  # commands read inside function calls, in all
MAX_PATTERN_VALUE = 4_096    # ${x#pat} on longer values is unknown (the match is quadratic)


def find_function(commands: list, k: int, text: str, literal) -> tuple | None:
    """(name, body commands, index after the definition) when ``commands[k]`` opens ``name() {`` or
    ``function name {``; None otherwise. The body is the commands up to the matching ``}``."""
    cmd = commands[k]
    words = cmd.words
    if not words or cmd.sbatch is not None:
        return None
    first = literal(words[0])
    name = None
    rest = []
    if first == "function" and len(words) >= 2:
        name = literal(words[1])
        rest = words[2:]
    elif len(words) == 1 and first and text[words[0].end:words[0].end + 8].replace(" ", "").startswith("()"):
        name = first
    if not name or not name.replace("_", "a").replace("-", "a").isalnum():
        return None
    j = k + 1
    if rest and literal(rest[0]) == "{":
        body_first = rest[1:]
    elif not rest and j < len(commands) and commands[j].words and literal(commands[j].words[0]) == "{":
        body_first = commands[j].words[1:]
        j += 1
    else:
        return None
    body = [type(cmd)(body_first, cmd.line)] if body_first else []
    depth = 1
    while j < len(commands):
        c = commands[j]
        lead = literal(c.words[0]) if c.words else None
        if lead == "}":
            depth -= 1
            if depth == 0:
                return name, body, j + 1
        elif lead == "{":
            depth += 1
        body.append(c)
        j += 1
    return name, body, j


def strip_pattern(value: str, op: str, pattern: str) -> str | None:
    """``${x#pat}`` (shortest prefix), ``##`` (longest), ``%`` (shortest suffix), ``%%`` (longest)."""
    if len(value) > MAX_PATTERN_VALUE:
        return None
    n = len(value)
    if op in ("#", "##"):
        for i in (range(0, n + 1) if op == "#" else range(n, -1, -1)):
            if fnmatchcase(value[:i], pattern):
                return value[i:]
    else:
        for i in (range(n, -1, -1) if op == "%" else range(0, n + 1)):
            if fnmatchcase(value[i:], pattern):
                return value[:i]
    return value


class Flow:
    """Mixed into the script reader: function calls, decidable branches, word positions."""

    def flow_init(self) -> None:
        self.functions: dict = {}     # name -> [commands]
        self.positional = None        # [Word] inside a function call; None at the top level
        self.call_depth = 0
        self.certain: set = set()     # ids of if-branches known to run (shellflow.branch_start)
        self.called = 0
        self.line_starts = [0] + [i + 1 for i, c in enumerate(self.text) if c == "\n"]

    def run(self, commands: list) -> None:
        from meshlint.inputs.script_lex import _literal

        k = 0
        while k < len(commands):
            if self.call_depth:
                self.called += 1
                if self.called > MAX_CALLED_COMMANDS:
                    raise InputError("ML007", f"function calls run more than {MAX_CALLED_COMMANDS:,} commands",
                                     commands[k].line, 1)
            found = find_function(commands, k, self.text, _literal) if not self.skipping() else None
            if found is not None:
                name, body, k = found
                self.functions[name] = body
                continue
            self.command(commands[k])
            k += 1

    def call(self, name: str, raws: list) -> None:
        """A function called with these argument words: its body read with $1.. bound (locals undone after)."""
        if self.call_depth >= MAX_CALL_DEPTH:
            raise InputError("ML007", f"functions call each other more than {MAX_CALL_DEPTH} deep", raws[0].line, 1)
        args = []
        for r in raws[1:]:
            for w in self.expand(r):
                args.append((w, r))
        saved_pos, saved_vars, saved_blocks = self.positional, dict(self.vars), self.blocks
        self.positional = args
        if not self.call_depth:
            self.call_site = (name, raws[0].line)
        self.blocks = [list(b) for b in self.blocks]
        self.call_depth += 1
        self.locals = getattr(self, "locals", [])
        self.locals.append(set())
        self.locals[-1].update(n for n in self.vars if n.isdigit())
        self._bind()
        try:
            self.run(self.functions[name])
        finally:
            local = self.locals.pop()
            for n in local:
                if n in saved_vars:
                    self.vars[n] = saved_vars[n]
                else:
                    self.vars.pop(n, None)
            self.call_depth -= 1
            self.positional, self.blocks = saved_pos, saved_blocks

    def positional_word(self, index: int):
        if self.positional is None or index < 1 or index > len(self.positional):
            return None
        return self.positional[index - 1]

    def shift(self, count: int) -> None:
        if self.positional is None:
            return
        if self.positional and self.uncertain():
            # shifted in a loop or a branch meshlint does not decide: how many is not known
            w, r = self.positional[0]
            self.positional = [(Word(UNKNOWN_CHAR, w.line, w.col, '"$@"', "the function's arguments after a shift "
                                     "inside a loop or an undecided branch", True), r)]
        else:
            self.positional = self.positional[count:]
        self._bind()

    def uncertain(self) -> bool:
        """Whether the command being read may run any number of times (a loop), or not at all (an undecided
        branch, a case)."""
        return any(b[0] in ("while", "until", "for", "select", "case") or (b[0] == "if" and not (len(b) > 3 and b[3]))
                   for b in self.blocks)

    def _bind(self) -> None:
        """$1, $2 ... as variables of the call (undone with its locals)."""
        from meshlint.inputs.script_lex import _Var

        for n in [n for n in self.vars if n.isdigit()]:
            del self.vars[n]
        for i, (w, r) in enumerate(self.positional, 1):
            self.locals[-1].add(str(i))
            self.vars[str(i)] = _Var(w.text if w.known() else None, w.unknown or "unknown words", r.line, (),
                                     spans=self.spans_of(r, w))

    # -- branches
    def skipping(self) -> bool:
        return any(len(b) > 2 and b[2] for b in self.blocks)

    def branch_start(self, word: str, cond: list) -> None:
        """``if``/``elif``/``else`` with its test's words: skip a branch the test rules out, and every branch
        after one it selects."""
        block = self.blocks[-1] if self.blocks else None
        if block is None or block[0] != "if":
            return
        while len(block) < 5:
            block.append(False if len(block) != 4 else True)   # [kind, id, skip, taken, all_false]
        if word != "if" and block[3]:
            block[2] = True
            return
        verdict = True if word == "else" else self.test(cond)
        if word == "else" and not block[4]:
            verdict = None
        block[2] = verdict is False
        block[3] = verdict is True
        block[4] = block[4] and verdict is False
        if verdict is True and all(b[0] == "if" and len(b) > 3 and b[3] for b in self.blocks):
            self.certain.add(block[1])   # this branch runs, once: what it sets holds after the fi

    def certain_after(self, block: tuple, path: tuple) -> bool:
        """Whether every block a variable was set in, and that is left now, was a branch known to run."""
        return all(b in self.certain for i, b in enumerate(block) if i >= len(path) or path[i] != b)

    def test(self, raws: list):
        """True/False for ``[[ A == P ]]``, ``[ A = B ]``, ``!=``, ``-n``/``-z`` on known words; None otherwise."""
        from meshlint.inputs.script_lex import _literal

        if not raws:
            return None
        texts = [_literal(r) for r in raws]
        if texts[0] not in ("[[", "[", "test"):
            return None
        close = {"[[": "]]", "[": "]", "test": None}[texts[0]]
        body = raws[1:-1] if close and texts[-1] == close else raws[1:] if not close else None
        if body is None:
            return None
        words = []
        for r in body:
            ws = self.expand(r)
            if len(ws) != 1 or not ws[0].known():
                if len(ws) == 0 and r.parts and any(p[-1] is True for p in r.parts if p[0] != "array"):
                    words.append(("", False))
                    continue
                return None
            quoted = all(p[0] == "lit" and p[2] for p in r.parts) or any(p[-1] is True for p in r.parts)
            words.append((ws[0].text, quoted))
        if len(words) == 2 and words[0][0] in ("-n", "-z"):
            return (words[1][0] != "") == (words[0][0] == "-n")
        if len(words) != 3 or words[1][0] not in ("==", "=", "!="):
            return None
        left, (op, _), (right, quoted) = words[0][0], words[1], words[2]
        if texts[0] == "[[" and not quoted:
            same = fnmatchcase(left, right)
        else:
            same = left == right
        return same if op != "!=" else not same

    # -- positions
    def place(self, word, raw) -> None:
        """Move a word that came from a variable's value to where its text (or its ``--key=``) is written:
        in the assignment or call that set the variable, or in a variable that one was built from."""
        if not word.vars or word.text in self.text[raw.start:raw.end]:
            return
        spans = []
        for item in word.vars:
            var = self.vars.get(item[0])
            spans.extend(getattr(var, "spans", ()) or ())
        target = word.text
        for needle in (target, target.partition("=")[0] + "=" if "=" in target and target.startswith("--") else None):
            if not needle:
                continue
            for start, end in spans:
                at = self.text.find(needle, start, end)
                if at >= 0:
                    line = bisect.bisect_right(self.line_starts, at)
                    word.line, word.col = line, at - self.line_starts[line - 1] + 1
                    return

    def spans_of(self, raw, word) -> tuple:
        """The source spans a value assigned from ``raw`` was written in (its own, then its variables')."""
        out = [(raw.start, raw.end)]
        for item in word.vars:
            var = self.vars.get(item[0])
            out.extend(getattr(var, "spans", ()) or ())
        return tuple(dict.fromkeys(out))[:64]
