"""Line and column of every key, table header and comment in a TOML document.

tomllib returns values without positions, so findings could not point at
``tp = 3``. This scanner walks the same text a second time and records where
each key path starts. It runs only on documents tomllib has already accepted,
so it can stay small; it never raises (a malformed tail just stops the scan).

Paths are tuples of keys, with an integer index for each element of an
array of tables (``[[mesh.dims]]``) or of an inline array.
"""

from __future__ import annotations


from meshlint import fastre
from meshlint.tomlfast import lines_of
from meshlint.limits import MAX_NESTING

Pos = tuple  # (line, col), both 1-based
# The full scan's patterns, compiled by its first run (compiling costs ~1 M instructions each; most runs need
# only quick_scan): a bare key's characters; a number, boolean or date, up to one of these; a basic string's
# characters up to a quote, backslash or line end.
_BARE_RUN = _PLAIN_VALUE = _STRING_RUN = None
_ESCAPES = {"b": "\b", "t": "\t", "n": "\n", "f": "\f", "r": "\r", '"': '"', "\\": "\\", "e": "\x1b"}


class Positions:
    __slots__ = ("keys", "tables", "comments", "duplicates")

    def __init__(self) -> None:
        self.keys: dict = {}         # path -> (line, col) of the key
        self.tables: dict = {}       # path -> (line, col) of the [header]
        self.comments: list = []     # (line, col, text after '#')
        self.duplicates: list = []   # (path, first pos, second pos)

    def locate(self, path: tuple) -> tuple[Pos, bool]:
        """Position for ``path``; the bool says whether the key itself was found.

        A defaulted key points at its section header, then at the nearest
        ancestor that exists, then at line 1.
        """
        if path in self.keys:
            return self.keys[path], True
        for cut in range(len(path), 0, -1):
            prefix = path[:cut]
            if prefix in self.tables:
                return self.tables[prefix], cut == len(path)
            if prefix in self.keys:
                return self.keys[prefix], cut == len(path)
        return (1, 1), False


class _Stop(Exception):
    pass


class _Scanner:
    def __init__(self, text: str):
        self.s = text
        self.n = len(text)
        self.i = 0
        self.line = 1
        self.line_start = 0
        self.out = Positions()
        self.aot_index: dict[tuple, int] = {}
        self.depth = 0

    # -- low level
    def pos(self) -> Pos:
        return (self.line, self.i - self.line_start + 1)

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < self.n else ""

    def advance(self, k: int = 1) -> None:
        for _ in range(k):
            if self.i >= self.n:
                raise _Stop
            if self.s[self.i] == "\n":
                self.line += 1
                self.line_start = self.i + 1
            self.i += 1

    def skip_ws(self) -> None:
        s, n, i = self.s, self.n, self.i
        while i < n and s[i] in " \t":
            i += 1
        self.i = i

    def skip_ws_nl_comments(self) -> None:
        s, n = self.s, self.n
        while self.i < n:
            c = s[self.i]
            if c in " \t\r":
                self.i += 1
            elif c == "\n":  # advance() inlined: this loop walks every blank and line break of the file
                self.i += 1
                self.line += 1
                self.line_start = self.i
            elif c == "#":
                self.comment()
            else:
                return

    def comment(self) -> None:
        line, col = self.pos()
        start = self.i + 1
        end = self.s.find("\n", start)
        end = self.n if end < 0 else end
        self.out.comments.append((line, col, self.s[start:end].rstrip("\r")))
        self.i = end

    # -- structure
    def document(self) -> None:
        current: tuple = ()
        while True:
            self.skip_ws_nl_comments()
            if self.i >= self.n:
                return
            if self.s[self.i] == "[":
                current = self.header()
            else:
                self.keyval(current)
            self.skip_ws()
            if self.i < self.n and self.s[self.i] == "#":
                self.comment()

    def header(self) -> tuple:
        at = self.pos()
        is_array = self.peek(1) == "["
        self.advance(2 if is_array else 1)
        self.skip_ws()
        parts = self.key()
        self.skip_ws()
        self.advance(2 if is_array else 1)
        prefix = self.resolve(parts[:-1])
        path = prefix + (parts[-1],)
        if is_array:
            index = self.aot_index.get(path, -1) + 1
            self.aot_index[path] = index
            self.out.tables.setdefault(path, at)
            path = path + (index,)
        self.out.tables.setdefault(path, at)
        return path

    def resolve(self, parts: list) -> tuple:
        """Full path of a header prefix, entering the latest element of arrays of tables."""
        path: tuple = ()
        for part in parts:
            path = path + (part,)
            if path in self.aot_index:
                path = path + (self.aot_index[path],)
        return path

    def keyval(self, base: tuple) -> None:
        at = self.pos()
        parts = self.key()
        path = base + tuple(parts)
        for cut in range(len(base) + 1, len(path)):
            self.out.tables.setdefault(path[:cut], at)  # dotted keys define tables
        if path in self.out.keys:
            self.out.duplicates.append((path, self.out.keys[path], at))
        else:
            self.out.keys[path] = at
        self.skip_ws()
        if self.i >= self.n or self.s[self.i] != "=":
            raise _Stop
        self.i += 1  # advance() over the "="
        self.skip_ws()
        self.value(path)

    def key(self) -> list:
        parts = [self.simple_key()]
        while True:
            self.skip_ws()
            if self.i >= self.n or self.s[self.i] != ".":
                return parts
            self.i += 1  # advance() over the "."
            self.skip_ws()
            parts.append(self.simple_key())

    def simple_key(self) -> str:
        c = self.peek()
        if c == '"':
            return self.basic_string()
        if c == "'":
            return self.literal_string()
        start = self.i
        self.i = _BARE_RUN.match(self.s, start).end()
        if self.i == start:
            raise _Stop
        return self.s[start:self.i]

    # -- values
    def value(self, path: tuple) -> None:
        c = self.peek()
        if c == '"':
            if self.s.startswith('"""', self.i):
                self.multiline('"""')
            else:
                self.basic_string()
        elif c == "'":
            if self.s.startswith("'''", self.i):
                self.multiline("'''")
            else:
                self.literal_string()
        elif c == "[":
            self.array(path)
        elif c == "{":
            self.inline_table(path)
        else:
            self.i = _PLAIN_VALUE.match(self.s, self.i).end()

    def array(self, path: tuple) -> None:
        self.enter()
        self.advance()
        index = 0
        while True:
            self.skip_ws_nl_comments()
            if self.peek() == "]":
                self.advance()
                self.depth -= 1
                return
            start = self.i
            self.out.keys.setdefault(path + (index,), self.pos())
            self.value(path + (index,))
            if self.i == start:
                raise _Stop  # no value here (end of text, a stray '}'): the document is malformed
            index += 1
            self.skip_ws_nl_comments()
            if self.peek() == ",":
                self.advance()

    def inline_table(self, path: tuple) -> None:
        self.enter()
        self.out.tables.setdefault(path, self.pos())
        self.advance()
        while True:
            self.skip_ws_nl_comments()
            if self.peek() == "}":
                self.advance()
                self.depth -= 1
                return
            self.keyval(path)
            self.skip_ws_nl_comments()
            if self.peek() == ",":
                self.advance()

    def enter(self) -> None:
        # values recurse once per level; the text was checked against the nesting limit,
        # but this scanner also reads documents tomllib rejected, so it keeps its own bound
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise _Stop

    def basic_string(self) -> str:
        self.advance()
        out = []
        while True:
            c = self.peek()
            if c == "" or c == "\n":
                raise _Stop
            if c == '"':
                self.advance()
                return "".join(out)
            if c == "\\":
                esc = self.peek(1)
                if esc in ("u", "U"):
                    width = 4 if esc == "u" else 8
                    digits = self.s[self.i + 2 : self.i + 2 + width]
                    try:
                        out.append(chr(int(digits, 16)))
                    except ValueError:
                        raise _Stop from None
                    self.advance(2 + width)
                    continue
                out.append(_ESCAPES.get(esc, esc))
                self.advance(2)
                continue
            end = _STRING_RUN.match(self.s, self.i).end()  # the plain characters up to the next '"', '\\' or line end
            out.append(self.s[self.i:end])
            self.i = end

    def literal_string(self) -> str:
        self.advance()
        end = self.s.find("'", self.i)
        if end < 0:
            raise _Stop
        text = self.s[self.i:end]
        self.i = end + 1
        return text

    def multiline(self, quote: str) -> None:
        self.advance(3)
        while True:
            if self.i >= self.n:
                raise _Stop
            if quote == '"""' and self.peek() == "\\":
                self.advance(2)
                continue
            if self.s.startswith(quote, self.i):
                # a closing delimiter may be preceded by up to two quote characters
                while self.s.startswith(quote, self.i + 1):
                    self.advance()
                self.advance(3)
                return
            self.advance()


def _compile_patterns() -> None:
    global _BARE_RUN, _PLAIN_VALUE, _STRING_RUN
    if _BARE_RUN is None:
        _BARE_RUN, _PLAIN_VALUE = fastre.compile(r"[A-Za-z0-9_\-]*"), fastre.compile(r"[^,\]}\n\r#]*")
        _STRING_RUN = fastre.compile(r'[^"\\\n]+')


def scan(text: str) -> Positions:
    _compile_patterns()
    scanner = _Scanner(text)
    try:
        scanner.document()
    except (_Stop, IndexError, RecursionError):
        pass
    return scanner.out


# Strings first (so a '#' inside one is not a comment), then comments. A
# multi-line string may end with up to two extra quotes: ``""""`` closes
# after one quote of content, hence the look-ahead. Compiled on first need.
_STRINGS_OR_COMMENT_PATTERN = (
    r'"""(?:\\.|[^\\])*?"""(?!")|\'\'\'.*?\'\'\'(?!\')|"(?:\\.|[^"\\\n])*"|\'[^\'\n]*\'|#[^\n]*'
)
_STRINGS_OR_COMMENT: list = []


def scan_comments(text: str) -> list:
    """``(line, col, text)`` of every comment, without the full key scan: a line at a time where no string
    can span lines, else by the strings-or-comment pattern (C-speed regex)."""
    if "#" not in text:
        return []
    quick = _line_comments(text)
    if quick is not None:
        return quick
    if not _STRINGS_OR_COMMENT:
        _STRINGS_OR_COMMENT.append(fastre.compile(_STRINGS_OR_COMMENT_PATTERN, fastre.S))
    return comments_by(_STRINGS_OR_COMMENT[0], text)


def _line_comments(text: str) -> list | None:
    """The pattern's comments, looking only at lines with a '#': None where a string could span lines (a
    triple quote, or a backslash ending a line that has a double quote), where that shortcut would not hold."""
    if '"""' in text or "'''" in text:
        return None
    slash = text.find("\\\n")
    while slash >= 0:  # a backslash ending a line carries a basic string on: where one could be open, not here
        if '"' in text[text.rfind("\n", 0, slash) + 1:slash]:
            return None
        slash = text.find("\\\n", slash + 2)
    # a line at a time from split(): a third cheaper than finding each '#' and its line's bounds in the whole
    # text (a first run on KempnerForge's configs, ~19 comments in ~80 lines each: ~1 M instructions less)
    out = []
    number = 0
    for line in lines_of(text):  # the reader's split of the same text, when it was the last one split
        number += 1
        if "#" not in line:
            continue
        at = line.find("#")
        before = line[:at]
        if '"' in before or "'" in before:
            at = _comment_in_line(line, 0, len(line))
            if at < 0:
                continue
        out.append((number, at + 1, line[at + 1:].rstrip("\r")))
    return out


def _comment_in_line(text: str, i: int, eol: int) -> int:
    """Where the pattern finds a comment in ``text[i:eol]`` (strings skipped; an unclosed quote is a plain
    character to it), or -1."""
    while True:
        found = [k for k in (text.find('"', i, eol), text.find("'", i, eol), text.find("#", i, eol)) if k >= 0]
        if not found:
            return -1
        k = min(found)
        c = text[k]
        if c == "#":
            return k
        if c == "'":
            close = text.find("'", k + 1, eol)
            i = k + 1 if close < 0 else close + 1
            continue
        j = k + 1
        while True:  # a basic string: a backslash takes the next character with it
            quote = text.find('"', j, eol)
            slash = text.find("\\", j, eol)
            if quote < 0:
                i = k + 1  # unclosed on its line: not a string to the pattern
                break
            if 0 <= slash < quote:
                j = slash + 2
                continue
            i = quote + 1
            break


def comments_by(pattern, text: str) -> list:
    """``(line, col, text after '#')`` of every match of ``pattern`` (strings or comments of a language)
    that is a comment: the strings are matched only to be skipped, line counts kept across them."""
    if "#" not in text:
        return []
    out = []
    line, line_start, pos = 1, 0, 0
    for match in pattern.finditer(text):
        start = match.start()
        newlines = text.count("\n", pos, start)
        if newlines:
            line += newlines
            line_start = text.rfind("\n", pos, start) + 1
        token = match.group()
        if token[0] == "#":
            out.append((line, start - line_start + 1, token[1:].rstrip("\r")))
        else:
            inner = token.count("\n")
            if inner:
                line += inner
                line_start = start + token.rfind("\n") + 1
        pos = match.end()
    return out


def quick_scan(text: str, comments: list | None = None) -> Positions | None:
    """``scan(text)``'s positions a line at a time, for a document tomllib accepted (without multi-line strings or
    carriage returns): a line of a plain key and a plain value or an array of plain values, or a header without
    quotes, is read from its text alone; any other statement (a quoted key, an inline table, an array of strings or
    tables, an array over several lines) by the full scan's own code from where it starts to where it ends
    (``_statement``). None for anything else (a quoted header): ``scan`` reads it. A config with findings needs its
    positions; this costs a tenth of the character scan. ``comments``: the text's ``scan_comments``, where the
    caller has them already. What a line says depends on its text alone (``_line_shape``, kept across documents:
    a project's configs repeat most of their lines); where it stands (its table, array-of-tables indices,
    duplicates) is worked out here."""
    if "\r" in text or '"""' in text or "'''" in text:
        return None
    out = Positions()
    keys, tables, duplicates = out.keys, out.tables, out.duplicates
    aot_index: dict = {}
    current: tuple = ()
    shapes = _SHAPES
    lines = lines_of(text)  # the reader's split of the same text, when it was the last one split
    numbered = enumerate(lines, 1)
    known = [1, 0]  # a line's number and the offset it starts at, the last one worked out (_statement)
    for number, raw in numbered:
        shape = shapes.get(raw, _MISS)
        if shape is _MISS:
            shape = _line_shape(raw)
            if len(shapes) < _SHAPES_MAX:
                shapes[raw] = shape
        if shape is None:
            continue
        if shape is _DECLINE:
            return None
        if shape is _STATEMENT:
            last = _statement(text, lines, number, known, current, out)
            if last is None:
                return None
            for _ in range(last - number):  # the lines the statement went on over are read
                next(numbered)
            continue
        kind, col, parts, extra = shape
        at = (number, col)
        if kind == "[":  # a header; extra: whether it opens an array of tables
            path: tuple = ()
            for part in parts[:-1]:  # scan's resolve(): through the latest element of arrays of tables
                path = path + (part,)
                if path in aot_index:
                    path = path + (aot_index[path],)
            path = path + (parts[-1],)
            if extra:
                index = aot_index.get(path, -1) + 1
                aot_index[path] = index
                tables.setdefault(path, at)
                path = path + (index,)
            tables.setdefault(path, at)
            current = path
            continue
        path = current + parts  # a key; extra: its array's elements, (index, column) each, or None
        if len(parts) > 1:
            for cut in range(len(current) + 1, len(path)):
                tables.setdefault(path[:cut], at)  # dotted keys define tables
        if path in keys:
            duplicates.append((path, keys[path], at))
        else:
            keys[path] = at
        if extra is not None:
            for index, element_col in extra:
                keys.setdefault(path + (index,), (number, element_col))
    out.comments = scan_comments(text) if comments is None else comments
    return out


def _statement(text: str, lines: list, number: int, known: list, current: tuple, out: Positions) -> int | None:
    """The key and value statement starting on line ``number`` (in the table ``current``) read into ``out`` by the
    full scan's own ``keyval``, from the line's start: the number of the line it ends on, or None where it does not
    read to the end of a line (the document goes to the full scan). ``known``: a line's number and offset, moved
    on here so that finding a line's offset costs the lines since the last statement, not the whole text."""
    _compile_patterns()
    seen, offset = known
    offset += sum(map(len, lines[seen - 1:number - 1])) + number - seen  # each line and its "\n"
    known[:] = number, offset
    scanner = _Scanner(text)
    scanner.out = out
    scanner.i = scanner.line_start = offset
    scanner.line = number
    try:
        scanner.skip_ws()
        scanner.keyval(current)
        scanner.skip_ws()
    except (_Stop, IndexError, RecursionError):
        return None
    if scanner.i < scanner.n and text[scanner.i] not in "#\n":
        return None  # more on the line than one statement: not valid TOML, nothing to mirror
    known[:] = scanner.line, scanner.line_start
    return scanner.line


_MISS = object()
_DECLINE = object()  # a line quick_scan does not read: the document goes to the full scan
_STATEMENT = object()  # a key line whose statement the full scan's code reads where it stands (_statement)
_SHAPES: dict = {}   # a line's text -> _line_shape's answer, across documents (bounded)
_SHAPES_MAX = 8192


def _line_shape(raw: str):
    """What one line says, from its text alone: None (blank or a comment), _DECLINE, or (kind, column, key parts,
    extra): a header ``("[", column, parts, opens an array of tables)`` or a key ``("=", column, parts, the columns
    of its inline array's elements or None)``."""
    line = raw.lstrip(" \t")
    if not line or line[0] == "#":
        return None
    col = len(raw) - len(line) + 1
    if line[0] == "[":
        is_array = line.startswith("[[")
        close = line.find("]")
        inner = line[2 if is_array else 1:close]
        if close < 0 or '"' in inner or "'" in inner:
            return _DECLINE
        return ("[", col, tuple(p.strip(" \t") for p in inner.split(".")), is_array)
    key, eq, value = line.partition("=")
    if not eq:
        return _DECLINE
    if '"' in key or "'" in key:
        return _STATEMENT  # a quoted key
    if "." in key:
        parts = tuple(p.strip(" \t") for p in key.split("."))
    else:  # the usual plain key
        parts = (key.strip(" \t"),)
    stripped = value.lstrip(" \t")
    if stripped[:1] == "{":
        return _STATEMENT  # an inline table: its keys and their positions are the full scan's to find
    elements = None
    if stripped[:1] == "[":
        close = stripped.find("]")
        inner = stripped[1:close]
        if close < 0 or any(c in inner for c in "[{\"'#"):
            return _STATEMENT  # an array over lines, or of strings, arrays or tables
        element_col = col + len(key) + 1 + len(value) - len(stripped) + 1  # the first element's column
        elements = []
        for index, element in enumerate(inner.split(",")):
            blank = len(element) - len(element.lstrip(" \t"))
            if element.strip(" \t"):
                elements.append((index, element_col + blank))
            elif index < inner.count(","):
                return _DECLINE  # an empty element before a comma: not valid TOML, nothing to mirror
            element_col += len(element) + 1
        elements = tuple(elements)
    return ("=", col, parts, elements)
