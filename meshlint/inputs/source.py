"""Reading a config file: bytes -> text -> TOML table, with positions and comments.

Every way a file can be unusable becomes an ``InputError`` with a message
that names the problem and, where there is one, the line and column.
"""

from __future__ import annotations

import os
import stat

from meshlint.errors import InputError
from meshlint.fileread import read_upto
from meshlint.keys import small_int as _small_int
from meshlint.keys import split_key  # noqa: F401 - read from here by the readers too
from meshlint.limits import MAX_FILE_BYTES, MAX_INT_DIGITS, MAX_KEYS, MAX_LINE_CHARS, MAX_NESTING
from meshlint import tomlfast
from meshlint.inputs.tomlpos import Positions, quick_scan, scan, scan_comments

MAX_BYTES = MAX_FILE_BYTES  # the old name, for callers that read it
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_NOCTTY = getattr(os, "O_NOCTTY", 0)
_TOML_AT = r"\(at line (\d+), column (\d+)\)"  # in tomllib's messages (an error path: re compiles it there)


class _cached:
    """``functools.cached_property`` without importing functools (with collections, ~10 M instructions a first
    run): computed on first read and kept in the instance, which later reads find first; assignable."""

    def __init__(self, fn):
        self.fn, self.name, self.__doc__ = fn, fn.__name__, fn.__doc__

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.fn(obj)
        return value


class Source:
    """One parsed config file."""

    def __init__(self, path: str, text: str, data: dict, name: str = ""):
        self.path = path    # as given on the command line (display form)
        self.text = text
        self.data = data
        self.name = name    # file name, for the _<N>gpu convention

    @_cached
    def positions(self) -> Positions:
        # the comments are read anyway (topology hints, directives): the key scan shares them
        return quick_scan(self.text, self.comments) or scan(self.text)

    @_cached
    def comments(self) -> list:
        # every file needs its comments (directives, topology hints); only files
        # with findings need the full key scan behind ``positions``
        return scan_comments(self.text)

    def locate(self, key: str | tuple | None) -> tuple[int, int]:
        """Line and column for a dotted key path (``distributed.tp``, ``mesh.dims[1].size``).

        ``a.b|c.d`` names alternatives: the first one written in the file wins
        (a defaulted ``train.grad_accum_steps`` points at ``distributed.pp``
        rather than a bare section header); none written falls back to the first.
        """
        if not key:
            return (1, 1)
        if isinstance(key, str) and key.startswith("#L"):
            line, _, col = key[2:].partition(":")
            if _small_int(line):  # a rule pointing at a line (#L<line>) or a word in it (#L<line>:<col>), not a key
                return (int(line), int(col) if _small_int(col) else 1)
        if isinstance(key, str) and "|" in key:
            options = [k.strip() for k in key.split("|") if k.strip()]
            key = next((k for k in options if self.has_key(k)), options[0] if options else "")
            if not key:
                return (1, 1)
        path = split_key(key) if isinstance(key, str) else key
        (line, col), _ = self.positions.locate(path)
        return line, col

    def has_key(self, key: str) -> bool:
        return self.positions.locate(split_key(key))[1]


def read_source(path: str) -> Source:
    """Read and parse ``path``; raises InputError when it cannot be checked."""
    return parse_source(path, read_bytes(path))


_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _not_regular(mode: int) -> str:
    return next((what for test, what in _KINDS if test(mode)), "not a regular file")


def read_bytes(path: str, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes, or an InputError saying why not.

    A FIFO, device or socket is refused from ``os.stat`` before it is opened
    (opening a FIFO for reading blocks until a writer comes; ``/dev/zero``
    never ends), and the open itself is non-blocking and re-checked, in case
    the path was swapped in between. At most ``limit + 1`` bytes are read, so
    a file that grows while it is read is refused too.
    """
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise InputError("ML001", "is a directory, not a config file")
        if not stat.S_ISREG(st.st_mode):
            raise InputError("ML001", f"is {_not_regular(st.st_mode)}, not a regular file: refused unread")
        if st.st_size > limit:
            raise _too_large(st.st_size, limit)
        fd = os.open(path, os.O_RDONLY | _O_NONBLOCK | _O_NOCTTY)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise InputError("ML001", f"is {_not_regular(st.st_mode)}, not a regular file: refused unread")
            raw = read_upto(fd, limit, st.st_size)
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise InputError("ML001", "no such file") from None
    except PermissionError:
        raise InputError("ML001", "permission denied") from None
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise InputError("ML001", f"cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    if len(raw) > limit:
        raise _too_large(len(raw), limit, grew=True)
    return raw


def _too_large(size: int, limit: int, grew: bool = False) -> InputError:
    what = "grew past" if grew else f"is {size:,} bytes, over"
    return InputError("ML007", f"file {what} the limit of {limit:,} bytes (a training config is a few KiB)",
                      help="meshlint's input limits are listed in the README (meshlint/limits.py)")


def parse_source(path: str, raw: bytes, name: str | None = None) -> Source:
    text = decode(raw)
    return Source(path=path, text=text, data=parse_toml(text), name=name or os.path.basename(path))


def parse_toml(text: str) -> dict:
    """TOML text -> table, every limit checked first; InputError (with the line) when it cannot be."""
    if len(text) > MAX_FILE_BYTES:  # characters <= bytes: only then can the UTF-8 be over the limit
        raise _too_large(len(text.encode("utf-8", "surrogatepass")), MAX_FILE_BYTES)
    check_text_limits(text)
    data = tomlfast.loads(text)  # exactly tomllib's table, or None: then tomllib reads it (and words any error)
    if data is None:
        data = _tomllib_loads(text)
    check_data_limits(text, data)
    return data


def _tomllib_loads(text: str) -> dict:
    tomllib = tomlfast.tomllib_module()
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _toml_error(text, str(exc)) from None
    except (ValueError, RecursionError, MemoryError) as exc:  # the limits above should make these unreachable
        raise InputError("ML003", f"invalid TOML: {type(exc).__name__}: {str(exc)[:200]}") from None


def load_toml_file(path: str) -> dict:
    """Any TOML file meshlint reads besides configs (rule files, model tables, meshlint.toml), under the
    same limits: a regular file, size, UTF-8, nesting, number length, keys. Raises InputError."""
    return parse_toml(decode(read_bytes(path)))


# ------------------------------------------------------------------------------------------ limits

_HELP = "meshlint's input limits are listed in the README (meshlint/limits.py)"
# Strings and comments first (so nothing inside them counts), then brackets, then a number
# literal longer than the digit limit (starting at a token boundary: not inside a bare key).
_STRUCTURE_PATTERN = (
    r'"""(?:\\.|[^\\])*?"""(?!")|\'\'\'.*?\'\'\'(?!\')|"(?:\\.|[^"\\\n])*"|\'[^\'\n]*\'|#[^\n]*'
    r"|[\[\]{}]"
    r"|(?<![A-Za-z0-9_\-.])[+-]?[0-9][0-9A-Za-z_]{%d,}" % MAX_INT_DIGITS
)
_STRUCTURE: list = []  # compiled on first need (~0.4 ms): a typical config never needs the full scan
_LONG_NUMBER = r"[0-9][0-9A-Za-z_]{%d,}" % MAX_INT_DIGITS  # searched only where a word is that long


def _line_over(text: str, limit: int) -> bool:
    """Whether a line of ``text`` (split at "\\n") is longer than ``limit``: each step looks for the last line
    break within the next ``limit + 1`` characters, a few C-speed searches for a config, where splitting the text
    into its lines cost ~25 K instructions a config."""
    pos, end = 0, len(text)
    while end - pos > limit:
        newline = text.rfind("\n", pos, pos + limit + 1)
        if newline < 0:
            return True  # limit + 1 characters of one line
        pos = newline + 1
    return False


def _long_number(text: str) -> bool:
    """Whether ``text`` has a number literal over the digit limit: such a run has no blank in it, so only a text
    with a word that long is searched (compiling the pattern costs a run ~1 M instructions). A word is never longer
    than its line (every line break is a blank to ``split()``): lines first, a fifth of the cost of the words."""
    if len(text) <= MAX_INT_DIGITS or not _line_over(text, MAX_INT_DIGITS):
        return False
    if max(map(len, text.split()), default=0) <= MAX_INT_DIGITS:
        return False
    import re  # only here: a first run's ~25 M instructions of re, enum and functools are paid only when asked

    return re.search(_LONG_NUMBER, text) is not None


def check_text_limits(text: str) -> None:
    """Line length, nesting depth and number length, from the text alone, before any parsing.

    tomllib (and meshlint's own key scanner) recurse once per nesting level and
    hit Python's recursion limit a few hundred levels down; Python refuses to
    convert integers of more than 4,300 digits. Each check is a C-speed count
    or search that skips the scan when it cannot find anything.
    """
    if len(text) > MAX_LINE_CHARS:
        lines = text.split("\n")
        if max(map(len, lines)) > MAX_LINE_CHARS:
            line = next(i for i, s in enumerate(lines, 1) if len(s) > MAX_LINE_CHARS)
            raise InputError("ML007", f"line {line} has {len(lines[line - 1]):,} characters; the limit is "
                                      f"{MAX_LINE_CHARS:,}", line, MAX_LINE_CHARS + 1, help=_HELP)
    if text.count(".") > MAX_NESTING:
        _check_dotted_keys(text)
    if text.count("[") + text.count("{") <= MAX_NESTING and not _long_number(text):
        return
    if not _STRUCTURE:
        import re

        _STRUCTURE.append(re.compile(_STRUCTURE_PATTERN, re.S))
    depth = 0
    for match in _STRUCTURE[0].finditer(text):
        token = match.group()
        c = token[0]
        if c in "[{":
            depth += 1
            if depth > MAX_NESTING:
                line, col = _line_col(text, match.start())
                raise InputError("ML007", f"arrays or inline tables nested more than {MAX_NESTING} deep",
                                 line, col, help=_HELP)
        elif c in "]}":
            depth = max(0, depth - 1)
        elif c not in "#\"'":
            digits = sum(ch.isdigit() for ch in token)
            line, col = _line_col(text, match.start())
            raise InputError("ML007", f"a number of {digits:,} digits; the limit is {MAX_INT_DIGITS:,} "
                                      "(TOML integers are 64-bit)", line, col, help=_HELP)


# One key segment (bare or quoted), and a chain of more of them than the nesting limit allows, in a key's place:
# at the start of a line, after a table header's [ or [[, or after an inline table's { or ,
_SEGMENT = r"""(?:[A-Za-z0-9_-]+|"(?:[^"\\\n]|\\.)*"|'[^'\n]*')"""
_DEEP_KEY = r"(?:^|[\[{,])[ \t]*(%s(?:[ \t]*\.[ \t]*%s){%d,})" % (_SEGMENT, _SEGMENT, MAX_NESTING)


def _check_dotted_keys(text: str) -> None:
    """A dotted key of more segments than the nesting limit, refused before tomllib sees it: tomllib builds a
    table per segment and re-walks the path for each, so one 21 KB key of 10,000 segments cost it seconds and
    hundreds of MB before the depth could be checked on the parsed table. Only lines with that many dots are
    looked at (a C-speed count each)."""
    offset = 0
    for line in text.split("\n"):
        if line.count(".") >= MAX_NESTING:
            import re  # only for a line that may be such a key

            match = re.search(_DEEP_KEY, line)
            if match is not None and not _inside_string(text, offset + match.start(1)):
                segments = len(re.findall(_SEGMENT, match.group(1)))
                raise InputError("ML007", f"tables nested more than {MAX_NESTING} deep (dotted keys): a key of "
                                          f"{segments:,} segments", text.count("\n", 0, offset) + 1,
                                 match.start(1) + 1, help=_HELP)
        offset += len(line) + 1


def _inside_string(text: str, pos: int) -> bool:
    """Whether ``pos`` lies in a multi-line string or a comment (only asked when a line looks like a deep key)."""
    if '"""' not in text[:pos] and "'''" not in text[:pos] and "#" not in text[:pos]:
        return False
    if not _STRUCTURE:
        import re

        _STRUCTURE.append(re.compile(_STRUCTURE_PATTERN, re.S))
    for match in _STRUCTURE[0].finditer(text):
        if match.start() > pos:
            break
        if pos < match.end() and match.group()[0] in "#\"'":
            return True
    return False


def check_data_limits(text: str, data: dict) -> None:
    """Number of keys, and nesting that dotted keys make (``a.b.c = 1``), on the parsed table.

    The walk runs only when the text could hold that many: each key or item
    needs an ``=``, ``,``, ``[`` or ``.`` in the text.
    """
    dots = text.count(".")
    if dots < MAX_NESTING and (len(text) <= MAX_KEYS  # then so are its =, ",", [ and . together
                               or text.count("=") + text.count(",") + text.count("[") + dots <= MAX_KEYS):
        return
    count, stack = 0, [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_NESTING:
            line = _most_dots(text)
            raise InputError("ML007", f"tables nested more than {MAX_NESTING} deep (dotted keys)", line, 1,
                             help=_HELP)
        items = node.values() if isinstance(node, dict) else node
        count += len(node)
        if count > MAX_KEYS:
            raise InputError("ML007", f"more than {MAX_KEYS:,} keys and array items; the limit is {MAX_KEYS:,}",
                             help=_HELP)
        stack.extend((v, depth + 1) for v in items if isinstance(v, (dict, list)))


def _line_col(text: str, pos: int) -> tuple[int, int]:
    return text.count("\n", 0, pos) + 1, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _most_dots(text: str) -> int:
    lines = text.split("\n")
    return max(range(len(lines)), key=lambda i: lines[i].count(".")) + 1


def _toml_error(text: str, message: str) -> InputError:
    import re  # an error path

    line, col = text.count("\n") + 1, 1  # "(at end of document)"
    match = re.search(_TOML_AT, message)
    if match:
        line, col = int(match.group(1)), int(match.group(2))
    message = re.sub(r"\s*\(at [^)]*\)$", "", message)
    if message.startswith("Cannot overwrite a value"):
        # tomllib reports a duplicate key at the end of the document; find it.
        duplicates = scan(text).duplicates
        if duplicates:
            path, (line1, _), (line, col) = duplicates[0]
            dotted = ".".join(str(p) for p in path)
            return InputError("ML003", f"invalid TOML: duplicate key '{dotted}' (first defined on line {line1})",
                              line, col, help="keep one definition of the key")
    if message.startswith("Cannot declare"):
        return InputError("ML003", f"invalid TOML: {message}", line, col,
                          help="a table is defined twice; merge the two definitions")
    return InputError("ML003", f"invalid TOML: {message}", line, col)


def decode(raw: bytes) -> str:
    if raw.startswith(b"\xef\xbb\xbf"):
        raise InputError(
            "ML002",
            "file starts with a UTF-8 byte-order mark, which tomllib (and so KempnerForge and torchtitan) rejects",
            help="save the file as UTF-8 without BOM",
        )
    nul = raw.find(b"\x00")
    if nul >= 0:
        line = raw.count(b"\n", 0, nul) + 1
        raise InputError("ML002", f"binary file (NUL byte at offset {nul})", line, 1)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        byte = raw[exc.start : exc.start + 1].hex()
        raise InputError("ML002", f"not UTF-8 text (invalid byte 0x{byte} at offset {exc.start})", line, col,
                         help="TOML files must be UTF-8; re-save the file as UTF-8") from None
