"""A fast reader for the TOML that configs are written in: exactly tomllib's result, or None (declined).

tomllib reads a character at a time and its import pulls ``typing``, ``re`` and ``datetime``: on a
first run that is a quarter of meshlint's cost. This reader takes a document a line and a token at
a time with ``str`` methods, for the shapes real configs have: tables and arrays of tables, bare,
quoted and dotted keys, one-line basic (simple escapes) and literal strings, decimal integers,
floats (``inf``/``nan`` too), booleans, arrays and inline tables without dotted keys. It gives the
same dict as ``tomllib.loads`` (key order, types, values) and keeps tomllib's rules on redefined
keys and tables (its ``Flags``, mirrored as sets of key paths). Anything else - multi-line strings,
dates, hex numbers, ``\\u`` escapes, control characters - and anything that is not valid TOML is
declined: the caller then runs tomllib itself, whose result or error message stays the output.
Proved against tomllib on every TOML file at hand and on generated mutants (tests/test_tomlfast.py,
bench/bench_tomlfast.py).
"""

from __future__ import annotations

import sys
from itertools import accumulate

# Characters tomllib refuses everywhere in a document (ASCII control characters but tab and newline;
# "\r" is checked apart, after "\r\n" -> "\n" as tomllib does).
_CONTROL = tuple(chr(i) for i in (*range(0, 9), *range(11, 32), 127) if i != 13)
_WS = " \t"
_BARE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_TOKEN = _BARE | frozenset("+.")
_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\"}
_SPECIAL = {"inf", "nan", "+inf", "-inf", "+nan", "-nan"}
# Across documents (a run reads many configs of the same keys and values): a line's text before its
# first "=" -> its one bare key, and the text after it -> its scalar value; each bounded in size.
_KEYS: dict = {}
_VALUES: dict = {}
_HEADERS: dict = {}  # a header line's text -> (its key, whether it opens an array of tables)
_CACHED = 4096
_MISS = object()


_SPLIT: list = [None, None]  # the text split into lines last, and its lines


def lines_of(text: str) -> list:
    """``text.split("\\n")``, shared with the last caller that split the same text object: a config is split here
    to be read, then again to find its comments (inputs/tomlpos.py); once, not twice, saves a first run on
    KempnerForge's configs ~1 M instructions. The list is shared: read it, never change it."""
    if _SPLIT[0] is text:
        return _SPLIT[1]
    lines = text.split("\n")
    _SPLIT[0], _SPLIT[1] = text, lines
    return lines


class _Decline(Exception):
    """The document is not one this reader handles (or not valid TOML): tomllib decides."""


def loads(text: str) -> dict | None:
    """``tomllib.loads(text)``'s result, or None when this reader declines the document."""
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        if "\r" in text:
            return None
    for c in _CONTROL:
        if c in text:
            return None
    if '"""' in text or "'''" in text:
        return None
    try:
        return _Reader(text).document()
    except (_Decline, IndexError, ValueError, KeyError, TypeError, RecursionError):
        return None


def _bare(part: str) -> bool:
    """A bare key: one or more of A-Z a-z 0-9 _ - (ASCII only)."""
    if not part or not part.isascii():
        return False
    rest = part.replace("_", "").replace("-", "")
    return not rest or rest.isalnum()


def _digits(x: str) -> bool:
    """``[0-9](?:_?[0-9])*``: ASCII digits, single underscores only between digits."""
    return (bool(x) and x.isascii() and x[0] != "_" and x[-1] != "_" and "__" not in x
            and x.replace("_", "").isdigit())


def _number(tok: str):
    """A decimal integer or float token, as tomllib's RE_NUMBER reads it (whole token), else _Decline."""
    body = tok[1:] if tok[0] in "+-" else tok
    mant, e, exp = body.replace("E", "e").partition("e")
    if e:
        if exp[:1] in ("+", "-"):
            exp = exp[1:]
        if not _digits(exp):
            raise _Decline
    whole, dot, frac = mant.partition(".")
    if whole != "0" and not (whole[:1] in "123456789" and whole[:1] and _digits(whole)):
        raise _Decline
    if dot and not _digits(frac):
        raise _Decline
    if dot or e:
        return float(tok)
    return int(tok, 0)


class _Reader:
    __slots__ = ("s", "n", "root", "explicit", "frozen", "pending")

    def __init__(self, text: str):
        self.s = text
        self.n = len(text)
        self.root: dict = {}
        self.explicit: set = set()   # key paths tomllib flags EXPLICIT_NEST (tables, dotted-key parents)
        self.frozen: set = set()     # key paths flagged FROZEN (inline arrays and tables), recursive
        self.pending: list = []      # dotted-key parents, made explicit at the next table header

    # ------------------------------------------------------------------ statements
    def document(self) -> dict:
        """The whole document, a line at a time; a line met before (in this document or another) costs
        two lookups, anything else is read in place from its offset in the text."""
        s = self.s
        keys, values, headers = _KEYS, _VALUES, _HEADERS
        lines = lines_of(s)
        count = len(lines)
        ends = None  # each line's end offset, computed at the first line read in place
        header: tuple = ()
        cur = self.root
        i = 0
        while i < count:
            line = lines[i]
            i += 1
            if not line:
                continue
            c = line[0]
            if c == "#":
                continue
            if c == " " or c == "\t":
                line = line.lstrip(_WS)
                if not line or line[0] == "#":
                    continue
                c = line[0]
            if c == "[":
                known = headers.get(line)
                if known is not None:
                    header, cur = self._header(*known)
                    continue
            else:
                k, eq, rest = line.partition("=")
                key = keys.get(k)
                if key is not None:
                    value = values.get(rest, _MISS)
                    if value is not _MISS:
                        if key in cur:
                            raise _Decline
                        cur[key] = value
                        continue
            if ends is None:
                ends = list(accumulate(map(len, lines)))
            eol = ends[i - 1] + i - 1  # the offset of this line's "\n" (or the text's end)
            pos = eol - len(line)
            if c == "[":
                aot = s.startswith("[[", pos)
                at, key = self._key(pos + 1 + aot, eol, "]")
                if not s.startswith("]]" if aot else "]", at):
                    raise _Decline
                header, cur = self._header(key, aot)
                pos = self._end(at + 1 + aot)
                if pos == eol + 1 and len(headers) < _CACHED:
                    headers[line] = (key, aot)
            else:
                pos = self._end(self._key_value(pos, eol, header, cur))
            while i < count and ends[i - 1] + i < pos:  # past the lines a multi-line array took
                i += 1
        return self.root

    def _header(self, key: tuple, aot: bool) -> tuple:
        """``[key]`` or ``[[key]]``: (the header, the table its key/value lines go to)."""
        self.explicit.update(self.pending)
        self.pending.clear()
        return key, (self._array_table(key) if aot else self._table(key))

    def _end(self, pos: int) -> int:
        """A statement's end: blanks, then a comment or the line's end; the next line's start."""
        s, n = self.s, self.n
        while pos < n and s[pos] in _WS:
            pos += 1
        if pos < n:
            c = s[pos]
            if c == "#":
                eol = s.find("\n", pos)
                pos = n if eol < 0 else eol
            elif c != "\n":
                raise _Decline
        return pos + 1

    def _frozen(self, path: tuple) -> bool:
        frozen = self.frozen
        if frozen:  # a loop, not any() over a generator: every header of a document with an inline array asks
            for i in range(1, len(path) + 1):
                if path[:i] in frozen:
                    return True
        return False

    def _nest(self, path: tuple) -> dict:
        """tomllib's ``get_or_create_nest``: through the last element of arrays of tables."""
        cont = self.root
        for k in path:
            if k not in cont:
                cont[k] = {}
            cont = cont[k]
            if type(cont) is list:
                cont = cont[-1]
            if type(cont) is not dict:
                raise _Decline
        return cont

    def _table(self, key: tuple) -> dict:
        if key in self.explicit or self._frozen(key):
            raise _Decline
        self.explicit.add(key)
        return self._nest(key)

    def _array_table(self, key: tuple) -> dict:
        if self._frozen(key):
            raise _Decline
        m = len(key)
        self.explicit = {p for p in self.explicit if p[:m] != key}
        self.frozen = {p for p in self.frozen if p[:m] != key}
        self.explicit.add(key)
        parent = self._nest(key[:-1])
        last = key[-1]
        if last in parent:
            arr = parent[last]
            if type(arr) is not list:
                raise _Decline
        else:
            arr = parent[last] = []
        new: dict = {}
        arr.append(new)
        return new

    def _key_value(self, pos: int, eol: int, header: tuple, cur: dict) -> int:
        s = self.s
        first = pos
        at, key = self._key(pos, eol, "=")
        if s[at] != "=":
            raise _Decline
        start = at + 1
        pos = start
        while s[pos] in _WS:
            pos += 1
        pos, value = self._value(pos)
        stem = key[-1]
        if len(key) == 1:
            nest = cur  # the header's table; tomllib refused the header had it been frozen
        else:
            for i in range(1, len(key)):
                path = header + key[:i]
                if path in self.explicit:
                    raise _Decline
                self.pending.append(path)
            parent = header + key[:-1]
            if self._frozen(parent):
                raise _Decline
            nest = self._nest(parent)
        if stem in nest:
            raise _Decline
        if type(value) is list or type(value) is dict:
            self.frozen.add(header + key)
        elif (value == value and len(_VALUES) < _CACHED and s.find("=", first, eol) == at
              and self._end(pos) == eol + 1):
            # the same text after a line's first "=" is the same value, the statement ending on that line
            # (no NaN: tomllib makes each its own object)
            _VALUES[s[start:eol]] = value
        nest[stem] = value
        return pos

    # ------------------------------------------------------------------ keys
    def _key(self, pos: int, eol: int, end: str) -> tuple:
        """A (dotted) key from ``pos``, blanks around it skipped: (the position after it, its parts)."""
        s = self.s
        stop = s.find(end, pos, eol)
        if stop >= 0:
            text = s[pos:stop]
            if '"' not in text and "'" not in text:
                parts = tuple(p.strip(_WS) for p in text.split("."))
                for p in parts:
                    if not _bare(p):
                        raise _Decline
                if end == "=" and len(parts) == 1 and len(_KEYS) < _CACHED:
                    _KEYS[text] = parts[0]  # a statement's text before its line's first "="
                return stop, parts
        parts = []
        while True:
            while s[pos] in _WS:
                pos += 1
            c = s[pos]
            if c == '"':
                pos, part = self._basic(pos)
            elif c == "'":
                pos, part = self._literal(pos)
            elif c in _BARE:
                start = pos
                while s[pos] in _BARE:
                    pos += 1
                part = s[start:pos]
            else:
                raise _Decline
            parts.append(part)
            while pos < self.n and s[pos] in _WS:
                pos += 1
            if pos >= self.n or s[pos] != ".":
                return pos, tuple(parts)
            pos += 1

    # ------------------------------------------------------------------ values
    def _value(self, pos: int):
        s = self.s
        c = s[pos]
        if c == '"':
            return self._basic(pos)
        if c == "'":
            return self._literal(pos)
        if c == "[":
            return self._array(pos)
        if c == "{":
            return self._inline_table(pos)
        start = pos
        n = self.n
        while pos < n and s[pos] in _TOKEN:
            pos += 1
        tok = s[start:pos]
        if pos < n and s[pos] not in " \t\n#,]}":
            raise _Decline  # a date's ":" or "T", or anything tomllib might read differently
        if tok == "true":
            return pos, True
        if tok == "false":
            return pos, False
        if tok in _SPECIAL:
            return pos, float(tok)
        if not tok:
            raise _Decline
        return pos, _number(tok)

    def _basic(self, pos: int) -> tuple:
        s = self.s
        end = s.find('"', pos + 1)
        if end < 0:
            raise _Decline
        text = s[pos + 1:end]
        if "\n" in text:
            raise _Decline
        if "\\" not in text:
            return end + 1, text
        out = []
        i = pos + 1
        while True:
            j = s.find("\\", i)
            q = s.find('"', i)
            if q < 0:
                raise _Decline
            if j < 0 or q < j:
                piece = s[i:q]
                if "\n" in piece:
                    raise _Decline
                out.append(piece)
                return q + 1, "".join(out)
            piece = s[i:j]
            if "\n" in piece:
                raise _Decline
            out.append(piece)
            out.append(_ESCAPES[s[j + 1]])  # KeyError (\u, \U, anything else): declined
            i = j + 2

    def _literal(self, pos: int) -> tuple:
        s = self.s
        end = s.find("'", pos + 1)
        if end < 0:
            raise _Decline
        text = s[pos + 1:end]
        if "\n" in text:
            raise _Decline
        return end + 1, text

    def _skip(self, pos: int) -> int:
        """Blanks, newlines and comments inside an array."""
        s, n = self.s, self.n
        while pos < n:
            c = s[pos]
            if c in " \t\n":
                pos += 1
            elif c == "#":
                eol = s.find("\n", pos)
                pos = n if eol < 0 else eol
            else:
                break
        return pos

    def _array(self, pos: int) -> tuple:
        s = self.s
        out: list = []
        pos = self._skip(pos + 1)
        if s[pos] == "]":
            return pos + 1, out
        while True:
            pos, value = self._value(pos)
            out.append(value)
            pos = self._skip(pos)
            c = s[pos]
            if c == "]":
                return pos + 1, out
            if c != ",":
                raise _Decline
            pos = self._skip(pos + 1)
            if s[pos] == "]":
                return pos + 1, out

    def _inline_table(self, pos: int) -> tuple:
        s = self.s
        out: dict = {}
        pos += 1
        while s[pos] in _WS:
            pos += 1
        if s[pos] == "}":
            return pos + 1, out
        while True:
            pos, key = self._key(pos, pos, "=")  # never the split path: one part, parsed in place
            if len(key) != 1 or s[pos] != "=":
                raise _Decline  # dotted keys in inline tables: left to tomllib
            pos += 1
            while s[pos] in _WS:
                pos += 1
            pos, value = self._value(pos)
            if key[0] in out:
                raise _Decline
            out[key[0]] = value
            while s[pos] in _WS:
                pos += 1
            c = s[pos]
            if c == "}":
                return pos + 1, out
            if c != ",":
                raise _Decline
            pos += 1
            while s[pos] in _WS:
                pos += 1


def tomllib_module():
    """The standard library's TOML parser (tomli before Python 3.11), imported only when needed."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - exercised only on Python 3.10
        import tomli as tomllib
    return tomllib


def parse(text: str) -> dict:
    """``tomllib.loads(text)``: this reader's table, else tomllib's (and its ``TOMLDecodeError``, a ValueError)."""
    data = loads(text)
    return tomllib_module().loads(text) if data is None else data


def load(path: str) -> dict:
    """``tomllib.load`` of the file at ``path`` (UTF-8; OSError or ValueError when it cannot be read)."""
    with open(path, "rb") as f:
        return parse(f.read().decode())
