"""Reading a config file: bytes -> text -> TOML table, with positions and comments.

Every way a file can be unusable becomes an ``InputError`` with a message
that names the problem and, where there is one, the line and column.
"""

from __future__ import annotations

import os
import re
import sys
from functools import cached_property

from meshlint.errors import InputError
from meshlint.tomlpos import Positions, scan, scan_comments

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on Python 3.10
    import tomli as tomllib

MAX_BYTES = 16 * 1024 * 1024
_TOML_AT = re.compile(r"\(at line (\d+), column (\d+)\)")


class Source:
    """One parsed config file."""

    def __init__(self, path: str, text: str, data: dict, name: str = ""):
        self.path = path    # as given on the command line (display form)
        self.text = text
        self.data = data
        self.name = name    # file name, for the _<N>gpu convention

    @cached_property
    def positions(self) -> Positions:
        return scan(self.text)

    @cached_property
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
        if isinstance(key, str) and key.startswith("#L") and key[2:].isdigit():
            return (int(key[2:]), 1)  # a rule pointing at a line, not a key
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


def split_key(key: str) -> tuple:
    """``mesh.dims[1].size`` -> ``("mesh", "dims", 1, "size")``."""
    out: list = []
    for part in key.split("."):
        while "[" in part and part.endswith("]"):
            head, _, rest = part.partition("[")
            if head:
                out.append(head)
            index, _, part = rest.partition("]")
            out.append(int(index) if index.lstrip("-").isdigit() else index)
            part = part
            if not part:
                break
        if part:
            out.append(part)
    return tuple(out)


def read_source(path: str) -> Source:
    """Read and parse ``path``; raises InputError when it cannot be checked."""
    try:
        if os.path.isdir(path):
            raise InputError("ML001", "is a directory, not a config file")
        size = os.stat(path).st_size
        if size > MAX_BYTES:
            raise InputError("ML001", f"file is {size:,} bytes; a training config is far smaller (limit {MAX_BYTES:,})")
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        raise InputError("ML001", "no such file") from None
    except PermissionError:
        raise InputError("ML001", "permission denied") from None
    except OSError as exc:
        raise InputError("ML001", f"cannot read: {exc.strerror or exc}") from None
    return parse_source(path, raw)


def parse_source(path: str, raw: bytes, name: str | None = None) -> Source:
    text = decode(raw)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise _toml_error(text, str(exc)) from None
    return Source(path=path, text=text, data=data, name=name or os.path.basename(path))


def _toml_error(text: str, message: str) -> InputError:
    line, col = text.count("\n") + 1, 1  # "(at end of document)"
    match = _TOML_AT.search(message)
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
