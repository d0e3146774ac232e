"""The reader of a launch script: variables, arrays, ``${...}`` and ``$((...))`` expanded as far as the script
itself says, through the flow of control (shellflow), and each launch line found with its words."""

from __future__ import annotations

import os
import re

from meshlint.errors import InputError
from meshlint.inputs.shellflow import Flow, strip_pattern
from meshlint.inputs.launch_words import MAX_ARGS, PER_TASK_SLURM, UNKNOWN_CHAR, Launch, PerTaskOnce, Word, _Origin
from meshlint.inputs.launch_commands import launch_from_words
from meshlint.inputs.script_lex import (_assign_head, _Cmd, CONDITIONAL_APPEND, _Lexer, _literal,
    MAX_ARITH_CHARS, MAX_LAUNCHES, MAX_NESTING, MAX_VALUE_CHARS, MAX_VARIABLES, _NAME, _Raw,
    _RESERVED_START, _SLURM_VARS, SUBMITTERS, _Var)


# ----------------------------------------------------------------------------- expanding and reading

_BRACED = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)([0-9]*))?\}")


class _Reader(Flow):
    def __init__(self, file: str | None, version: str | None, lexer: _Lexer):
        self.file = file
        self.version = version
        self.text = lexer.text
        self.file_text = lexer.text   # (self.text indexes a bash -c string while one is read)
        self.vars: dict = {}
        self.blocks: list = []        # stack of [kind, id]
        self.next_block = 1
        self.launches: list = []
        self.sbatch: dict = {}        # option -> Word
        self.sbatch_lines: list = []
        self.export_all = False
        self.sourced: list = []       # notes: "source env.sh" and the like, which meshlint does not follow
        self.sbatch_cli: dict = {}    # sbatch's options on the call that runs the script (they win)
        self.submitted = None         # [(launch index, words, line)] of sbatch/bash job.sh lines, when asked
        self.origin = _Origin(file, False)
        self.unread: list = []        # (line, why) of commands not read as launches because a word is undetermined
        self.refused: list = []       # the undetermined word Accelerate's reader found where flags may stand
        self.in_task = False          # expanding a bash -c string srun's tasks run (each its own $SLURM_PROCID)
        self.flow_init()

    def called_as(self, call) -> None:
        """Bind $1.. to the call's words (positioned where the script expands them) and take sbatch's
        command-line options, which win over the script's #SBATCH lines."""
        self.positional = [(Word(w.text, 0, 0, f"argument {k} of the call", w.unknown, w.splat), _Raw([], 0, 0, 0, 0))
                           for k, w in enumerate(call.args, 1)]
        self.locals = [set()]
        self._bind()
        self.sbatch_cli = {name: Word(w.text, w.line, w.col, f"sbatch --{name} (the call)", w.unknown, w.splat)
                           for name, w in call.sbatch.items()}
        if self.sbatch_cli:
            self.sbatch.update(self.sbatch_cli)
            self._slurm_env()

    # -- blocks
    def path(self) -> tuple:
        return tuple(b[1] for b in self.blocks)

    def push(self, kind: str) -> None:
        self.blocks.append([kind, self.next_block])
        self.next_block += 1

    def branch(self) -> None:
        if self.blocks:
            self.blocks[-1][1] = self.next_block
            self.next_block += 1

    def pop(self, kinds: tuple) -> None:
        for k in range(len(self.blocks) - 1, -1, -1):
            if self.blocks[k][0] in kinds:
                del self.blocks[k:]
                return

    # -- commands
    def command(self, cmd: _Cmd) -> None:
        if cmd.sbatch is not None:
            self._sbatch(cmd.sbatch)
            return
        raws = cmd.words
        k = 0
        # reserved words that open/close blocks or lead a command
        while k < len(raws):
            word = _literal(raws[k])
            if word is None or word not in _RESERVED_START:
                break
            if word in ("if", "while", "until"):
                self.push(word)
                if word == "if":
                    self.branch_start("if", raws[k + 1:])
            elif word in ("else", "elif"):
                self.branch()
                self.branch_start(word, raws[k + 1:])
            elif word == "fi":
                self.pop(("if",))
            elif word == "done":
                self.pop(("while", "until", "for", "select"))
            elif word == "esac":
                self.pop(("case",))
                return
            elif word == "{":
                self.push("{")
            elif word == "}":
                self.pop(("{",))
            elif word in ("for", "select"):
                self.push(word)
                if k + 1 < len(raws):
                    name = _literal(raws[k + 1])
                    if name and _NAME.fullmatch(name):
                        self._assign(name, None, f"${name} is a loop variable: it takes several values", raws[k + 1].line)
                return
            elif word == "case":
                self.push("case")
                return
            elif word == "function":
                if any(_literal(r) == "{" for r in raws[k:]):
                    self.push("{")
                return
            elif word == "in":
                return
            k += 1
        raws = raws[k:]
        if not raws or self.skipping():
            return
        first = _literal(raws[0])
        # a function definition "name() {" arrives as "name" then "{": nothing to do for "name"
        if first in ("export", "declare", "typeset", "local", "readonly"):
            if first == "local" and self.call_depth:
                self.locals[-1].update(h[0] for h in map(_assign_head, raws[1:]) if h)
            self._declare(first, raws[1:])
            return
        if first == "shift":
            count = _literal(raws[1]) if len(raws) > 1 else "1"
            self.shift(int(count) if count and count.isdigit() and len(count) < 6 else 1)
            return
        if first == "read":
            for r in raws[1:]:
                name = _literal(r)
                if name and _NAME.fullmatch(name):
                    self._assign(name, None, f"${name} is read from input (line {r.line})", r.line)
            return
        if first in ("source", ".", "eval"):
            what = _literal(raws[1]) if len(raws) > 1 else None
            self.sourced.append(f"the script runs {first} {what or '...'} (line {raws[0].line}): variables it sets "
                                "are not read by meshlint")
            return
        if first == "unset":
            for r in raws[1:]:
                name = _literal(r)
                if name and name in self.vars:
                    del self.vars[name]
            return
        if first == "set" and len(raws) > 1 and _literal(raws[1]) in ("-a", "-o allexport"):
            self.export_all = True
            return
        # NAME=value ... [command]
        assigns = []
        j = 0
        while j < len(raws):
            lit = _assign_head(raws[j])
            if lit is None:
                break
            assigns.append((lit, raws[j]))
            j += 1
        if j == len(raws):
            for (name, append), raw in assigns:
                self._assign_raw(name, append, raw, exported=self.export_all)
            return
        if _literal(raws[j]) in self.functions:
            self.call(_literal(raws[j]), raws[j:])
            return
        if not _mentions(raws[j:], self.text):
            return
        words = self.expand_all(raws)
        self.refused = []
        if len(words) > MAX_ARGS:
            self._add(Launch(None, None, [], file=self.file, line=raws[0].line, error=InputError(
                "ML007", f"a command of {len(words):,} words (limit {MAX_ARGS:,})", raws[0].line, raws[0].col)))
            return
        env = {name: self._env_word(name) for name, var in self.vars.items() if var.exported}
        sbatch = {"options": self.sbatch, "where": self._sbatch_where()} if self.sbatch else None
        launch = self._launch_of(words, env, sbatch)
        if launch is None:
            launch = self._shell_string(words, env, sbatch)
        if launch is None:
            why = self.refused[-1].unknown if self.refused else None
            why = why or next((w.unknown for w in words if not w.known() and w.unknown), None)
            if why and len(self.unread) < MAX_LAUNCHES:
                self.unread.append((raws[0].line, why))
        if launch is None and self.submitted is not None:
            self._submit(words, raws[0].line)
            return
        if launch is not None:
            launch.notes[:0] = self.sourced
            self._add(launch)

    def _launch_of(self, words: list, env: dict, sbatch) -> Launch | None:
        """The launch a command's words make in any framework's grammar: torchrun/python/srun and the entry points
        launch_from_words hands on, then Accelerate's own (meshlint/inputs/accelerate_launch.py); None if neither."""
        launch = launch_from_words(words, self.origin, env=env, sbatch=sbatch, version=self.version)
        if launch is None:
            from meshlint.inputs.accelerate_launch import from_words

            launch = from_words(words, self.file, env, refused=self.refused)
        return launch

    def _shell_string(self, words: list, env: dict, sbatch) -> Launch | None:
        """``[srun ...] bash -c "$CMD"`` (or ``sh -c``): the launch in the command string the shell runs (any framework's,
        ``accelerate launch`` included), each of its commands read after the words before the shell (srun's options),
        or None. The string's words are placed at
        the string itself: its text was expanded where it was built, so no word has a place of its own. A shell the
        string itself runs is not read again (one level: the string's commands go to ``_launch_of``)."""
        at = next((k for k in range(len(words)) if not words[k].splat
                   and os.path.basename(words[k].text) in ("bash", "sh")), None)
        if at is None:
            return None
        k = at + 1
        while k < len(words) and words[k].known() and _SHELL_OPTION.fullmatch(words[k].text) \
                and "c" not in words[k].text:
            k += 1  # bash -x -c, bash -l -c
        if k + 1 >= len(words) or not (words[k].known() and _SHELL_OPTION.fullmatch(words[k].text)
                                       and "c" in words[k].text) or words[k + 1].splat:
            return None
        string = words[k + 1]
        try:
            commands = _Lexer(string.text).commands()
        except InputError:
            return None
        text, self.text = self.text, string.text  # what the inner words' offsets index
        whys = string.whys if len(string.whys) == string.text.count(UNKNOWN_CHAR) else ()
        in_task, self.in_task = self.in_task, self.in_task or any(
            not w.splat and os.path.basename(w.text) == "srun" for w in words[:at])
        try:
            for command in commands:
                inner = []
                for raw in command.words:
                    k = string.text.count(UNKNOWN_CHAR, 0, raw.start)  # the string's unknown parts before it
                    for w in self.expand(raw):
                        w.line, w.col = string.line, string.col
                        if UNKNOWN_CHAR in w.text and w.unknown is None:
                            # a part the script did not determine where the string was built: that part's reason
                            w.unknown = whys[k] if k < len(whys) else string.unknown
                            w.splat = w.splat or w.text == UNKNOWN_CHAR  # unquoted there: any number of words
                        inner.append(w)
                    if len(inner) > MAX_ARGS:
                        break
                launch = self._launch_of(words[:at] + inner, env, sbatch)
                if launch is not None:
                    where = "" if string.line == words[at].line else f", written on line {string.line}"
                    launch.notes.insert(0, f"read from the command string {words[at].text} -c runs (line "
                                           f"{words[at].line}): its options are placed at that string{where}")
                    return launch
        finally:
            self.text, self.in_task = text, in_task
        return None

    def _submit(self, words: list, line: int) -> None:
        """``sbatch [opts] job.sh ARGS`` (or ``bash job.sh ARGS``) here: recorded, in order among the launches,
        for inputs/script_call.py to read job.sh as this line runs it."""
        if words and not words[0].splat and os.path.basename(words[0].text) in SUBMITTERS:
            self.submitted.append((len(self.launches), words, line))

    def _add(self, launch: Launch) -> None:
        if len(self.launches) >= MAX_LAUNCHES:
            raise InputError("ML007", f"more than {MAX_LAUNCHES} launch lines in one script (limit {MAX_LAUNCHES})",
                             launch.line, 1)
        launch.file = self.file
        if self.call_depth:   # a launch inside a function: each call is its own run, named by its line
            name, line = self.call_site
            launch.notes.insert(0, f"launched by {name}() (line {launch.line}), called on line {line}")
            launch.line = line
        self.launches.append(launch)

    def _sbatch(self, directive: tuple) -> None:
        line, col, text = directive
        self.sbatch_lines.append(line)
        body = text.split("#", 1)[0] if " #" in text else text
        tokens = body.split()
        k = 0
        while k < len(tokens):
            t = tokens[k]
            c = col + body.find(t)
            if t.startswith("--"):
                name, eq, value = t[2:].partition("=")
                if not eq and k + 1 < len(tokens) and not tokens[k + 1].startswith("-"):
                    value = tokens[k + 1]
                    k += 1
                self.sbatch[name] = Word(value, line, c, f"#SBATCH {t}")
            elif t.startswith("-") and len(t) >= 2:
                from meshlint.inputs.launch_commands import _SRUN_VALUES

                name = _SRUN_VALUES.get(t[1], t[1])
                value = t[2:].lstrip("=")
                if not value and k + 1 < len(tokens):
                    value = tokens[k + 1]
                    k += 1
                self.sbatch[name] = Word(value, line, c, f"#SBATCH {t}")
            k += 1
        self.sbatch.update(self.sbatch_cli)
        self._slurm_env()

    def _slurm_env(self) -> None:
        """Slurm's environment variables follow the allocation."""
        for var, option in _SLURM_VARS.items():
            w = self.sbatch.get(option)
            if w is None:
                continue
            value = w.text
            if option in ("gpus-per-node",):
                from meshlint.inputs.launch_commands import _gpu_count

                count = _gpu_count(value)
                value = str(count) if count is not None else None
            if value is not None and value.isdigit():
                self.vars[var] = _Var(value, None, w.line, (), exported=True, note=f"#SBATCH --{option}")

    def _sbatch_where(self) -> str:
        lines = self.sbatch_lines
        name = os.path.basename(self.file) if self.file else "the script"
        span = f"line {lines[0]}" if len(lines) == 1 else f"lines {lines[0]}-{lines[-1]}"
        where = f"#SBATCH ({name} {span})" if lines else ""
        if self.sbatch_cli:
            given = " ".join(f"--{n}={w.text}" for n, w in self.sbatch_cli.items())
            where = f"sbatch {given} (the call)" + (f" over {where}" if where else "")
        return where

    # -- variables
    def _env_word(self, name: str) -> Word:
        var = self.vars[name]
        return self._var_word(name, var, 1, 1)

    def _var_word(self, name: str, var: _Var, line: int, col: int) -> Word:
        value, why = self._visible(name, var)
        if value is None:
            return Word(UNKNOWN_CHAR, line, col, f"${name}", why)
        return Word(value, line, col, f"${name}", None, False, ((name, value, var.line, var.note),))

    def _visible(self, name: str, var: _Var) -> tuple:
        """(value or None, why unknown) of a variable read here."""
        path = self.path()
        if var.block and tuple(path[:len(var.block)]) != tuple(var.block) and not self.certain_after(var.block, path):
            return None, f"${name} is set inside an if/loop block (line {var.line}) and read after it"
        if var.value is None:
            return None, var.why
        return var.value, None

    def _assign(self, name: str, value, why, line, exported=None, array=None, note=None, spans=()) -> None:
        old = self.vars.get(name)
        if old is None and len(self.vars) >= MAX_VARIABLES:
            return
        if exported is None:
            exported = (old.exported if old else False) or self.export_all
        if value is not None and len(value) > MAX_VALUE_CHARS:
            value, why = None, f"${name} grows past {MAX_VALUE_CHARS:,} characters"
        self.vars[name] = _Var(value, why, line, self.path(), exported, array, note, spans)

    def _assign_raw(self, name: str, append: bool, raw: _Raw, exported: bool = False) -> None:
        parts = raw.parts
        # the value part: everything after NAME= in the first literal
        head = parts[0][1]
        cut = head.index("=") + 1
        rest = ([("lit", head[cut:], parts[0][2])] if head[cut:] else []) + parts[1:]
        if rest and rest[0][0] == "array":
            items = []
            old = self.vars.get(name)
            if append and old is not None:  # NAME+=( ... ) extends the array (or a plain value's one word)
                if old.array is not None:
                    items.extend(old.array)
                elif old.value is not None:
                    items.append(Word(old.value, old.line, 1, f"${name}", None, False, ((name, old.value, old.line),)))
            path = self.path()
            if (append and old is not None and old.array is not None and len(path) > len(old.block)
                    and tuple(path[:len(old.block)]) == tuple(old.block)):
                # NAME+=( ... ) inside an if/loop of an array set outside it: the items set before stay
                # known; the block's are an unknown number of words (a launch is checked without them)
                items.append(Word(UNKNOWN_CHAR, raw.line, raw.col, CONDITIONAL_APPEND.format(name=name),
                                  f"{name}+=( ... ) on line {raw.line} adds items only when its if/loop block runs",
                                  True))
                self.vars[name] = _Var(None, "an array with unknown items", old.line, old.block,
                                       old.exported or bool(exported), items, old.note)
                return
            for r in rest[0][1]:
                items.extend(self.expand(r))
            self._assign(name, None if any(not w.known() for w in items) else " ".join(w.text for w in items),
                         "an array with unknown items", raw.line, exported or None,
                         array=items)
            return
        word, splat = self._join(rest, raw, assignment=True)
        value = None if word.unknown is not None else word.text
        why = word.unknown
        partial = None
        if value is None and word.whys and word.text.replace(UNKNOWN_CHAR, "").strip():
            partial = (word.text, word.whys)
        note = None
        if any(len(v) > 3 and v[3] == "DEFAULT" for v in word.vars):
            note = "a default: the environment may set it"
        elif len(word.vars) == 1 and len(word.vars[0]) > 3 and word.vars[0][3]:
            note = word.vars[0][3]
        if append:
            old = self.vars.get(name)
            if old is not None:
                prior, prior_why = self._visible(name, old)
                before = (prior, ()) if prior is not None else (self._partial(("var", name, "", None, True)) or None)
                after = (value, ()) if value is not None else partial
                value = None if prior is None or value is None else prior + value
                why = why or prior_why
                partial = (before[0] + after[0], tuple(before[1]) + tuple(after[1])) \
                    if value is None and before and after else None
        self._assign(name, value, why, raw.line, exported or None, note=note, spans=self.spans_of(raw, word))
        if partial is not None and value is None and name in self.vars and len(partial[0]) <= MAX_VALUE_CHARS:
            self.vars[name].partial = partial

    def _declare(self, kind: str, raws: list) -> None:
        exported = kind == "export"
        for r in raws:
            lit = _literal(r)
            if lit is not None and lit.startswith("-"):
                if "x" in lit and kind in ("declare", "typeset"):
                    exported = True
                continue
            head = _assign_head(r)
            if head is not None:
                self._assign_raw(head[0], head[1], r, exported=exported or self.export_all)
            elif lit and _NAME.fullmatch(lit) and lit in self.vars and exported:
                self.vars[lit].exported = True
            elif lit and _NAME.fullmatch(lit) and exported:
                self._assign(lit, None, f"${lit} comes from the environment", r.line, True)

    # -- expansion
    def expand_all(self, raws: list) -> list:
        words = []
        for r in raws:
            words.extend(self.expand(r))
            if len(words) > MAX_ARGS:
                break
        return words

    def expand(self, raw: _Raw) -> list:
        """A raw word -> 0..n Words (unquoted expansions are split on whitespace)."""
        word, splat = self._join(raw.parts, raw)
        if splat == "splat":
            return [Word(UNKNOWN_CHAR, raw.line, raw.col, self.text[raw.start:raw.end], word.unknown or "unknown words",
                         True, word.vars)]
        if isinstance(splat, list):
            for w in splat:
                self.place(w, raw)
            return splat
        self.place(word, raw)
        return [word]

    def _join(self, parts: list, raw: _Raw, assignment: bool = False, depth: int = 0) -> tuple:
        """Expand parts into one Word; second item: None, "splat" (unknown number of words), or a
        list of Words when an unquoted known expansion split the word."""
        text: list = []
        unknown = None
        vars_: list = []
        pieces: list = []            # words already completed by a split: (text, whys)
        whys: list = []              # why each UNKNOWN_CHAR in text is unknown
        tail_splat = False           # text is one field of a partly known variable, only its unknown part
        splat = None
        source = self.text[raw.start:raw.end]
        only = len(parts) == 1
        for part in parts:
            kind = part[0]
            if kind == "lit":
                text.append(part[1])
                continue
            if kind == "array":
                continue
            quoted = part[-1]
            partial = self._partial(part)
            if partial is not None:
                # a variable known but for some parts ($(scontrol ...) for an address): its known words stay
                # known, each unknown part keeps its own reason
                ptext, pwhys = partial
                unknown = unknown or pwhys[0]
                if quoted or assignment:
                    text.append(ptext)
                    whys.extend(pwhys)
                    continue
                # unquoted: split into fields; a field that is only an unknown part may be any number of words
                # (a splat, as an unquoted unknown $X is), one glued to known text is one word
                k = 0
                fields = ptext.split()
                if ptext[:1].isspace() and (text or whys):
                    pieces.append(("".join(text), whys, tail_splat and "".join(text) == UNKNOWN_CHAR))
                    text, whys = [], []
                for n, f in enumerate(fields):
                    if n:
                        pieces.append(("".join(text), whys, "".join(text) == UNKNOWN_CHAR == fields[n - 1]))
                        text, whys = [], []
                    text.append(f)
                    count = f.count(UNKNOWN_CHAR)
                    whys.extend(pwhys[k:k + count])
                    k += count
                tail_splat = bool(fields) and fields[-1] == UNKNOWN_CHAR and "".join(text) == UNKNOWN_CHAR
                if ptext[-1:].isspace():
                    pieces.append(("".join(text), whys, tail_splat))
                    text, whys, tail_splat = [], [], False
                continue
            value, why, vs, words = self._part(part, raw, depth)
            vars_.extend(vs)
            if words is not None:      # "$@"-like or an array: several words
                if value is None and why is not None and words == "splat":
                    if only and not assignment:
                        return Word(UNKNOWN_CHAR, raw.line, raw.col, source, why, True, tuple(vars_)), "splat"
                    unknown = unknown or why
                    text.append(UNKNOWN_CHAR)
                    whys.append(why)
                    continue
                if isinstance(words, list) and only and not assignment:
                    return Word(" ".join(w.text for w in words), raw.line, raw.col, source), words
                if isinstance(words, list) and not all(w.known() for w in words):
                    item = next(w.unknown or "an item expands to any number of words" for w in words if not w.known())
                    unknown = unknown or item
                    text.append(UNKNOWN_CHAR)
                    whys.append(item)
                    continue
                text.append(" ".join(w.text for w in words) if isinstance(words, list) else UNKNOWN_CHAR)
                if not isinstance(words, list):
                    whys.append(why or "expands to any number of words")
                continue
            if value is None:
                unknown = unknown or why
                if not quoted and only and not assignment:
                    return Word(UNKNOWN_CHAR, raw.line, raw.col, source, why, True, tuple(vars_)), "splat"
                text.append(UNKNOWN_CHAR)
                whys.append(why)
                continue
            if not quoted and not assignment and any(ch.isspace() for ch in value):
                # field splitting of an unquoted expansion
                fields = value.split()
                if not fields:
                    continue
                text.append(fields[0])
                for f in fields[1:]:
                    pieces.append(("".join(text), whys, False))
                    text, whys = [f], []
                if value[-1].isspace():
                    pieces.append(("".join(text), whys, False))
                    text, whys = [], []
                continue
            text.append(value)
        joined = "".join(text)
        if len(joined) > MAX_VALUE_CHARS:
            joined, unknown, whys = UNKNOWN_CHAR, f"a word longer than {MAX_VALUE_CHARS:,} characters", []
        word = self._word(joined, whys, unknown, raw, source, tuple(vars_),
                          tail_splat and joined == UNKNOWN_CHAR)
        if pieces:
            words = [self._word(p, w, unknown, raw, source, tuple(vars_), sp) for p, w, sp in pieces if p]
            if joined:
                words.append(word)
            return word, words
        if not joined and only and not assignment and parts and parts[0][0] != "lit" and not parts[0][-1]:
            return word, []        # an unquoted expansion to nothing: no word at all
        return word, splat

    @staticmethod
    def _word(text: str, whys: list, unknown, raw: _Raw, source: str, vars_: tuple, splat: bool = False) -> Word:
        """One finished word of _join: unknown (the reason of its first unknown part) when it holds UNKNOWN_CHAR;
        ``splat``: only an unknown part, unquoted (any number of words: a reader may take it for one value, as
        Accelerate's does for an address, never for flags)."""
        if UNKNOWN_CHAR not in text:
            return Word(text, raw.line, raw.col, source, None, False, vars_)
        whys = tuple(whys) if len(whys) == text.count(UNKNOWN_CHAR) else ()
        return Word(text, raw.line, raw.col, source, whys[0] if whys else unknown, splat, vars_, whys)

    def _partial(self, part: tuple):
        """(text, whys) of ``$NAME`` when the script determines its value but for some parts, else None."""
        if part[0] != "var" or part[2] != "":
            return None
        var = self.vars.get(part[1])
        if var is None or var.partial is None or var.array is not None:
            return None
        path = self.path()
        if var.block and tuple(path[:len(var.block)]) != tuple(var.block) and not self.certain_after(var.block, path):
            return None
        return var.partial

    def _part(self, part: tuple, raw: _Raw, depth: int) -> tuple:
        """(value or None, why unknown, vars, words) of one expansion part; words: "splat" or [Word]."""
        kind = part[0]
        if kind == "special":
            name = part[1]
            if name in "@*" and self.positional is not None:
                words = [w for w, _ in self.positional]
                if any(not w.known() for w in words):
                    return None, "the function's arguments include unknown words", [], "splat"
                # a call's own arguments (line 0) are positioned where the script expands them
                words = [w if w.line else Word(w.text, raw.line, raw.col, w.raw, w.unknown, w.splat, w.vars)
                         for w in words]
                if not part[-1] and name == "@":
                    return None, None, [], [Word(f, w.line, w.col, w.raw, None, False, w.vars)
                                            for w in words for f in w.text.split()]
                return None, None, [], words
            if name in "@*":
                return None, f'"${name}": the script\'s own arguments', [], "splat"
            if name.isdigit() and self.positional is not None:
                return self._part(("var", name, "", None, part[-1]), raw, depth)
            if name == "#" and self.positional is not None:
                return str(len(self.positional)), None, [], None
            if name.isdigit():
                return None, f"${name} is an argument of the script or function", [], None
            if name == "#":
                return None, "$# (the number of arguments)", [], None
            return None, f"${name} is known only when the script runs", [], None
        if kind == "cmdsub":
            return None, f"{_short(part[1])} runs a command", [], None
        if kind == "arith":
            value = self._arith(part[1])
            if value is None:
                return None, f"$(({_short(part[1])})) uses values the script does not set", [], None
            return str(value), None, [], None
        if kind == "elem":
            _, name, index, rest, quoted = part
            var = self.vars.get(name)
            hidden = self._visible(name, var)[1] if var is not None and var.block else None
            if var is None or var.array is None or hidden:
                why = hidden or f"{name}[{index}] is not set in the script"
                return None, why, [], ("splat" if index in ("@", "*") else None)
            if index in ("@", "*"):
                path = self.path()
                if var.block and tuple(path[:len(var.block)]) != tuple(var.block):
                    return None, f"{name} is set inside an if/loop block (line {var.line}) and read after it", [], "splat"
                if not quoted:  # ${A[@]} unquoted: each item is split into fields
                    return None, None, [(name, "(array)", var.line)], [
                        piece for w in var.array for piece in _fields(w, name)]
                # each item keeps where the array set it (the word a finding should point at) and,
                # when the script does not determine it, its own unknown/splat: the others stay known
                return None, None, [(name, "(array)", var.line)], [
                    Word(w.text, w.line, w.col, w.raw, w.unknown, w.splat, w.vars or ((name, w.text, w.line),))
                    for w in var.array]
            if index.isdigit() and int(index) < len(var.array):
                w = var.array[int(index)]
                return (w.text if w.known() else None), w.unknown, [(name, w.text, var.line)], None
            return None, f"{name}[{index}] is not a simple index", [], None
        # a variable
        _, name, op, arg, quoted = part
        var = self.vars.get(name)
        if name in self.vars:
            value, why = self._visible(name, var)
        elif name in PER_TASK_SLURM:
            # each Slurm task's own (a default as in ${SLURM_NODEID:-0} is not what a task under srun sees); the
            # script's own shell expands it to its one value
            return None, (f"${name} is each Slurm task's own" if self.in_task else
                          PerTaskOnce(name, self._written_at(name, raw))), [], None
        else:
            value, why = None, (f"${name} is an argument of the script" if name.isdigit() else
                                f"${name} is not set in the script (it comes from the environment)")
        if op == "":
            if var is not None and var.array is not None and value is None and why is None:
                return None, f"{name} is an array", [], None
            vs = [(name, value, var.line if var else None, var.note if var else None)] if value is not None else []
            return value, why, vs, None
        if op in ("len", "other"):
            return None, f"${{{name}...}} uses a shell operation meshlint does not evaluate", [], None
        if op in ("#", "##", "%", "%%"):
            if value is None:
                return None, why, [], None
            pattern, _ = self._join(_Lexer(arg or "")._word_all(), raw, assignment=True, depth=depth + 1)
            cut = strip_pattern(value, op, pattern.text) if pattern.unknown is None else None
            if cut is None:
                return None, f"${{{name}{op}...}} uses a value meshlint cannot see", [], None
            return cut, None, [(name, cut, var.line if var else None)], None
        is_set = name in self.vars
        usable = is_set and (value is not None or why is None)
        if op in (":-", ":=", "-", "="):
            need_default = (not is_set) or (op.startswith(":") and value == "")
            if not need_default:
                if value is None and why is not None and var is not None and var.block:
                    pass
                return value, why, ([(name, value, var.line)] if value is not None and var else []), None
            if arg is None:
                arg = ""
            if depth >= MAX_NESTING:
                return None, "defaults nested too deeply", [], None
            sub = _Lexer(arg)
            raw_default = sub._word_all()
            word, _ = self._join(raw_default, raw, assignment=True, depth=depth + 1)
            if word.unknown is not None:
                return None, word.unknown, list(word.vars), None
            if op in (":=", "="):
                self._assign(name, word.text, None, raw.line)
            if word.text == "" and not is_set:
                return None, f"${name} is empty unless the environment sets it", [], None
            return word.text, None, [(name, word.text, None, "DEFAULT")], None
        if op in (":+", "+"):
            if not is_set:
                return "", None, [], None
            if not usable:
                return None, why, [], None
            if op == ":+" and value == "":
                return "", None, [], None
            sub = _Lexer(arg or "")
            word, _ = self._join(sub._word_all(), raw, assignment=True, depth=depth + 1)
            return (None if word.unknown else word.text), word.unknown, [], None
        if op in (":?", "?"):
            return value, why, [(name, value, var.line)] if value is not None and var else [], None
        return None, f"${{{name}{op}...}} is not evaluated", [], None

    def _braced_value(self, m) -> str:
        """``${NAME}``, ``${NAME:-d}``, ``${NAME-d}`` inside $((...)): the value the script determines, else the
        default where NAME is unset (or empty, for :-), else UNKNOWN_CHAR."""
        name, op, default = m.group(1), m.group(2), m.group(3)
        var = self.vars.get(name)
        if var is None:
            return default if op and name not in PER_TASK_SLURM else UNKNOWN_CHAR
        value, _ = self._visible(name, var)
        if value is None:
            return UNKNOWN_CHAR
        return default if op == ":-" and value == "" else value

    def _written_at(self, name: str, raw: _Raw) -> tuple | None:
        """(line, col) of ``$name``/``${name`` inside the script's raw word, where findings about it point."""
        if self.text is not self.file_text:
            return None
        at = min((k for k in (self.text.find(f"${name}", raw.start, raw.end),
                              self.text.find(f"${{{name}", raw.start, raw.end)) if k >= 0), default=-1)
        if at < 0:
            return None
        return self.text.count("\n", 0, at) + 1, at - self.text.rfind("\n", 0, at)

    def _arith(self, expr: str):
        if len(expr) > MAX_ARITH_CHARS:
            return None
        if "${" in expr:  # $(( ${SLURM_NNODES:-1} * 8 )): the braced expansions first, as the shell does
            expr = _BRACED.sub(self._braced_value, expr)
            if "${" in expr or UNKNOWN_CHAR in expr:
                return None
        tokens = re.findall(r"\s*(\d+|[A-Za-z_][A-Za-z0-9_]*|\$[A-Za-z_][A-Za-z0-9_]*|\*\*|[-+*/%()])", expr)
        if "".join(tokens).replace(" ", "") != re.sub(r"\s+", "", expr):
            return None
        values = []
        for t in tokens:
            t = t.strip()
            if t[0] == "$":
                t = t[1:]
            if t[0].isalpha() or t[0] == "_":
                var = self.vars.get(t)
                if var is None:
                    return None
                value, _ = self._visible(t, var)
                if value is None or not value.strip().lstrip("-").isdigit() or len(value) > 18:
                    return None
                values.append(value.strip())
            else:
                values.append(t)
        try:
            return _eval_int(values)
        except (ValueError, ZeroDivisionError, IndexError, OverflowError):
            return None


def _eval_int(tokens: list) -> int:
    """Integer arithmetic (+ - * / % ** and parentheses) on at most MAX_ARITH_CHARS tokens; shell
    division truncates toward zero. Iterative precedence climbing, no recursion beyond the parentheses
    (bounded by the token count)."""
    pos = 0

    def atom():
        nonlocal pos
        t = tokens[pos]
        if t == "(":
            pos += 1
            v = expr(0)
            if tokens[pos] != ")":
                raise ValueError
            pos += 1
            return v
        if t == "-":
            pos += 1
            return -atom()
        if t == "+":
            pos += 1
            return atom()
        pos += 1
        return int(t)

    prec = {"+": 1, "-": 1, "*": 2, "/": 2, "%": 2, "**": 3}

    def expr(min_prec):
        nonlocal pos
        left = atom()
        while pos < len(tokens) and tokens[pos] in prec and prec[tokens[pos]] >= min_prec:
            op = tokens[pos]
            pos += 1
            right = expr(prec[op] + (0 if op == "**" else 1))
            if op == "+":
                left += right
            elif op == "-":
                left -= right
            elif op == "*":
                left *= right
            elif op == "/":
                left = int(left / right) if abs(left) < 1 << 52 else left // right
            elif op == "%":
                left = left - right * int(left / right)
            else:
                if right < 0 or right > 64:
                    raise ValueError
                left **= right
            if abs(left) > 1 << 62:
                raise OverflowError
        return left

    value = expr(0)
    if pos != len(tokens):
        raise ValueError
    return value


def _fields(w: Word, name: str) -> list:
    """An array item expanded unquoted: its whitespace-separated fields, each positioned in the item."""
    vars_ = w.vars or ((name, w.text, w.line),)
    if not w.known() or not any(ch.isspace() for ch in w.text):
        return [Word(w.text, w.line, w.col, w.raw, w.unknown, w.splat, vars_)]
    out = []
    for match in re.finditer(r"\S+", w.text):
        # the column is exact when the item is written as it reads ("--fp8-format hybrid" inside quotes)
        out.append(Word(match.group(), w.line, w.col + 1 + match.start() if w.raw.startswith(('"', "'")) else w.col,
                        w.raw, None, False, vars_))
    return out


_SHELL_OPTION = re.compile(r"-[a-zA-Z]+")  # bash -x, -l, -lc: short options of the shell, -c among them


def _mentions(raws: list, text: str) -> bool:
    """Cheap filter: a command that could start torchtitan (its words, or variables, say so)."""
    for r in raws:
        chunk = text[r.start:r.end]
        if ("torchtitan" in chunk or "run_train" in chunk or "torchrun" in chunk or "$" in chunk or "python" in chunk
                or "train.py" in chunk or "accelerate" in chunk or "sbatch" in chunk or chunk.endswith(".sh")):
            return True
    return False


def _short(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= 40 else text[:37] + "..."
