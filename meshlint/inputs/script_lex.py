"""The lexer of launch scripts: words with their quoting, ``$``-parts and positions, commands, here-documents,
``#SBATCH`` lines; and a variable's record (``_Var``), which the reader and the flow of control share."""

from __future__ import annotations

import re

from meshlint.errors import InputError
from meshlint.inputs.launch_words import MAX_ARGS


CONDITIONAL_APPEND = "{name}+=(...)"  # the raw text of the words an if/loop block may append to an array
MAX_LAUNCHES = 256          # launch lines in one script
MAX_VARIABLES = 10_000      # distinct variables a script assigns
MAX_NESTING = 32            # ${...} / $(...) / quotes inside each other within one word
MAX_ARITH_CHARS = 200       # one $((...)) expression
MAX_VALUE_CHARS = 16_384    # one variable's value or one expanded word (longer: unknown, never truncated)

# Slurm's environment inside an allocation, from the script's #SBATCH options
_SLURM_VARS = {"SLURM_NNODES": "nodes", "SLURM_JOB_NUM_NODES": "nodes", "SLURM_NTASKS": "ntasks",
               "SLURM_NPROCS": "ntasks", "SLURM_NTASKS_PER_NODE": "ntasks-per-node",
               "SLURM_GPUS_ON_NODE": "gpus-per-node", "SLURM_GPUS_PER_NODE": "gpus-per-node"}
_RESERVED_START = {"if", "then", "else", "elif", "do", "while", "until", "!", "{", "time", "fi", "done",
                   "esac", "}", "for", "case", "select", "function", "in"}


SUBMITTERS = ("sbatch", "bash", "sh", "zsh")   # commands that run another script (inputs/script_call.py)


# ----------------------------------------------------------------------------- lexing

class _Raw:
    """A word as written: parts to expand, its position and source text."""

    __slots__ = ("parts", "line", "col", "start", "end")

    def __init__(self, parts: list, line: int, col: int, start: int, end: int):
        self.parts = parts     # [(kind, ...)]: lit, var, special, cmdsub, arith, array
        self.line = line
        self.col = col
        self.start = start
        self.end = end


class _Cmd:
    __slots__ = ("words", "line", "sbatch")

    def __init__(self, words: list, line: int, sbatch: tuple | None = None):
        self.words = words
        self.line = line
        self.sbatch = sbatch   # (line, col, option text) of a #SBATCH directive


_PLAIN = re.compile(r"[^\s'\"\\$`#;&|<>()]+")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SBATCH = re.compile(r"#SBATCH\s+(.*)$")


class _Lexer:
    """Text -> simple commands of raw words. Linear; never recursive beyond MAX_NESTING."""

    def __init__(self, text: str):
        self.text = text
        self.n = len(text)
        self.i = 0
        self.line = 1
        self.line_start = 0
        self.heredocs: list = []      # (delimiter, strip tabs) waiting for the next newline
        self.sbatch_open = True       # #SBATCH lines count only before the first command (sbatch's rule)

    def col(self, i: int | None = None) -> int:
        return (self.i if i is None else i) - self.line_start + 1

    def _newline(self, at: int) -> None:
        self.line += 1
        self.line_start = at + 1

    def commands(self) -> list:
        out: list = []
        words: list = []
        cmd_line = 1
        text, n = self.text, self.n
        skip_next = False             # the target of a redirection
        while self.i < n:
            c = text[self.i]
            if c in " \t\r":
                self.i += 1
                continue
            if c == "\\" and self.i + 1 < n and text[self.i + 1] == "\n":
                self._newline(self.i + 1)
                self.i += 2
                continue
            if c == "\n":
                self._newline(self.i)
                self.i += 1
                if words:
                    out.append(_Cmd(words, cmd_line))
                    words = []
                self._skip_heredocs()
                continue
            if c == "#":
                end = text.find("\n", self.i)
                end = n if end < 0 else end
                comment = text[self.i:end]
                if not words and self.sbatch_open:
                    m = _SBATCH.match(comment)
                    if m:
                        out.append(_Cmd([], self.line, (self.line, self.col() + m.start(1), m.group(1))))
                self.i = end
                continue
            if c in ";&|()":
                # operators end a simple command
                if c == "&" and self.i + 1 < n and text[self.i + 1] == ">":
                    self.i += 2 + (self.i + 2 < n and text[self.i + 2] == ">")
                    skip_next = True
                    continue
                if words:
                    out.append(_Cmd(words, cmd_line))
                    words = []
                self.i += 1
                while self.i < n and text[self.i] in ";&|" and c != "(" and c != ")":
                    self.i += 1
                continue
            if c in "<>":
                # a redirection: drop an fd number before it and the target after it
                if words and _is_fd(words[-1], self.i):
                    words.pop()
                j = self.i
                while j < n and text[j] in "<>&-|":
                    j += 1
                op = text[self.i:j]
                self.i = j
                if op.startswith("<<") and not op.startswith("<<<"):
                    self._heredoc_delimiter(op.endswith("-"))
                    continue
                if op.endswith("&") and self.i < n and (text[self.i].isdigit() or text[self.i] == "-"):
                    while self.i < n and (text[self.i].isdigit() or text[self.i] == "-"):
                        self.i += 1
                    continue
                skip_next = True
                continue
            raw = self._word()
            if raw is None:
                continue
            if skip_next:
                skip_next = False
                continue
            if not words:
                cmd_line = raw.line
                self.sbatch_open = False
            words.append(raw)
        if words:
            out.append(_Cmd(words, cmd_line))
        return out

    def _skip_heredocs(self) -> None:
        text, n = self.text, self.n
        while self.heredocs:
            delim, strip = self.heredocs.pop(0)
            while self.i < n:
                end = text.find("\n", self.i)
                end = n if end < 0 else end
                line = text[self.i:end]
                if strip:
                    line = line.lstrip("\t")
                at = end
                self.i = min(end + 1, n)
                if end < n:
                    self._newline(at)
                if line == delim:
                    break

    def _heredoc_delimiter(self, strip: bool) -> None:
        text, n = self.text, self.n
        while self.i < n and text[self.i] in " \t":
            self.i += 1
        raw = self._word()
        if raw is None:
            return
        delim = "".join(p[1] for p in raw.parts if p[0] == "lit")
        self.heredocs.append((delim, strip))

    def _word(self) -> _Raw | None:
        start, line, col = self.i, self.line, self.col()
        parts: list = []
        text, n = self.text, self.n
        while self.i < n:
            c = text[self.i]
            m = _PLAIN.match(text, self.i)
            if m:
                chunk = m.group(0)
                # NAME=( ... ): an array assignment
                if self.i + len(chunk) < n and text[self.i + len(chunk)] == "(" and not parts \
                        and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*\+?=", chunk):
                    parts.append(("lit", chunk, False))
                    self.i += len(chunk) + 1
                    parts.append(("array", self._array()))
                    continue
                parts.append(("lit", chunk, False))
                self.i = m.end()
                continue
            if c == "#" and self.i > start:
                parts.append(("lit", "#", False))   # '#' inside a word is no comment
                self.i += 1
                continue
            if c == "\\":
                if self.i + 1 < n:
                    if text[self.i + 1] == "\n":
                        self._newline(self.i + 1)
                    else:
                        parts.append(("lit", text[self.i + 1], True))
                    self.i += 2
                else:
                    self.i += 1
                continue
            if c == "'":
                end = text.find("'", self.i + 1)
                end = n if end < 0 else end
                chunk = text[self.i + 1:end]
                self._count_lines(chunk, self.i + 1)
                parts.append(("lit", chunk, True))
                self.i = end + 1
                continue
            if c == '"':
                self.i += 1
                parts.extend(self._double_quoted())
                continue
            if c == "$":
                parts.append(self._dollar(quoted=False))
                continue
            if c == "`":
                end = text.find("`", self.i + 1)
                end = n if end < 0 else end
                self._count_lines(text[self.i:end], self.i)
                parts.append(("cmdsub", text[self.i:end + 1], False))
                self.i = end + 1
                continue
            break   # whitespace, operator, comment start
        if self.i == start:
            self.i += 1   # a character no rule takes (never loops)
            return None
        return _Raw(parts, line, col, start, self.i)

    def _count_lines(self, chunk: str, offset: int) -> None:
        k = chunk.find("\n")
        while k >= 0:
            self._newline(offset + k)
            k = chunk.find("\n", k + 1)

    def _double_quoted(self) -> list:
        text, n = self.text, self.n
        parts: list = []
        buf = []
        while self.i < n:
            c = text[self.i]
            if c == '"':
                self.i += 1
                break
            if c == "\\" and self.i + 1 < n and text[self.i + 1] in '"\\$`\n':
                if text[self.i + 1] == "\n":
                    self._newline(self.i + 1)
                else:
                    buf.append(text[self.i + 1])
                self.i += 2
                continue
            if c == "$":
                if buf:
                    parts.append(("lit", "".join(buf), True))
                    buf = []
                parts.append(self._dollar(quoted=True))
                continue
            if c == "`":
                if buf:
                    parts.append(("lit", "".join(buf), True))
                    buf = []
                end = text.find("`", self.i + 1)
                end = n if end < 0 else end
                self._count_lines(text[self.i:end], self.i)
                parts.append(("cmdsub", text[self.i:end + 1], True))
                self.i = end + 1
                continue
            if c == "\n":
                self._newline(self.i)
            buf.append(c)
            self.i += 1
        if buf or not parts:
            parts.append(("lit", "".join(buf), True))
        return parts

    def _dollar(self, quoted: bool) -> tuple:
        text, n = self.text, self.n
        i = self.i + 1
        if i >= n:
            self.i = i
            return ("lit", "$", quoted)
        c = text[i]
        if c == "{":
            end = _matching(text, i, "{", "}")
            body = text[i + 1:end]
            self._count_lines(text[self.i:end], self.i)
            self.i = min(end + 1, n)
            return _braced(body, quoted)
        if c == "(":
            arith = i + 1 < n and text[i + 1] == "("
            end = _matching(text, i, "(", ")")
            body = text[i + 1:end]
            self._count_lines(text[self.i:end], self.i)
            self.i = min(end + 1, n)
            if arith and body.startswith("(") and body.endswith(")"):
                return ("arith", body[1:-1], quoted)
            return ("cmdsub", text[self.i - len(body) - 3:self.i], quoted)
        if c == "'" and not quoted:
            end = text.find("'", i + 1)
            end = n if end < 0 else end
            self.i = end + 1
            return ("lit", text[i + 1:end].replace("\\n", "\n").replace("\\t", "\t"), True)
        if c in "@*#?$!-0123456789":
            self.i = i + 1
            return ("special", c, quoted)
        m = _NAME.match(text, i)
        if m:
            self.i = m.end()
            return ("var", m.group(0), "", None, quoted)
        self.i = i
        return ("lit", "$", quoted)

    def _array(self) -> list:
        """The words of ``NAME=( ... )`` up to the closing parenthesis."""
        text, n = self.text, self.n
        items = []
        while self.i < n:
            c = text[self.i]
            if c in " \t\r":
                self.i += 1
                continue
            if c == "\n":
                self._newline(self.i)
                self.i += 1
                continue
            if c == "\\" and self.i + 1 < n and text[self.i + 1] == "\n":
                self._newline(self.i + 1)
                self.i += 2
                continue
            if c == ")":
                self.i += 1
                break
            if c == "#":
                end = text.find("\n", self.i)
                self.i = n if end < 0 else end
                continue
            raw = self._word()
            if raw is not None:
                items.append(raw)
            if len(items) > MAX_ARGS:
                break
        return items


def _is_fd(raw: _Raw, at: int) -> bool:
    """``2>`` : a word of digits right before the redirection operator is its file descriptor."""
    return raw.end == at and len(raw.parts) == 1 and raw.parts[0][0] == "lit" \
        and raw.parts[0][1].isdigit() and not raw.parts[0][2]


def _matching(text: str, i: int, open_c: str, close_c: str) -> int:
    """Index of the bracket closing the one at ``i`` (quotes skipped; nesting bounded)."""
    depth = 0
    n = len(text)
    j = i
    while j < n:
        c = text[j]
        if c == "\\":
            j += 2
            continue
        if c == "'" and open_c == "(":
            end = text.find("'", j + 1)
            j = n if end < 0 else end + 1
            continue
        if c == open_c:
            depth += 1
            if depth > MAX_NESTING:
                line = text.count("\n", 0, j) + 1
                raise InputError("ML007", f"brackets nested deeper than {MAX_NESTING} levels", line, 1)
        elif c == close_c:
            depth -= 1
            if depth == 0:
                return j
        j += 1
    return n


_BRACED = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*|[@*#?$!0-9])(\[[^\]]*\])?(.*)$", re.S)


def _braced(body: str, quoted: bool) -> tuple:
    if body.startswith("#") and len(body) > 1:
        return ("var", body[1:], "len", None, quoted)
    m = _BRACED.match(body)
    if not m:
        return ("var", body, "other", None, quoted)
    name, index, rest = m.group(1), m.group(2), m.group(3)
    if index:
        return ("elem", name, index[1:-1], rest, quoted)
    if name in "@*#?$!":
        return ("special", name, quoted) if not rest else ("var", name, "other", None, quoted)
    if name.isdigit() and not rest:
        return ("special", name, quoted)
    if not rest:
        return ("var", name, "", None, quoted)
    for op in (":-", ":=", ":+", ":?", "-", "=", "+", "?", "##", "#", "%%", "%"):
        if rest.startswith(op):
            return ("var", name, op, rest[len(op):], quoted)
    return ("var", name, "other", None, quoted)


class _Var:
    __slots__ = ("value", "why", "line", "block", "exported", "array", "note", "spans", "partial")

    def __init__(self, value, why, line, block, exported=False, array=None, note=None, spans=(), partial=None):
        self.partial = partial    # (text with UNKNOWN_CHAR, whys) of a value known but for some parts, else None
        self.spans = spans        # ((start, end), ...): where the value was written (shellflow.place)
        self.value = value        # str, or None when unknown
        self.why = why            # why it is unknown
        self.line = line          # where it was set (None: a default / Slurm)
        self.block = block        # the if/loop/brace block path it was set in
        self.exported = exported
        self.array = array        # [Word] for NAME=(...)
        self.note = note          # how a known value came about ("default", "#SBATCH --nodes=4")


def _lexer_word_all(self) -> list:
    """All parts of a text read as the inside of one double-quoted-like word (a default value)."""
    parts: list = []
    while self.i < self.n:
        raw = self._word()
        if raw is None:
            # whitespace or an operator character inside a default: keep it literally
            parts.append(("lit", self.text[self.i - 1], True))
            continue
        parts.extend(raw.parts)
    return parts


_Lexer._word_all = _lexer_word_all


def _literal(raw: _Raw) -> str | None:
    if all(p[0] == "lit" for p in raw.parts):
        return "".join(p[1] for p in raw.parts)
    return None


def _assign_head(raw: _Raw):
    """(name, append) when the word is NAME=... or NAME+=..., else None."""
    if not raw.parts or raw.parts[0][0] != "lit" or raw.parts[0][2]:
        return None
    m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)(\+?)=", raw.parts[0][1])
    if not m:
        return None
    return m.group(1), bool(m.group(2))
