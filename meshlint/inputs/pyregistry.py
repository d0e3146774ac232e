"""Read torchtitan's Python config registries statically (``ast`` only) into ``PySource`` objects.

A torchtitan run today is a zero-argument function in a ``config_registry.py``
returning ``Trainer.Config``. This module never imports or runs that code: a small
abstract interpreter walks each function's body (literals, literal arithmetic,
locals, ``X.Config(...)`` constructors, attribute assignment, derivation from other
config functions of the same checkout, ``dataclasses.replace``, simple helpers,
``model_registry("70B")``) and records what it sets and where. Whatever it cannot
follow (reflection, unknown calls, loops over unknown values, conditions on
unknowns) becomes an ``Unknown`` with a reason and a position for exactly the
values it affects. Every exception is caught per function: no input gives a
traceback. Time is linear in what is read: derivations are evaluated once per
read and copied, and step budgets bound each function and each file.

What a config is, as torchtitan builds it (torchtitan/config/manager.py at b5bcd76c6):
``--config F`` calls ``F()`` with no arguments, then ``tyro.cli(default=...)``
constructs the result again, so the returned class's ``__post_init__`` sees the
final values; the reader runs it for RL's ``Controller.Config`` (which writes the
trainer's token counts) and for classes defined in the registry file. ``model_spec =
model_registry("70B", attn_backend=...)`` becomes ``data["model"] = {"name": <the
package under torchtitan/models/ or experiments/>, "flavor": "70B", "attn_backend": ...}``.
RL configs (``Controller.Config(trainer=...)``) are read at the trainer level
(``nested_under = "trainer"``). Comments are found with a regex scanner (tokenize
costs ~40x more; the tests check both agree on every real registry).
"""

from __future__ import annotations

import ast
import math
import os
import re
import sys

from meshlint.errors import InputError
from meshlint.inputs.pysource import PySource, Unknown
from meshlint.inputs.source import read_bytes

MAX_BYTES = 16 * 1024 * 1024        # same file-size limit as TOML sources
MAX_INT = 10 ** 18                  # larger integers are not a training config; they become Unknown
MAX_SEQ = 100_000                   # longest string built by arithmetic
MAX_ITEMS = 10_000                  # longest list / tuple / dict (every derivation copies them)
MAX_STEPS = 20_000                  # statements + expressions evaluated per config function (HEAD: <500)
BUDGET_BASE = 50_000                # ... and per file: time stays linear in the file's size
BUDGET_PER_BYTE = 4                 # (HEAD's registries use at most 0.5 step per byte)
MAX_CALL_DEPTH = 16                 # helper / derivation nesting
MAX_UNROLL = 256                    # iterations of a loop over a known sequence
MAX_VALUE_DEPTH = 40                # nesting of values copied or flattened
MAX_HELPER_MODULE_BYTES = 256 * 1024  # other modules of the checkout parsed to follow a helper
MAX_HELPER_BYTES_TOTAL = 2 * 1024 * 1024

_REFLECTION = {"getattr", "setattr", "delattr", "hasattr", "vars", "type", "globals", "locals",
               "eval", "exec", "compile", "__import__", "super", "dataclasses.fields",
               "dataclasses.asdict", "dataclasses.astuple", "fields", "asdict", "importlib.import_module",
               "operator.attrgetter", "copy.replace"}
_MUTATING = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "add",
             "discard", "sort", "reverse", "popitem", "__setitem__", "__setattr__", "__delitem__"}
_TRANSPARENT_DECORATORS = {"functools.cache", "functools.lru_cache", "cache", "lru_cache", "functools.wraps"}


# -----------------------------------------------------------------------------
# Values of the abstract interpreter
# -----------------------------------------------------------------------------
class U:
    """An unknown value (internal form of ``Unknown``)."""

    __slots__ = ("reason", "line", "col", "file", "noted")

    def __init__(self, reason: str, line: int, col: int, file: str, noted: bool = False):
        self.reason, self.line, self.col, self.file = reason, line, col, file
        self.noted = noted      # the reason already says where it arose

    def public(self) -> Unknown:
        return Unknown(self.reason, self.line, self.col, self.file)

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"U({self.reason!r} @{self.line}:{self.col})"


class SpecPart(U):
    """``<model spec>.model`` or ``<model spec>.model.layers``: unknown like any model-spec internal, except
    that ``len()`` of the layers is the flavor's layer count (``LayerCount``)."""

    __slots__ = ("name", "flavor", "part")

    def __init__(self, reason: str, line: int, col: int, file: str, name, flavor, part: str):
        super().__init__(reason, line, col, file)
        self.name, self.flavor, self.part = name, flavor, part


class LayerCount(U):
    """``len(<model spec>.model.layers)``: the number of layers of model ``name``'s flavor ``flavor``. Unknown to
    everything but ``nvfp4_bf16_tail_fqns`` (its count comes from meshlint's model table, by the dialect)."""

    __slots__ = ("name", "flavor")

    def __init__(self, reason: str, line: int, col: int, file: str, name: str, flavor: str):
        super().__init__(reason, line, col, file)
        self.name, self.flavor = name, flavor


class TailFqns(U):
    """``nvfp4_bf16_tail_fqns(num_layers, bf16_tail_fraction)`` (torchtitan/components/quantization/nvfp4.py):
    the list it returns, or the ValueError it raises, is decided by rules (ML915, ML916) from ``call``:
    {function, num_layers (int, or None with layers_of {name, flavor}), bf16_tail_fraction, line, col}.
    Unknown to everything else."""

    __slots__ = ("call",)

    def __init__(self, reason: str, line: int, col: int, file: str, call: dict):
        super().__init__(reason, line, col, file)
        self.call = call


TAIL_FQNS = "torchtitan.components.quantization.nvfp4.nvfp4_bf16_tail_fqns"


class Obj:
    """An instance of a config dataclass: the fields set explicitly, and what the rest is.

    ``rest`` None: every field not listed is the class default. ``rest`` a U: the
    fields not listed are unknown (positional arguments, ``**unknown``, an unknown
    object written into).
    """

    __slots__ = ("cls", "ref", "fields", "pos", "rest", "kind", "module", "ref_mod")

    def __init__(self, cls: str | None, ref=None, rest: U | None = None, kind: str | None = None,
                 ref_mod=None):
        self.cls = cls          # class as written: "Trainer.Config"
        self.ref = ref          # the callee value, to decide the kind lazily
        self.ref_mod = ref_mod  # the module the constructor was written in
        self.fields: dict = {}
        self.pos: dict = {}
        self.rest = rest
        self.kind = kind        # "model" for model_registry(...); trainer/controller decided lazily
        self.module = None      # model objects: the dotted package of model_registry


class FuncRef:
    __slots__ = ("mod", "node", "closure")

    def __init__(self, mod, node, closure=None):
        self.mod, self.node, self.closure = mod, node, closure


class ClassRef:
    __slots__ = ("mod", "node", "display")

    def __init__(self, mod, node, display: str):
        self.mod, self.node, self.display = mod, node, display


class Sym:
    """A name imported from a module, resolved only when needed (lazy: parsing costs time)."""

    __slots__ = ("parts", "modlen", "orig")

    def __init__(self, parts: tuple, modlen: int, orig: str):
        self.parts = parts      # full dotted path ("torchtitan", "trainer", "Trainer", "Config")
        self.modlen = modlen    # how many leading parts name the module it was imported from
        self.orig = orig        # display as written in the file: "Trainer.Config"

    @property
    def dotted(self) -> str:
        return ".".join(self.parts)

    def attr(self, name: str) -> Sym:
        return Sym(self.parts + (name,), self.modlen, f"{self.orig}.{name}")


class ModuleVal:
    __slots__ = ("mod",)

    def __init__(self, mod):
        self.mod = mod


class Builtin:
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name


class Method:
    __slots__ = ("recv", "name", "recv_node")

    def __init__(self, recv, name: str, recv_node):
        self.recv, self.name, self.recv_node = recv, name, recv_node


_LITERAL = (bool, int, float, complex, str, bytes, type(None))
_LITERAL_TYPES = frozenset(_LITERAL)
_BUILTINS = {"len", "min", "max", "abs", "int", "float", "str", "bool", "list", "tuple", "dict", "set",
             "frozenset", "sorted", "sum", "range", "round", "isinstance", "issubclass", "print", "any",
             "all", "zip", "enumerate", "reversed", "repr", "divmod", "pow", "callable", "ValueError",
             "TypeError", "KeyError", "RuntimeError", "AssertionError", "NotImplementedError", "Exception",
             "None", "True", "False", "map", "filter", "iter", "next", "id", "hash", "format", "open", "input",
             "getattr", "setattr", "delattr", "hasattr", "vars", "type", "globals", "locals", "eval", "exec",
             "compile", "__import__", "super", "object", "property", "staticmethod", "classmethod"}


class _Return(Exception):
    def __init__(self, value):
        self.value = value


class _Raise(Exception):
    """The function raises here at run time (unconditionally, as far as it is followed)."""

    def __init__(self, unknown: U):
        self.unknown = unknown


class _Limit(Exception):
    """A documented bound was hit (steps, depth); the function becomes unknown."""


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


# -----------------------------------------------------------------------------
# Source text: decoding, comments, positions
# -----------------------------------------------------------------------------
_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
_PY_STRING_OR_COMMENT = re.compile(
    r'"""(?:[^"\\]|\\.|"(?!""))*"""'
    r"|'''(?:[^'\\]|\\.|'(?!''))*'''"
    r'|"(?:[^"\\\n]|\\.)*"'
    r"|'(?:[^'\\\n]|\\.)*'"
    r"|#[^\r\n]*",
    re.S,
)


def decode_python(raw: bytes) -> str:
    """Bytes of a .py file -> text, as Python reads it (PEP 263 cookie, UTF-8 BOM)."""
    nul = raw.find(b"\x00")
    if nul >= 0:
        raise InputError("ML002", f"binary file (NUL byte at offset {nul})", raw.count(b"\n", 0, nul) + 1, 1)
    encoding = "utf-8"
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    else:
        for line in raw.split(b"\n", 2)[:2]:
            match = _CODING.match(line)
            if match:
                encoding = match.group(1).decode("ascii", "replace")
                break
            if line.strip() and not line.lstrip().startswith(b"#"):
                break
    try:
        return raw.decode(encoding)
    except LookupError:
        raise InputError("ML002", f"unknown source encoding {encoding!r} declared in the coding comment",
                         help="declare a codec Python knows (utf-8) or remove the coding comment") from None
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        byte = raw[exc.start: exc.start + 1].hex()
        raise InputError("ML002", f"not valid {encoding} text (invalid byte 0x{byte} at offset {exc.start})",
                         line, col, help="Python source is UTF-8 unless a coding comment says otherwise") from None


def scan_py_comments(text: str) -> list:
    """``(line, col, text after '#')`` of every comment (C-speed regex; tokenize is ~40x slower).

    Only used on text ``ast.parse`` accepted, so strings and comments are well formed.
    """
    if "#" not in text:
        return []
    out = []
    line, line_start, pos = 1, 0, 0
    for match in _PY_STRING_OR_COMMENT.finditer(text):
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


# -----------------------------------------------------------------------------
# Modules of a checkout
# -----------------------------------------------------------------------------
class Module:
    """One .py file of the checkout (or the file being read).

    The file being read is parsed whole. A module of the checkout that is only
    consulted (a helper, a constant, another registry) is indexed by its top-level
    statements and each statement is parsed when first needed: parsing whole
    helper modules would cost more than reading the registries themselves.
    """

    __slots__ = ("path", "rel", "dotted", "is_pkg", "text", "tree", "_lines", "_ascii", "_bindings", "_segments",
                 "_starts")

    def __init__(self, path: str, rel: str, dotted: str, is_pkg: bool, text: str, tree: ast.Module | None):
        self.path, self.rel, self.dotted, self.is_pkg = path, rel, dotted, is_pkg
        self.text, self.tree = text, tree
        self._lines = None
        self._ascii = text.isascii()
        self._bindings = None
        self._segments = None
        self._starts = None

    @property
    def package(self) -> str:
        if self.is_pkg:
            return self.dotted
        return self.dotted.rpartition(".")[0]

    def pos(self, node) -> tuple[int, int]:
        """1-based (line, character column) of an ast node (ast columns are UTF-8 byte offsets)."""
        line = getattr(node, "lineno", 1) or 1
        col = getattr(node, "col_offset", 0) or 0
        if self._ascii:
            return (line, col + 1)
        if self._lines is None:
            self._lines = self.text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        if 0 < line <= len(self._lines):
            text = self._lines[line - 1]
            if not text.isascii():
                col = len(text.encode("utf-8")[:col].decode("utf-8", "ignore"))
        return (line, col + 1)

    def line_slice(self, first: int, last: int) -> str:
        """Text of lines ``first``..``last`` (1-based, inclusive)."""
        starts = self._line_starts()
        a = starts[first - 1] if 0 < first <= len(starts) else 0
        b = starts[last] if 0 < last < len(starts) else len(self.text)
        return self.text[a:b]

    def _line_starts(self) -> list:
        if self._starts is None:
            self._starts = [0] + [m.end() for m in re.finditer("\n", self.text)]
        return self._starts

    def bindings(self) -> dict:
        """Module-level name -> how it is bound (the last unconditional binding wins)."""
        if self._bindings is not None:
            return self._bindings
        out: dict = {}
        if self.tree is not None:
            for stmt in self.tree.body:
                _bind_stmt(out, stmt)
        else:
            for index, (start, end, line) in enumerate(self.segments()):  # noqa: B007
                head = _SEG_HEAD.match(self.text, start, end)
                word = head.group(1) if head else ""
                if word in ("def", "class", "async"):
                    name = _SEG_NAME.match(self.text, head.end(), end)
                    if name:
                        out[name.group(1)] = ("seg", index)
                elif word in ("import", "from") and _bind_import_text(out, self.text[start:end]):
                    pass   # plain imports are read without parsing
                elif word in ("import", "from", "if", "try", "for", "while", "with", "match"):
                    tree = self._parse_segment(index)
                    if tree is None:
                        return self._full()
                    for stmt in tree.body:
                        _bind_stmt(out, stmt)
                elif word == "@":
                    name = _SEG_DECORATED.search(self.text, start, end)
                    if name:
                        out[name.group(1)] = ("seg", index)
                elif head and head.group(2):
                    for name in _SEG_TARGETS.findall(head.group(2)):
                        out[name] = ("seg", index)
                else:
                    aug = _SEG_AUG.match(self.text, start, end)
                    if aug:
                        out[aug.group(1)] = ("unknown", f"changed by augmented assignment at line {line}")
        self._bindings = out
        return out

    def binding(self, name: str):
        """The binding of ``name``, parsing its statement on first use."""
        got = self.bindings().get(name)
        if got is None or got[0] != "seg":
            return got
        tree = self._parse_segment(got[1])
        if tree is None:
            return self._full().get(name)
        for stmt in tree.body:
            _bind_stmt(self._bindings, stmt)
        got = self._bindings.get(name)
        if got is not None and got[0] == "seg":   # the statement did not bind it after all
            del self._bindings[name]
            return None
        return got

    def segments(self) -> list:
        """(start, end, first line) of every top-level statement, decorators kept with their def."""
        if self._segments is None:
            text = self.text
            starts = [m.start() for m in _SEG_START.finditer(text) if m.start() < len(text)]
            segs = []
            line, prev = 1, 0
            for i, start in enumerate(starts):
                line += text.count("\n", prev, start)
                prev = start
                end = starts[i + 1] if i + 1 < len(starts) else len(text)
                if segs and text.startswith("@", segs[-1][0]) and not _SEG_DECORATED.search(
                        text, segs[-1][0], segs[-1][1]):
                    segs[-1] = (segs[-1][0], end, segs[-1][2])   # decorator lines join the def below
                else:
                    segs.append((start, end, line))
            self._segments = segs
        return self._segments

    def _parse_segment(self, index: int):
        start, end, line = self.segments()[index]
        try:
            # blank lines in front keep the real line numbers (cheaper than increment_lineno)
            return ast.parse("\n" * (line - 1) + self.text[start:end])
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None    # a statement boundary guessed wrong: fall back to the whole file

    def _full(self) -> dict:
        try:
            self.tree = ast.parse(self.text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            self.tree = ast.Module(body=[], type_ignores=[])
        self._bindings = None
        return self.bindings()


# a top-level statement starts at column 0 with anything but a comment, a closing bracket or
# the continuation of a compound statement; a guess inside a string or bracket makes its
# statement unparsable, and the module is then parsed whole
_SEG_START = re.compile(r"^(?![ \t\f\r\n#)\]}]|(?:else|elif|except|finally)\b)", re.M)
_SEG_HEAD = re.compile(r"(async|def|class|import|from|if|try|for|while|with|match|@)\b|"
                       r"((?:[A-Za-z_]\w*\s*,\s*)*[A-Za-z_]\w*)\s*(?::[^=\n]*)?=(?!=)")
_SEG_NAME = re.compile(r"\s+(?:def\s+)?([A-Za-z_]\w*)")
_SEG_DECORATED = re.compile(r"^(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", re.M)
_SEG_AUG = re.compile(r"([A-Za-z_]\w*)\s*(?:\*\*|//|>>|<<|[-+*/%&|^@])=")
_SEG_TARGETS = re.compile(r"[A-Za-z_]\w*")


class _ImportFrom:
    """What a ``from X import y`` binding needs of its statement (read without ast)."""

    __slots__ = ("module", "level", "lineno", "col_offset")

    def __init__(self, module, level: int):
        self.module, self.level, self.lineno, self.col_offset = module, level, 1, 0


_IMPORT_FROM = re.compile(r"from\s+(\.*)\s*([A-Za-z_][\w.]*)?\s+import\s+(?:\(([^()]*)\)|([^()\n\\;#]*))"
                          r"(?:\s*#[^\n]*)*\s*\Z")
_IMPORT = re.compile(r"import\s+([^()\n\\;#]*?)(?:\s*#[^\n]*)*\s*\Z")
_NAME_AS = re.compile(r"^([A-Za-z_][\w.]*)(?:\s+as\s+([A-Za-z_]\w*))?$")


def _bind_import_text(out: dict, text: str) -> bool:
    """Bind a plain import statement from its text; False when it is not plain (then it is parsed)."""
    text = text.strip()
    match = _IMPORT_FROM.match(text)
    if match:
        names = match.group(3) if match.group(3) is not None else match.group(4)
        names = re.sub(r"#[^\n]*", "", names)
        stmt = _ImportFrom(match.group(2), len(match.group(1)))
        items = [n.strip() for n in names.replace("\n", " ").split(",") if n.strip()]
        parsed = [_NAME_AS.match(n) for n in items]
        if not items or not all(parsed) or any("." in p.group(1) for p in parsed):
            return False
        for p in parsed:
            if p.group(1) != "*":
                out[p.group(2) or p.group(1)] = ("from", stmt, p.group(1))
        return True
    match = _IMPORT.match(text)
    if match:
        items = [n.strip() for n in match.group(1).split(",") if n.strip()]
        parsed = [_NAME_AS.match(n) for n in items]
        if not items or not all(parsed):
            return False
        for p in parsed:
            parts = tuple(p.group(1).split("."))
            if p.group(2):
                out[p.group(2)] = ("import", parts, len(parts))
            else:
                out[parts[0]] = ("import", parts[:1], 1)
        return True
    return False


def _bind_stmt(out: dict, stmt) -> None:
    t = type(stmt)
    if t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
        out[stmt.name] = ("def", stmt)
    elif t is ast.Import:
        for alias in stmt.names:
            if alias.asname:
                out[alias.asname] = ("import", tuple(alias.name.split(".")), len(alias.name.split(".")))
            else:
                first = alias.name.split(".")[0]
                out[first] = ("import", (first,), 1)
    elif t is ast.ImportFrom:
        for alias in stmt.names:
            if alias.name != "*":
                out[alias.asname or alias.name] = ("from", stmt, alias.name)
    elif t in (ast.Assign, ast.AnnAssign):
        if t is ast.AnnAssign and stmt.value is None:
            return
        for target in (stmt.targets if t is ast.Assign else [stmt.target]):
            if isinstance(target, ast.Name):
                out[target.id] = ("assign", stmt, None)
            elif isinstance(target, (ast.Tuple, ast.List)):
                for i, elt in enumerate(target.elts):
                    if isinstance(elt, ast.Name):
                        out[elt.id] = ("assign", stmt, i)
    elif t is ast.AugAssign and isinstance(stmt.target, ast.Name):
        out[stmt.target.id] = ("unknown", f"changed by augmented assignment at line {stmt.lineno}")
    elif t in (ast.If, ast.Try, ast.For, ast.While, ast.With, ast.AsyncFor, ast.AsyncWith) or \
            t.__name__ in ("Match", "TryStar"):
        for name in _bound_names(stmt):
            out[name] = ("unknown", f"defined conditionally (line {stmt.lineno})")


def _bound_names(stmt) -> set:
    names = set()
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add(alias.asname or alias.name.split(".")[0])
    return names


def infer_root(path: str) -> str:
    """The directory holding the top-level package of ``path`` (walk up while __init__.py exists)."""
    here = os.path.dirname(os.path.abspath(path))
    for _ in range(64):
        if not os.path.isfile(os.path.join(here, "__init__.py")):
            return here
        parent = os.path.dirname(here)
        if parent == here:
            return here
        here = parent
    return here


def _dotted_of(path: str, root: str) -> tuple[str, bool]:
    """Dotted module name of ``path`` under ``root`` and whether it is a package __init__."""
    try:
        rel = os.path.relpath(os.path.abspath(path), root)
    except ValueError:
        rel = os.path.basename(path)
    if rel.startswith(".."):
        rel = os.path.basename(path)
    rel = rel[:-3] if rel.endswith(".py") else rel
    parts = [p for p in rel.replace(os.sep, "/").split("/") if p]
    is_pkg = bool(parts) and parts[-1] == "__init__"
    if is_pkg:
        parts = parts[:-1]
    return ".".join(parts), is_pkg


_PARSE_CACHE: dict = {}     # abs path -> ((size, mtime_ns), Module | None); process-wide, small
_PARSE_CACHE_MAX = 256


def _parse_text(text: str, filename: str) -> ast.Module:
    """ast.parse with every failure as an InputError (ML005 syntax, ML007 limits)."""
    try:
        return ast.parse(text, filename=filename)
    except SyntaxError as exc:
        msg = exc.msg or "invalid syntax"
        if "too many" in msg or "nested" in msg or "Exceeds the limit" in msg:
            raise InputError("ML007", f"Python source exceeds a parser limit: {msg}", exc.lineno or 1,
                             exc.offset or 1) from None
        raise InputError("ML005", f"invalid Python: {msg}", exc.lineno or 1, max(exc.offset or 1, 1),
                         help="Python itself cannot parse this file; torchtitan could not import it") from None
    except (RecursionError, MemoryError):
        raise InputError("ML007", "Python source nested too deeply to parse",
                         help="no training config nests expressions this deeply") from None
    except ValueError as exc:   # NUL bytes, int digit limit
        raise InputError("ML007", f"Python source exceeds a parser limit: {exc}") from None


class Checkout:
    """Where modules live: the roots searched for imports, and the parsed modules (lazy, cached).

    The first root is the checkout of the file being read; further roots (``search_path``)
    are searched after it, e.g. a torchtitan checkout a user's own registry imports from.
    """

    def __init__(self, root: str | None, search_path=None):
        self.root = os.path.abspath(root) if root else None
        self.roots = [r for r in [self.root] + [os.path.abspath(p) for p in (search_path or []) if p] if r]
        self.helper_bytes = 0
        self.modules: dict = {}   # dotted -> Module | None

    def file_of(self, dotted: str) -> str | None:
        if not dotted:
            return None
        parts = dotted.split(".")
        for root in self.roots:
            base = os.path.join(root, *parts)
            if os.path.isfile(base + ".py"):
                return base + ".py"
            init = os.path.join(base, "__init__.py")
            if os.path.isfile(init):
                return init
        return None

    def root_of(self, path: str) -> str | None:
        apath = os.path.abspath(path)
        for root in self.roots:
            if apath == root or apath.startswith(root.rstrip(os.sep) + os.sep):
                return root
        return None

    def rel(self, path: str) -> str:
        root = self.root_of(path)
        if root:
            return os.path.relpath(os.path.abspath(path), root).replace(os.sep, "/")
        return os.path.basename(path)

    def module(self, dotted: str) -> Module | None:
        """The module ``dotted`` of the checkout, parsed once; None when absent or unusable."""
        if dotted in self.modules:
            return self.modules[dotted]
        path = self.file_of(dotted)
        mod = self.load(path, helper=True) if path else None
        self.modules[dotted] = mod
        return mod

    def load(self, path: str, helper: bool) -> Module | None:
        apath = os.path.abspath(path)
        try:
            st = os.stat(apath)
        except OSError:
            return None
        key = (st.st_size, st.st_mtime_ns)
        root = self.root_of(apath) or os.path.dirname(apath)
        hit = _PARSE_CACHE.get(apath)
        if hit and hit[0] == key:
            mod = hit[1]
            if mod is None or mod.dotted == _dotted_of(apath, root)[0]:
                return mod
            # parsed under another root: its names differ, read it again
        if helper:
            if st.st_size > MAX_HELPER_MODULE_BYTES or self.helper_bytes + st.st_size > MAX_HELPER_BYTES_TOTAL:
                return None
            self.helper_bytes += st.st_size
        try:  # a FIFO or device among the modules is refused unread, not opened
            text = decode_python(read_bytes(apath, MAX_HELPER_MODULE_BYTES if helper else MAX_BYTES))
            tree = None if helper else _parse_text(text, apath)
        except (InputError, OSError):
            mod = None
        else:
            dotted, is_pkg = _dotted_of(apath, root)
            mod = Module(apath, self.rel(apath), dotted, is_pkg, text, tree)
        if len(_PARSE_CACHE) >= _PARSE_CACHE_MAX:
            _PARSE_CACHE.clear()
        _PARSE_CACHE[apath] = (key, mod)
        return mod


def _abs_import(mod: Module, module: str | None, level: int) -> str | None:
    if not level:
        return module
    base = mod.package.split(".") if mod.package else []
    if level - 1 > len(base):
        return None
    if level > 1:
        base = base[: len(base) - (level - 1)]
    if not base and not module:
        return None
    return ".".join(base + ([module] if module else []))


# -----------------------------------------------------------------------------
# The abstract interpreter
# -----------------------------------------------------------------------------
class Frame:
    __slots__ = ("mod", "locals", "parent")

    def __init__(self, mod: Module, local: dict, parent: Frame | None = None):
        self.mod, self.locals, self.parent = mod, local, parent


_IN_PROGRESS = object()
_SENTINEL = (0, 0)


def _text(node, limit: int = 60) -> str:
    """Short source text of a name / attribute chain / call, for reasons (iterative, never deep)."""
    parts = []
    for _ in range(12):
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Name):
            parts.append(node.id)
            break
        elif isinstance(node, ast.Call):
            parts.append("()")
            node = node.func
        elif isinstance(node, ast.Subscript):
            parts.append("[...]")
            node = node.value
        else:
            parts.append("<expr>")
            break
    out = ""
    for part in reversed(parts):
        out += part if part in ("()", "[...]") or not out else "." + part
    return out if len(out) <= limit else out[: limit - 3] + "..."


def _is_class_name(name: str) -> bool:
    return name[:1].isupper() and not name.isupper()


def _is_constant_name(name: str) -> bool:
    return name.isupper() or (name[:1] == "_" and name[1:].isupper())


def _literal_ok(v, depth: int = 0) -> bool:
    if isinstance(v, _LITERAL):
        return True
    if depth > MAX_VALUE_DEPTH:
        return False
    if isinstance(v, (list, tuple)):
        return all(_literal_ok(x, depth + 1) for x in v)
    if isinstance(v, dict):
        return all(_literal_ok(x, depth + 1) for x in v.values())
    return False


class Interp:
    """Evaluates one config function (and what it calls) of one registry file."""

    def __init__(self, reader: Reader, top: Module):
        self.reader = reader
        self.top = top
        self.checkout = reader.checkout
        self.depth = 0            # helper / derivation depth; positions are real only at 0
        self.site = None          # (line, col) in the top function of the call being followed
        self.steps = 0
        self.nest = 0
        self.max_nest = reader.max_nest
        self.gcache: dict = {}
        self.stack: set = set()
        self.derived: list = []
        self.limited = False      # a bound was hit: the result is not reused as a snapshot
        self.raised = False       # the function raises when run

    # -- positions and unknowns ------------------------------------------------
    def here(self, node, mod: Module) -> tuple[int, int]:
        if self.depth == 0 and mod is self.top:
            return mod.pos(node)
        return self.site or _SENTINEL

    def unknown(self, reason: str, node, mod: Module) -> U:
        if self.depth == 0 and mod is self.top:
            line, col = mod.pos(node)
            return U(reason, line, col, self.top.path)
        line, col = self.site or _SENTINEL
        where = f"{mod.rel}:{getattr(node, 'lineno', '?')}"
        return U(f"{reason} (at {where})", line, col, self.top.path, True)

    def tick(self) -> None:
        self.steps += 1
        reader = self.reader
        reader.spent += 1
        if self.steps > MAX_STEPS:
            raise _Limit(f"more than {MAX_STEPS:,} evaluation steps (a documented bound of the static reader)")
        if reader.spent > reader.budget:
            raise _Limit("the evaluation budget for this file is spent (it grows with the file's size)")

    # -- statements ------------------------------------------------------------
    def exec_block(self, stmts, fr: Frame) -> None:
        for stmt in stmts:
            self.exec_stmt(stmt, fr)

    def exec_stmt(self, s, fr: Frame) -> None:
        self.tick()
        self.nest += 1
        try:
            if self.nest > self.max_nest:
                raise _Limit("statements nested too deeply to follow")
            self._exec(s, fr)
        finally:
            self.nest -= 1

    def _exec(self, s, fr: Frame) -> None:
        t = type(s)
        mod = fr.mod
        if t is ast.Assign:
            value = self.eval(s.value, fr)
            for target in s.targets:
                self.assign(target, value, fr)
        elif t is ast.Expr:
            self.eval(s.value, fr)
        elif t is ast.Return:
            raise _Return(self.eval(s.value, fr) if s.value is not None else None)
        elif t is ast.AnnAssign:
            if s.value is not None:
                self.assign(s.target, self.eval(s.value, fr), fr)
        elif t is ast.AugAssign:
            current = self.eval(_as_load(s.target), fr)
            value = self.binop(s.op, current, self.eval(s.value, fr), s, fr)
            self.assign(s.target, value, fr)
        elif t is ast.If:
            cond = self.truth(self.eval(s.test, fr), s.test, fr)
            if cond is True:
                self.exec_block(s.body, fr)
            elif cond is False:
                self.exec_block(s.orelse, fr)
            else:
                # a branch that can only raise is not taken by a config that loads at all
                body_raises, else_raises = _only_raises(s.body), _only_raises(s.orelse) and bool(s.orelse)
                if body_raises and not else_raises:
                    self.exec_block(s.orelse, fr)
                elif else_raises and not body_raises:
                    self.exec_block(s.body, fr)
                else:
                    why = self.unknown(f"set under a condition that is not known statically ({cond.reason})",
                                       s, mod)
                    self.havoc(s.body + s.orelse, fr, why, loop_jumps=True)
        elif t is ast.For:
            self.exec_for(s, fr)
        elif t is ast.Assert:
            # torchtitan runs without -O: a failing assert means the config never loads
            if self.truth(self.eval(s.test, fr), s.test, fr) is False:
                raise _Raise(self.unknown("an assert fails here", s, mod))
        elif t in (ast.Pass, ast.Global, ast.Nonlocal):
            pass
        elif t is ast.Break:
            raise _Break()
        elif t is ast.Continue:
            raise _Continue()
        elif t is ast.Raise:
            what = _text(s.exc.func if isinstance(s.exc, ast.Call) else s.exc) if s.exc is not None else "re-raise"
            raise _Raise(self.unknown(f"raises {what} here", s, mod))
        elif t in (ast.FunctionDef, ast.AsyncFunctionDef):
            if s.decorator_list:
                fr.locals[s.name] = self.unknown(f"local function {s.name} is decorated", s, mod)
            else:
                fr.locals[s.name] = FuncRef(mod, s, closure=fr)
        elif t is ast.ClassDef:
            fr.locals[s.name] = self.unknown(f"local class {s.name} is not followed", s, mod)
        elif t is ast.Import:
            for alias in s.names:
                parts = tuple(alias.name.split("."))
                if alias.asname:
                    fr.locals[alias.asname] = Sym(parts, len(parts), alias.asname)
                else:
                    fr.locals[parts[0]] = Sym(parts[:1], 1, parts[0])
        elif t is ast.ImportFrom:
            base = _abs_import(mod, s.module, s.level)
            for alias in s.names:
                if alias.name == "*":
                    continue
                name = alias.asname or alias.name
                if base is None:
                    fr.locals[name] = self.unknown("relative import outside a package", s, mod)
                else:
                    parts = tuple(base.split("."))
                    fr.locals[name] = Sym(parts + (alias.name,), len(parts), name)
        elif t is ast.With:
            for item in s.items:
                self.eval(item.context_expr, fr)
                if item.optional_vars is not None:
                    self.assign(item.optional_vars, self.unknown("bound by a with statement", item.optional_vars,
                                                                 mod), fr)
            self.exec_block(s.body, fr)
        elif t is ast.Try or t.__name__ == "TryStar":
            try:
                self.exec_block(s.body, fr)
            except _Raise as exc:
                # an exception handled here: which handler ran, and from where, is not followed
                self.havoc(s.body + [h for h in s.handlers], fr, exc.unknown)
            else:
                self.exec_block(s.orelse, fr)
            if s.handlers:
                why = self.unknown("set by an exception handler", s, mod)
                self.havoc(list(s.handlers), fr, why)
            self.exec_block(s.finalbody, fr)
        elif t is ast.Delete:
            why = self.unknown("deleted", s, mod)
            for target in s.targets:
                self.havoc_target(target, fr, why)
        else:   # while, match, async statements, ...
            why = self.unknown(f"set inside a {t.__name__.lower()} statement, which is not followed", s, mod)
            self.havoc([s], fr, why)

    def exec_for(self, s: ast.For, fr: Frame) -> None:
        seq = self.iterate(self.eval(s.iter, fr), s.iter, fr)
        if isinstance(seq, U):
            why = self.unknown(f"set in a loop over values not known statically ({seq.reason})", s, fr.mod)
            self.havoc([s], fr, why)
            return
        for item in seq:
            self.assign(s.target, item, fr)
            try:
                self.exec_block(s.body, fr)
            except _Break:
                return
            except _Continue:
                continue
        self.exec_block(s.orelse, fr)

    def iterate(self, value, node, fr: Frame):
        value = self.force(value, node, fr)
        if isinstance(value, U):
            return value
        if isinstance(value, dict):
            value = list(value)
        if isinstance(value, (list, tuple, str)):
            if len(value) > MAX_UNROLL:
                return self.unknown(f"a loop of {len(value)} iterations (more than {MAX_UNROLL})", node, fr.mod)
            return list(value)
        return self.unknown(f"iterates over {_text(node)}, not a known sequence", node, fr.mod)

    # -- assignment --------------------------------------------------------------
    def assign(self, target, value, fr: Frame) -> None:
        t = type(target)
        if t is ast.Name:
            fr.locals[target.id] = value
        elif t is ast.Attribute:
            obj = self.target_object(target.value, fr)
            self.set_field(obj, target.attr, value, self.here(target, fr.mod), target, fr)
        elif t in (ast.Tuple, ast.List):
            value = self.force(value, target, fr)
            if isinstance(value, dict):
                value = list(value)
            starred = any(isinstance(e, ast.Starred) for e in target.elts)
            if isinstance(value, (list, tuple)) and not starred and len(value) == len(target.elts):
                for elt, item in zip(target.elts, value):
                    self.assign(elt, item, fr)
            else:
                why = value if isinstance(value, U) else self.unknown("unpacking not followed", target, fr.mod)
                for elt in target.elts:
                    self.assign(elt.value if isinstance(elt, ast.Starred) else elt, why, fr)
        elif t is ast.Subscript:
            container = self.force(self.eval(target.value, fr), target.value, fr)
            key = self.force(self.eval(target.slice, fr), target.slice, fr)
            if isinstance(container, list) and isinstance(key, int) and -len(container) <= key < len(container):
                container[key] = value
            elif isinstance(container, dict) and isinstance(key, _LITERAL):
                container[key] = value
            elif isinstance(container, U):
                pass   # writing into something already unknown
            else:
                why = key if isinstance(key, U) else self.unknown(f"item assignment on {_text(target.value)}",
                                                                   target, fr.mod)
                self.havoc_target(target.value, fr, why)
        elif t is ast.Starred:
            self.assign(target.value, self.unknown("starred assignment", target, fr.mod), fr)

    def target_object(self, node, fr: Frame):
        """The object an attribute assignment writes into; a defaulted sub-config is created."""
        if isinstance(node, ast.Attribute):
            base = self.target_object(node.value, fr)
            if isinstance(base, Obj):
                current = base.fields.get(node.attr, None) if node.attr in base.fields else None
                if isinstance(current, Obj):
                    return current
                if node.attr in base.fields and not isinstance(current, U):
                    return self.unknown(f"{_text(node)} is not a sub-config", node, fr.mod)
                # a defaulted sub-config (rest None) or one written into while unknown
                child = Obj(None, rest=current if isinstance(current, U) else base.rest)
                base.fields[node.attr] = child
                return child
            return base if isinstance(base, U) else self.unknown(f"writes into {_text(node)}", node, fr.mod)
        return self.force(self.eval(node, fr), node, fr)

    def set_field(self, obj, attr: str, value, pos, node, fr: Frame) -> None:
        if isinstance(obj, Obj):
            obj.fields[attr] = value
            obj.pos[attr] = pos
        # writing into an unknown object: the object is already unknown as a whole

    def havoc(self, stmts, fr: Frame, why: U, loop_jumps: bool = False) -> None:
        """Make everything these statements may set unknown (branches, loops not followed).

        A ``return`` among them (or a ``break``/``continue`` leaving them, for a branch)
        means what runs next is not known either: the function's result becomes unknown.
        """
        jump = _jump(stmts, loop_jumps)
        if jump is not None:
            raise _Uncertain(self.unknown(f"a {jump} under a condition that is not known statically "
                                          f"({why.reason})", stmts[0], fr.mod))
        for stmt in stmts:
            for node in ast.walk(stmt):
                if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in targets:
                        self.havoc_target(target, fr, why)
                elif isinstance(node, ast.withitem) and node.optional_vars is not None:
                    self.havoc_target(node.optional_vars, fr, why)
                elif isinstance(node, ast.NamedExpr):
                    self.havoc_target(node.target, fr, why)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    fr.locals[node.name] = why
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    for alias in node.names:
                        fr.locals[alias.asname or alias.name.split(".")[0]] = why
                elif isinstance(node, ast.Call):
                    # a call may mutate what it is given or the object whose method it is
                    if isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATING:
                        self.havoc_target(node.func.value, fr, why)
                    for arg in list(node.args) + [k.value for k in node.keywords]:
                        if isinstance(arg, (ast.Name, ast.Attribute)):
                            self.poison(self.peek(arg, fr), why)

    def peek(self, node, fr: Frame):
        """Evaluate a name or attribute chain without side effects (for havoc)."""
        try:
            if isinstance(node, ast.Name):
                return self.lookup(node.id, node, fr)
            if isinstance(node, ast.Attribute):
                base = self.peek(node.value, fr)
                if isinstance(base, Obj):
                    return base.fields.get(node.attr)
        except (_Limit, _Raise, _Return):
            pass
        return None

    def havoc_target(self, target, fr: Frame, why: U) -> None:
        # what is already unknown keeps its first reason: the root cause, not the last symptom
        if isinstance(target, ast.Name):
            if not isinstance(fr.locals.get(target.id), U):
                fr.locals[target.id] = why
        elif isinstance(target, ast.Attribute):
            obj = self.peek(target.value, fr)
            if isinstance(obj, Obj):
                if isinstance(obj.fields.get(target.attr), U):
                    return
                obj.fields[target.attr] = why
                obj.pos[target.attr] = self.here(target, fr.mod)
            elif isinstance(target.value, (ast.Name, ast.Attribute)) and obj is None:
                # writes into a sub-config not set yet: create it, the field unknown
                try:
                    holder = self.target_object(target.value, fr)
                except (_Limit, _Raise, _Return):
                    holder = None
                if isinstance(holder, Obj):
                    holder.fields[target.attr] = why
                    holder.pos[target.attr] = self.here(target, fr.mod)
        elif isinstance(target, ast.Subscript):
            self.havoc_target(target.value, fr, why)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for elt in target.elts:
                self.havoc_target(elt, fr, why)
        elif isinstance(target, ast.Starred):
            self.havoc_target(target.value, fr, why)

    def poison(self, value, why: U) -> None:
        """An object handed to code that is not followed may have been changed: all of it unknown."""
        if isinstance(value, Obj) and value.kind != "model":
            value.fields.clear()
            value.pos.clear()
            value.rest = why

    # -- expressions -------------------------------------------------------------
    def eval(self, node, fr: Frame):
        self.tick()
        self.nest += 1
        try:
            if self.nest > self.max_nest:
                return self.unknown("expression nested too deeply to follow", node, fr.mod)
            return self._eval(node, fr)
        finally:
            self.nest -= 1

    def _eval(self, node, fr: Frame):
        t = type(node)
        mod = fr.mod
        if t is ast.Constant:
            v = node.value
            if isinstance(v, int) and not isinstance(v, bool) and abs(v) > MAX_INT:
                return self.unknown(f"integer literal larger than {MAX_INT:.0e}", node, mod)
            if v is Ellipsis:
                return self.unknown("...", node, mod)
            return v
        if t is ast.Name:
            return self.lookup(node.id, node, fr)
        if t is ast.Attribute:
            return self.get_attr(self.eval(node.value, fr), node.attr, node, fr)
        if t is ast.Call:
            return self.call(node, fr)
        if t is ast.BinOp:
            return self.binop(node.op, self.eval(node.left, fr), self.eval(node.right, fr), node, fr)
        if t is ast.UnaryOp:
            return self.unaryop(node, self.force(self.eval(node.operand, fr), node.operand, fr), fr)
        if t is ast.BoolOp:
            result = None
            for value_node in node.values:
                value = self.eval(value_node, fr)
                truth = self.truth(value, value_node, fr)
                if isinstance(truth, U):
                    return truth
                result = self.force(value, value_node, fr)
                if isinstance(node.op, ast.And) and not truth:
                    return result
                if isinstance(node.op, ast.Or) and truth:
                    return result
            return result
        if t is ast.Compare:
            return self.compare(node, fr)
        if t is ast.IfExp:
            cond = self.truth(self.eval(node.test, fr), node.test, fr)
            if isinstance(cond, U):
                return cond
            return self.eval(node.body if cond else node.orelse, fr)
        if t in (ast.Tuple, ast.List, ast.Set):
            items = []
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    seq = self.iterate(self.eval(elt.value, fr), elt.value, fr)
                    if isinstance(seq, U):
                        return seq
                    items.extend(seq)
                else:
                    items.append(self.eval(elt, fr))
            if len(items) > MAX_ITEMS:
                return self.unknown("sequence too long", node, mod)
            if t is ast.Tuple:
                return tuple(items)
            if t is ast.Set:
                return self.unknown("a set is not a config value", node, mod)
            return items
        if t is ast.Dict:
            out = {}
            for key_node, value_node in zip(node.keys, node.values):
                if key_node is None:
                    mapping = self.force(self.eval(value_node, fr), value_node, fr)
                    if isinstance(mapping, dict):
                        out.update(mapping)
                    else:
                        return mapping if isinstance(mapping, U) else self.unknown(
                            f"**{_text(value_node)} is not a known mapping", value_node, mod)
                    continue
                key = self.force(self.eval(key_node, fr), key_node, fr)
                if isinstance(key, U):
                    return key
                if not isinstance(key, _LITERAL) and not (isinstance(key, tuple) and _literal_ok(key)):
                    return self.unknown("dictionary key is not a literal", key_node, mod)
                out[key] = self.eval(value_node, fr)
            return out
        if t is ast.JoinedStr:
            out = ""
            for part in node.values:
                if isinstance(part, ast.Constant):
                    out += str(part.value)
                    continue
                value = self.force(self.eval(part.value, fr), part.value, fr)
                if isinstance(value, U):
                    return value
                if not isinstance(value, _LITERAL):
                    return self.unknown("f-string of a non-literal value", part, mod)
                spec = ""
                if part.format_spec is not None:
                    spec = self.eval(part.format_spec, fr)
                    if not isinstance(spec, str):
                        return spec if isinstance(spec, U) else self.unknown("format spec", part, mod)
                try:
                    if part.conversion == ord("r"):
                        value = repr(value)
                    elif part.conversion == ord("s"):
                        value = str(value)
                    elif part.conversion == ord("a"):
                        value = ascii(value)
                    out += format(value, spec)
                except (ValueError, TypeError, OverflowError) as exc:
                    return self.unknown(f"f-string raises {type(exc).__name__}", part, mod)
                if len(out) > MAX_SEQ:
                    return self.unknown("string too long", node, mod)
            return out
        if t is ast.Subscript:
            return self.subscript(node, fr)
        if t is ast.Slice:
            parts = []
            for part in (node.lower, node.upper, node.step):
                v = self.force(self.eval(part, fr), part, fr) if part is not None else None
                if isinstance(v, U):
                    return v
                if v is not None and not isinstance(v, int):
                    return self.unknown("slice bound is not an integer", node, mod)
                parts.append(v)
            return slice(*parts)
        if t is ast.NamedExpr:
            value = self.eval(node.value, fr)
            self.assign(node.target, value, fr)
            return value
        if t in (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp):
            return self.comprehension(node, fr)
        if t is ast.Lambda:
            return self.unknown("a lambda is not a config value", node, mod)
        if t is ast.Starred:
            return self.unknown("starred expression", node, mod)
        return self.unknown(f"{t.__name__} expression not followed", node, mod)

    def lookup(self, name: str, node, fr: Frame):
        f = fr
        while f is not None:
            if name in f.locals:
                return f.locals[name]
            f = f.parent
        return self.global_value(fr.mod, name, node, fr)

    def global_value(self, mod: Module, name: str, node, fr: Frame):
        binding = mod.binding(name)
        if binding is None:
            if name in ("True", "False", "None"):
                return {"True": True, "False": False, "None": None}[name]
            if name in _BUILTINS:
                return Builtin(name)
            return self.unknown(f"name {name} is not defined at module level", node, fr.mod)
        kind = binding[0]
        if kind == "def":
            stmt = binding[1]
            if isinstance(stmt, ast.ClassDef):
                return ClassRef(mod, stmt, name)
            return FuncRef(mod, stmt)
        if kind == "import":
            parts, modlen = binding[1], binding[2]
            return Sym(parts, modlen, name)
        if kind == "from":
            stmt, orig = binding[1], binding[2]
            base = _abs_import(mod, stmt.module, stmt.level)
            if base is None:
                return self.unknown("relative import outside a package", node, fr.mod)
            parts = tuple(base.split("."))
            return Sym(parts + (orig,), len(parts), name)
        if kind == "unknown":
            return self.unknown(f"{name} is {binding[1]}", node, fr.mod)
        # a module-level assignment: evaluated once per run, shared like the real module object
        stmt, index = binding[1], binding[2]
        key = (mod.path, name)
        cached = self.gcache.get(key)
        if cached is _IN_PROGRESS:
            return self.unknown(f"{name} is defined in terms of itself", node, fr.mod)
        if cached is not None or key in self.gcache:
            return cached
        self.gcache[key] = _IN_PROGRESS
        saved = (self.depth, self.site)
        if mod is not self.top and self.depth == 0:
            self.depth, self.site = 1, self.here(node, fr.mod)
        try:
            value = self.eval(stmt.value, Frame(mod, {}))
        finally:
            self.depth, self.site = saved
        if index is not None:
            value = self.force(value, stmt, Frame(mod, {}))
            if isinstance(value, (list, tuple)) and index < len(value):
                value = value[index]
            elif not isinstance(value, U):
                value = self.unknown(f"{name} is unpacked from a value not known statically", stmt, mod)
        self.gcache[key] = value
        return value

    def resolve(self, sym: Sym, hops: int = 0):
        """The value a lazily imported name stands for, or None when it is outside the checkout."""
        cache = self.reader.resolved
        if sym.parts in cache:
            return cache[sym.parts]
        if hops > 8:
            return None
        cache[sym.parts] = None   # cycle guard
        value = None
        mod = self.checkout.module(".".join(sym.parts[: sym.modlen]))
        if mod is not None:
            value = ModuleVal(mod)
            for attr in sym.parts[sym.modlen:]:
                value = self.static_attr(value, attr, hops)
                if value is None or isinstance(value, U):
                    break
        cache[sym.parts] = value
        return value

    def static_attr(self, value, attr: str, hops: int):
        if isinstance(value, ModuleVal):
            mod = value.mod
            binding = mod.binding(attr)
            if binding is None:
                sub = self.checkout.module(f"{mod.dotted}.{attr}") if mod.is_pkg else None
                return ModuleVal(sub) if sub is not None else None
            dummy = Frame(mod, {})
            got = self.global_value(mod, attr, mod.tree, dummy)
            if isinstance(got, Sym):
                return self.resolve(got, hops + 1)
            return got
        if isinstance(value, ClassRef):
            for stmt in value.node.body:
                if isinstance(stmt, ast.ClassDef) and stmt.name == attr:
                    return ClassRef(value.mod, stmt, f"{value.display}.{attr}")
            return None
        return None

    def force(self, value, node, fr: Frame):
        """A lazily imported name used as a value: its value when it is a constant of the checkout."""
        if not isinstance(value, Sym):
            return value
        name = value.parts[-1]
        if value.dotted in _MATH_CONSTANTS:  # math.inf is a weight's value as much as float("inf")
            return _MATH_CONSTANTS[value.dotted]
        if value.dotted.startswith("os.environ") or value.dotted.startswith("os.getenv"):
            return self.unknown(f"{value.orig} reads the environment at run time", node, fr.mod)
        if not _is_constant_name(name):
            kind = "class" if _is_class_name(name) else "function or module"
            return self.unknown(f"{value.orig} is a {kind} imported from {'.'.join(value.parts[:-1])}, "
                                "not a literal", node, fr.mod)
        resolved = self.resolve(value)
        if resolved is None:
            return self.unknown(f"{value.orig} is imported from {'.'.join(value.parts[:value.modlen])}, "
                                "which is not in the checkout being read", node, fr.mod)
        if isinstance(resolved, U):
            return self.unknown(f"{value.orig}: {resolved.reason}", node, fr.mod)
        return resolved

    def get_attr(self, base, attr: str, node, fr: Frame):
        if isinstance(base, SpecPart) and base.part == "model" and attr == "layers":
            return SpecPart(base.reason, base.line, base.col, base.file, base.name, base.flavor, "layers")
        if isinstance(base, U):
            return base
        if isinstance(base, Obj):
            if attr in base.fields:
                return base.fields[attr]
            if base.kind == "model":
                why = self.unknown(f"reads {_text(node)}: the model spec's internals are not read statically",
                                   node, fr.mod)
                if attr == "model":
                    return SpecPart(why.reason, why.line, why.col, why.file, base.fields.get("name"),
                                    base.fields.get("flavor"), "model")
                return why
            if base.rest is not None:
                return base.rest
            return self.unknown(f"reads {_text(node)}, which is defaulted (defaults are not read statically)",
                                node, fr.mod)
        if isinstance(base, Sym):
            return base.attr(attr)
        if isinstance(base, ModuleVal):
            got = self.static_attr(base, attr, 0)
            return got if got is not None else self.unknown(f"{_text(node)} is not found", node, fr.mod)
        if isinstance(base, ClassRef):
            got = self.static_attr(base, attr, 0)
            return got if got is not None else self.unknown(f"class attribute {_text(node)} is not followed",
                                                            node, fr.mod)
        if isinstance(base, (str, list, dict, tuple, int, float)) and not isinstance(base, bool):
            return Method(base, attr, node.value)
        return self.unknown(f"attribute {_text(node)} is not followed", node, fr.mod)

    def subscript(self, node, fr: Frame):
        base = self.force(self.eval(node.value, fr), node.value, fr)
        key = self.force(self.eval(node.slice, fr), node.slice, fr)
        if isinstance(base, U):
            return base
        if isinstance(key, U):
            return key
        if isinstance(base, (ClassRef, Sym, Builtin)):
            return self.unknown(f"{_text(node.value)}[...] (a type) is not a value", node, fr.mod)
        try:
            if isinstance(base, (list, tuple, str, dict)):
                return base[key]
        except (KeyError, IndexError, TypeError) as exc:
            raise _Raise(self.unknown(f"{_text(node.value)}[...] raises {type(exc).__name__}", node, fr.mod))
        return self.unknown(f"subscript of {_text(node.value)}, not a known container", node, fr.mod)

    def truth(self, value, node, fr: Frame):
        value = self.force(value, node, fr)
        if isinstance(value, U):
            return value
        if isinstance(value, (Obj, FuncRef, ClassRef, ModuleVal, Builtin)):
            return True
        if isinstance(value, (_LITERAL, list, tuple, dict)):
            return bool(value)
        return self.unknown(f"truth of {_text(node)} is not known", node, fr.mod)

    def binop(self, op, a, b, node, fr: Frame):
        a = self.force(a, node, fr)
        b = self.force(b, node, fr)
        if isinstance(a, U):
            return a
        if isinstance(b, U):
            return b
        if not _literal_ok(a) or not _literal_ok(b):
            return self.unknown(f"{type(op).__name__} of values that are not literals", node, fr.mod)
        reason = _arith_guard(op, a, b)
        if reason:
            return self.unknown(reason, node, fr.mod)
        func = _BINOPS.get(type(op))
        if func is None:
            return self.unknown(f"operator {type(op).__name__} not followed", node, fr.mod)
        try:
            result = func(a, b)
        except (ArithmeticError, TypeError, ValueError, KeyError, IndexError) as exc:
            raise _Raise(self.unknown(f"raises {type(exc).__name__}: {exc}", node, fr.mod)) from None
        if isinstance(result, int) and not isinstance(result, bool) and abs(result) > MAX_INT:
            return self.unknown(f"integer arithmetic beyond {MAX_INT:.0e}", node, fr.mod)
        return result

    def unaryop(self, node, v, fr: Frame):
        if isinstance(v, U):
            return v
        if isinstance(node.op, ast.Not):
            truth = self.truth(v, node.operand, fr)
            return truth if isinstance(truth, U) else not truth
        if not isinstance(v, (int, float, complex)):
            return self.unknown(f"{type(node.op).__name__} of a non-number", node, fr.mod)
        if isinstance(node.op, ast.USub):
            return -v
        if isinstance(node.op, ast.UAdd):
            return +v
        if isinstance(node.op, ast.Invert) and isinstance(v, int):
            return ~v
        return self.unknown("unary operator not followed", node, fr.mod)

    def compare(self, node, fr: Frame):
        left = self.force(self.eval(node.left, fr), node.left, fr)
        for op, right_node in zip(node.ops, node.comparators):
            right = self.force(self.eval(right_node, fr), right_node, fr)
            if isinstance(left, U):
                return left
            if isinstance(right, U):
                return right
            if isinstance(op, (ast.Is, ast.IsNot)):
                if left is None or right is None or isinstance(left, bool) or isinstance(right, bool):
                    ok = (left is right) if isinstance(op, ast.Is) else (left is not right)
                elif isinstance(left, Obj) or isinstance(right, Obj):
                    return self.unknown("identity of objects is not followed", node, fr.mod)
                else:
                    ok = (left == right) if isinstance(op, ast.Is) else (left != right)
            else:
                if not (_literal_ok(left) or isinstance(op, (ast.In, ast.NotIn))) or not (
                        _literal_ok(right) or isinstance(op, (ast.Eq, ast.NotEq))):
                    if isinstance(op, (ast.Eq, ast.NotEq)) and (
                            isinstance(left, Obj) or isinstance(right, Obj)) and (
                            left is None or right is None):
                        ok = isinstance(op, ast.NotEq)
                    else:
                        return self.unknown("comparison of values that are not literals", node, fr.mod)
                else:
                    try:
                        ok = _CMPOPS[type(op)](left, right)
                    except TypeError as exc:
                        raise _Raise(self.unknown(f"comparison raises TypeError: {exc}", node, fr.mod))
            if not ok:
                return False
            left = right
        return True

    def comprehension(self, node, fr: Frame):
        scope = Frame(fr.mod, {}, fr)
        results: list = []
        count = [0]

        def loop(i: int):
            if i == len(node.generators):
                if isinstance(node, ast.DictComp):
                    key = self.force(self.eval(node.key, scope), node.key, scope)
                    if isinstance(key, U) or not isinstance(key, _LITERAL):
                        raise _Stop(key if isinstance(key, U) else self.unknown("key", node, fr.mod))
                    results.append((key, self.eval(node.value, scope)))
                else:
                    results.append(self.eval(node.elt, scope))
                count[0] += 1
                if count[0] > MAX_UNROLL * 4:
                    raise _Stop(self.unknown("comprehension too long to follow", node, fr.mod))
                self.tick()
                return
            gen = node.generators[i]
            seq = self.iterate(self.eval(gen.iter, scope if i else fr), gen.iter, fr)
            if isinstance(seq, U):
                raise _Stop(seq)
            for item in seq:
                self.assign(gen.target, item, scope)
                ok = True
                for cond in gen.ifs:
                    truth = self.truth(self.eval(cond, scope), cond, scope)
                    if isinstance(truth, U):
                        raise _Stop(truth)
                    if not truth:
                        ok = False
                        break
                if ok:
                    loop(i + 1)

        try:
            loop(0)
        except _Stop as stop:
            return stop.unknown
        if isinstance(node, ast.DictComp):
            return dict(results)
        if isinstance(node, ast.SetComp):
            return self.unknown("a set is not a config value", node, fr.mod)
        if isinstance(node, ast.GeneratorExp):
            return tuple(results)   # consumed at once by list()/tuple()/sum() in practice
        return results

    # -- calls -------------------------------------------------------------------
    def eval_args(self, node: ast.Call, fr: Frame):
        args: list = []
        kwargs: dict = {}
        kwpos: dict = {}
        star = None
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                seq = self.iterate(self.eval(arg.value, fr), arg.value, fr)
                if isinstance(seq, U):
                    star = seq
                else:
                    args.extend(seq)
            else:
                args.append(self.eval(arg, fr))
        for kw in node.keywords:
            if kw.arg is None:
                mapping = self.force(self.eval(kw.value, fr), kw.value, fr)
                if isinstance(mapping, dict) and all(isinstance(k, str) for k in mapping):
                    where = self.here(kw, fr.mod)
                    for key, value in mapping.items():
                        kwargs[key] = value
                        kwpos[key] = where
                else:
                    star = mapping if isinstance(mapping, U) else self.unknown(
                        f"**{_text(kw.value)} is not a known mapping", kw, fr.mod)
            else:
                kwargs[kw.arg] = self.eval(kw.value, fr)
                kwpos[kw.arg] = self.here(kw, fr.mod)
        return args, kwargs, kwpos, star

    def call(self, node: ast.Call, fr: Frame):
        func = node.func
        callee = self.eval(func, fr)
        args, kwargs, kwpos, star = self.eval_args(node, fr)
        if isinstance(func, ast.Attribute) and func.attr in _MUTATING and not isinstance(callee, Method):
            because = f" ({callee.reason})" if isinstance(callee, U) else ""
            why = self.unknown(f"{_text(func)}() changes a value not known statically{because}", node, fr.mod)
            self.havoc_target(func.value, fr, why)
            for value in args + list(kwargs.values()):
                self.poison(value, why)
            return why
        if isinstance(func, ast.Attribute) and isinstance(callee, U):
            receiver = self.peek(func.value, fr)
            if isinstance(receiver, Obj) and receiver.kind != "model" and func.attr not in receiver.fields:
                # a method of a config object, not followed: it may change the object
                self.poison(receiver, self.unknown(f"{_text(func)}() is a method not followed; it may change "
                                                   f"{_text(func.value)}", node, fr.mod))
        return self.apply(callee, args, kwargs, kwpos, star, node, fr)

    def apply(self, callee, args, kwargs, kwpos, star, node, fr: Frame):
        mod = fr.mod
        if isinstance(callee, U):
            why = self.unknown(f"call of {_text(node.func)}, not followed ({callee.reason})", node, mod)
            for value in args + list(kwargs.values()):
                self.poison(value, why)
            return why
        if isinstance(callee, Builtin):
            return self.builtin(callee.name, args, kwargs, star, node, fr)
        if isinstance(callee, Method):
            return self.method(callee, args, kwargs, star, node, fr)
        if isinstance(callee, Sym):
            name = callee.parts[-1]
            if name == "model_registry":
                return self.model_registry(".".join(callee.parts[:-1]), args, kwargs, kwpos, star, node, fr)
            special = self.special(callee.dotted, callee.orig, args, kwargs, kwpos, star, node, fr)
            if special is not NotImplemented:
                return special
            if _is_class_name(name):
                return self.construct(callee.orig, callee, args, kwargs, kwpos, star, node, fr)
            resolved = self.resolve(callee)
            if isinstance(resolved, (FuncRef, ClassRef)):
                if isinstance(resolved, ClassRef):
                    return self.construct(callee.orig, resolved, args, kwargs, kwpos, star, node, fr)
                return self.apply(resolved, args, kwargs, kwpos, star, node, fr)
            if resolved is None:
                why = self.unknown(f"call to {callee.orig}() is not followed: it is defined outside the checkout "
                                   "being read", node, mod)
            elif isinstance(resolved, U):
                why = self.unknown(f"call to {callee.orig}() is not followed ({resolved.reason})", node, mod)
            else:
                why = self.unknown(f"{callee.orig} is not a function that can be followed", node, mod)
            for value in args + list(kwargs.values()):
                self.poison(value, why)
            return why
        if isinstance(callee, FuncRef):
            if callee.node.name == "model_registry" and callee.closure is None:
                pkg = callee.mod.dotted if callee.mod.is_pkg else callee.mod.package
                return self.model_registry(pkg, args, kwargs, kwpos, star, node, fr)
            return self.invoke(callee, args, kwargs, star, node, fr)
        if isinstance(callee, ClassRef):
            return self.construct(callee.display, callee, args, kwargs, kwpos, star, node, fr)
        return self.unknown(f"calls {_text(node.func)}, which is not a function", node, mod)

    def construct(self, display, ref, args, kwargs, kwpos, star, node, fr: Frame):
        obj = Obj(display, ref=ref, ref_mod=fr.mod)
        if args:
            obj.rest = self.unknown(f"{display}(...) has positional arguments, not mapped to fields", node, fr.mod)
        if star is not None:
            obj.rest = star
        for key, value in kwargs.items():
            obj.fields[key] = value
            obj.pos[key] = kwpos.get(key) or self.here(node, fr.mod)
        if isinstance(ref, ClassRef):
            for stmt in ref.node.body:
                if isinstance(stmt, ast.FunctionDef) and stmt.name == "__init__":
                    obj.fields.clear()
                    obj.pos.clear()
                    obj.rest = self.unknown(f"{display} has its own __init__, not followed", node, fr.mod)
                elif isinstance(stmt, ast.FunctionDef) and stmt.name == "__post_init__":
                    for sub in ast.walk(stmt):
                        if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                            for target in (sub.targets if isinstance(sub, ast.Assign) else [sub.target]):
                                if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                                        and target.value.id == "self":
                                    obj.fields[target.attr] = self.unknown(
                                        f"{target.attr} is set by {display}.__post_init__, not followed", node, fr.mod)
                                    obj.pos[target.attr] = self.here(node, fr.mod)
        return obj

    def model_registry(self, pkg: str, args, kwargs, kwpos, star, node, fr: Frame):
        obj = Obj("ModelSpec", kind="model")
        obj.module = pkg
        obj.fields["name"] = self.model_name(pkg)
        obj.pos["name"] = self.here(node, fr.mod)
        if args:
            obj.fields["flavor"] = self.force(args[0], node, fr)
            obj.pos["flavor"] = self.here(node.args[0] if node.args else node, fr.mod)
        elif "flavor" in kwargs:
            obj.fields["flavor"] = self.force(kwargs["flavor"], node, fr)
            obj.pos["flavor"] = kwpos.get("flavor") or self.here(node, fr.mod)
        else:
            obj.fields["flavor"] = self.unknown("model_registry() is called without a flavor", node, fr.mod)
            obj.pos["flavor"] = self.here(node, fr.mod)
        for key, value in kwargs.items():
            if key != "flavor":
                obj.fields[key] = value
                obj.pos[key] = kwpos.get(key) or self.here(node, fr.mod)
        if star is not None:
            obj.rest = star
        return obj

    def model_name(self, pkg: str) -> str:
        """The model package: the directory under torchtitan/models/ (or experiments/...)."""
        parts = pkg.split(".") if pkg else []
        if len(parts) >= 3 and parts[0] == "torchtitan" and parts[1] == "models":
            return parts[2]
        if len(parts) >= 3 and parts[0] == "torchtitan" and parts[1] == "experiments":
            rest = parts[2:]
            path = self.checkout.file_of(pkg)
            if path and not path.endswith("__init__.py") and len(rest) > 1:
                rest = rest[:-1]
            return "/".join(rest)
        return parts[-1] if parts else os.path.basename(os.path.dirname(self.top.path))

    def invoke(self, fref: FuncRef, args, kwargs, star, node, fr: Frame):
        fdef = fref.node
        mod = fref.mod
        if isinstance(fdef, ast.AsyncFunctionDef):
            return self.unknown(f"{fdef.name}() is async", node, fr.mod)
        if star is not None:
            why = self.unknown(f"call of {fdef.name}() with arguments not known statically ({star.reason})",
                               node, fr.mod)
            for value in args + list(kwargs.values()):
                self.poison(value, why)
            return why
        for dec in fdef.decorator_list:
            name = _text(dec.func if isinstance(dec, ast.Call) else dec)
            if name not in _TRANSPARENT_DECORATORS:
                why = self.unknown(f"{fdef.name}() is decorated by @{name}, not followed", node, fr.mod)
                for value in args + list(kwargs.values()):
                    self.poison(value, why)
                return why
        if _is_generator(fdef, mod):
            return self.unknown(f"{fdef.name}() is a generator", node, fr.mod)
        key = (mod.path, fdef.name, fdef.lineno)
        if not args and not kwargs and fref.closure is None and _required(fdef) == 0:
            return self.derive(fref, key, node, fr)
        if key in self.stack:
            return self.unknown(f"recursive call to {fdef.name}() is not followed", node, fr.mod)
        if self.depth >= MAX_CALL_DEPTH:
            return self.unknown(f"calls nested more than {MAX_CALL_DEPTH} deep are not followed", node, fr.mod)
        local = self.bind(fref, args, kwargs, node, fr)
        saved = (self.depth, self.site)
        if self.depth == 0:
            self.site = self.here(node, fr.mod)
        self.depth += 1
        self.stack.add(key)
        try:
            self.exec_block(fdef.body, Frame(mod, local, fref.closure))
            value = None
        except _Return as ret:
            value = ret.value
        except _Uncertain as unc:
            value = unc.unknown
            # what it did to its arguments after that point is not known either (only where it may write)
            mutated = self.mutated_params(fref)
            positional = [p.arg for p in list(fdef.args.posonlyargs) + list(fdef.args.args)]
            for i, arg in enumerate(args):
                name = positional[i] if i < len(positional) else (fdef.args.vararg.arg if fdef.args.vararg else "")
                if name in mutated:
                    self.poison(arg, unc.unknown)
            for name, arg in kwargs.items():
                if name in mutated or (fdef.args.kwarg is not None and fdef.args.kwarg.arg in mutated):
                    self.poison(arg, unc.unknown)
        finally:
            self.depth, self.site = saved
            self.stack.discard(key)
        return value

    def mutated_params(self, fref: FuncRef, depth: int = 0) -> set:
        """Parameters a function may write into (syntactically; calls it cannot see count as writes)."""
        fdef = fref.node
        cache = self.reader.mutates
        hit = cache.get(id(fdef))
        if hit is not None and hit[0] is fdef:
            return hit[1]
        a = fdef.args
        params = [p.arg for p in list(a.posonlyargs) + list(a.args) + list(a.kwonlyargs)]
        params += [p.arg for p in (a.vararg, a.kwarg) if p is not None]
        alias = {p: p for p in params}
        nodes = []
        stack = list(fdef.body)
        while stack:
            node = stack.pop()
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
                continue
            nodes.append(node)
            stack.extend(ast.iter_child_nodes(node))
        for _ in range(3):   # local names that refer into a parameter (x = param.sub, for x in param...)
            for node in nodes:
                if isinstance(node, ast.Assign):
                    src = _root(node.value)
                    if src is None and isinstance(node.value, ast.Call) and node.value.args and \
                            _text(node.value.func).split(".")[-1] in ("replace", "copy", "cast"):
                        src = _root(node.value.args[-1] if _text(node.value.func).endswith("cast")
                                    else node.value.args[0])
                    if src in alias:
                        for target in node.targets:
                            for name in ast.walk(target):
                                if isinstance(name, ast.Name):
                                    alias.setdefault(name.id, alias[src])
                elif isinstance(node, (ast.For, ast.comprehension)) and _root(node.iter) in alias:
                    for name in ast.walk(node.target):
                        if isinstance(name, ast.Name):
                            alias.setdefault(name.id, alias[_root(node.iter)])
        out: set = set()
        for node in nodes:
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
                targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
                for target in targets:
                    if isinstance(target, (ast.Attribute, ast.Subscript)) and _root(target) in alias:
                        out.add(alias[_root(target)])
            elif isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Attribute) and _root(func.value) in alias and \
                        func.attr not in _PURE_METHODS:
                    out.add(alias[_root(func.value)])
                passed = [(i, arg) for i, arg in enumerate(node.args)] + [(kw.arg, kw.value) for kw in node.keywords]
                for where, arg in passed:
                    src = _root(arg)
                    if src not in alias or isinstance(arg, ast.Starred):
                        if isinstance(arg, ast.Starred) and _root(arg.value) in alias:
                            out.add(alias[_root(arg.value)])
                        continue
                    name = _text(func)
                    if name.split(".")[-1] in _PURE_FUNCS:
                        continue
                    callee = None
                    if isinstance(func, ast.Name) and depth < 3:
                        binding = fref.mod.binding(func.id)
                        if binding is not None and binding[0] == "def" and isinstance(binding[1], ast.FunctionDef):
                            callee = FuncRef(fref.mod, binding[1])
                    if callee is None:
                        out.add(alias[src])
                        continue
                    sub = self.mutated_params(callee, depth + 1)
                    cparams = [p.arg for p in list(callee.node.args.posonlyargs) + list(callee.node.args.args)]
                    target = cparams[where] if isinstance(where, int) and where < len(cparams) else where
                    if target is None or target in sub or (isinstance(where, int) and where >= len(cparams)):
                        out.add(alias[src])
        cache[id(fdef)] = (fdef, out)
        return out

    def derive(self, fref: FuncRef, key, node, fr: Frame):
        """A zero-argument function (another config function): evaluated once per read, then copied."""
        reader = self.reader
        fdef = fref.node
        snap = reader.derived.get(key)
        if snap is None:
            if key in reader.active:
                return self.unknown(f"derivation cycle: {fdef.name}() depends on itself", node, fr.mod)
            if self.depth >= MAX_CALL_DEPTH:
                return self.unknown(f"derivations nested more than {MAX_CALL_DEPTH} deep are not followed",
                                    node, fr.mod)
            reader.active.add(key)
            saved = (self.depth, self.site, self.stack)
            self.depth, self.site, self.stack = self.depth + 1, _SENTINEL, set()
            try:
                try:
                    local = self.bind(fref, [], {}, node, fr)
                    self.exec_block(fdef.body, Frame(fref.mod, local))
                    value = None
                except _Return as ret:
                    value = ret.value
                except _Uncertain as unc:
                    value = unc.unknown
                except _Raise as exc:
                    value = _Raised(exc.unknown)
            finally:
                self.depth, self.site, self.stack = saved
                reader.active.discard(key)
            snap = value if isinstance(value, _Raised) else self.copy(value, _SENTINEL, None)
            reader.derived[key] = snap
        site = self.here(node, fr.mod)
        if isinstance(snap, _Raised):
            raise _Raise(self.copy(snap.unknown, site, self.top.path))
        if self.depth == 0 and fr.mod is self.top:
            self.derived.append((f"{fref.mod.rel}::{fdef.name}", site[0]))
        if isinstance(snap, _Snap):
            return self.copy(snap.value, site, self.top.path, note=(snap.rel, snap.path))
        return self.copy(snap, site, self.top.path)

    def bind(self, fref: FuncRef, args, kwargs, node, fr: Frame) -> dict:
        fdef = fref.node
        a = fdef.args
        positional = list(a.posonlyargs) + list(a.args)
        names = {p.arg for p in a.args} | {p.arg for p in a.kwonlyargs}
        local: dict = {}

        def type_error(msg: str):
            return _Raise(self.unknown(f"{fdef.name}() raises TypeError: {msg}", node, fr.mod))

        for i, p in enumerate(positional):
            if i < len(args):
                local[p.arg] = args[i]
        extra = args[len(positional):]
        if a.vararg is not None:
            local[a.vararg.arg] = tuple(extra)
        elif extra:
            raise type_error(f"takes {len(positional)} positional arguments but {len(args)} were given")
        spill: dict = {}
        for key, value in kwargs.items():
            if key in names:
                if key in local:
                    raise type_error(f"got multiple values for argument '{key}'")
                local[key] = value
            elif a.kwarg is not None:
                spill[key] = value
            else:
                raise type_error(f"got an unexpected keyword argument '{key}'")
        if a.kwarg is not None:
            local[a.kwarg.arg] = spill
        dframe = fref.closure or Frame(fref.mod, {})
        first_default = len(positional) - len(a.defaults)
        for i, p in enumerate(positional):
            if p.arg not in local:
                if i >= first_default:
                    local[p.arg] = self.eval(a.defaults[i - first_default], dframe)
                else:
                    raise type_error(f"missing required argument '{p.arg}'")
        for p, default in zip(a.kwonlyargs, a.kw_defaults):
            if p.arg not in local:
                if default is None:
                    raise type_error(f"missing required keyword argument '{p.arg}'")
                local[p.arg] = self.eval(default, dframe)
        return local

    def copy(self, value, site, file, memo=None, depth: int = 0, note=None):
        """Deep copy of a derived value; every position becomes ``site`` (the call in this function).

        ``note`` (module rel, path): unknowns of that snapshot's own function get "(at rel:line)".
        """
        tv = type(value)
        if tv in _LITERAL_TYPES:
            return value
        if memo is None:
            memo = {}
        if tv is U:
            if site is None:
                return value
            reason = value.reason
            if note is not None and not value.noted and value.line > 0 and value.file == note[1]:
                reason = f"{reason} (at {note[0]}:{value.line})"
            return U(reason, site[0], site[1], file or value.file, True)
        if isinstance(value, U):  # SpecPart, LayerCount, TailFqns: the same, placed at the call here
            if site is None:
                return value
            where = (site[0], site[1], file or value.file)
            if tv is TailFqns:
                return TailFqns(value.reason, *where, {**value.call, "line": site[0], "col": site[1],
                                                       "file": file or value.file})
            if tv is LayerCount:
                return LayerCount(value.reason, *where, value.name, value.flavor)
            if tv is SpecPart:
                return SpecPart(value.reason, *where, value.name, value.flavor, value.part)
            return U(value.reason, *where, True)
        if depth > MAX_VALUE_DEPTH:
            return U("value nested too deeply to copy", *(site or _SENTINEL), file or self.top.path)
        if tv is Obj:
            if id(value) in memo:
                return memo[id(value)]
            new = Obj(value.cls, value.ref, None, value.kind, value.ref_mod)
            new.module = value.module
            memo[id(value)] = new
            new.rest = self.copy(value.rest, site, file, memo, depth + 1, note) if value.rest is not None else None
            for key, item in value.fields.items():
                new.fields[key] = self.copy(item, site, file, memo, depth + 1, note)
            new.pos = dict(value.pos) if site is None else dict.fromkeys(value.pos, site)
            return new
        if tv in (list, tuple, dict):
            self.reader.spent += len(value)     # copies count against the file's budget
            if self.reader.spent > self.reader.budget:
                raise _Limit("the evaluation budget for this file is spent (it grows with the file's size)")
        if tv is list:
            if id(value) in memo:
                return memo[id(value)]
            out: list = []
            memo[id(value)] = out
            out.extend(self.copy(item, site, file, memo, depth + 1, note) for item in value)
            return out
        if tv is tuple:
            return tuple(self.copy(item, site, file, memo, depth + 1, note) for item in value)
        if tv is dict:
            if id(value) in memo:
                return memo[id(value)]
            out_d: dict = {}
            memo[id(value)] = out_d
            for key, item in value.items():
                out_d[key] = self.copy(item, site, file, memo, depth + 1, note)
            return out_d
        return value

    # -- library functions ---------------------------------------------------------
    def special(self, dotted: str, orig: str, args, kwargs, kwpos, star, node, fr: Frame):
        mod = fr.mod
        if dotted.endswith(".__post_init__") and ".Config." in dotted and _is_class_name(dotted.split(".")[-3]):
            # a base config's __post_init__ (Trainer.Config.__post_init__(self)): at b5bcd76c6 these
            # only validate (torchtitan/trainer.py:118, config/configs.py:54,259,306)
            return None
        if dotted in _REFLECTION or dotted.rpartition(".")[2] in ("fields", "asdict") and \
                dotted.startswith("dataclasses."):
            return self.unknown(f"reflection: {orig}() is not followed", node, mod)
        if dotted in ("dataclasses.replace",):
            if star is not None:
                return star
            if not args:
                raise _Raise(self.unknown("replace() raises TypeError: missing the object", node, mod))
            base = self.force(args[0], node, fr)
            if isinstance(base, Obj):
                new = Obj(base.cls, base.ref, base.rest, base.kind, base.ref_mod)
                new.module = base.module
                new.fields = dict(base.fields)
                new.pos = dict(base.pos)
            elif isinstance(base, U):
                new = Obj(None, rest=base)
            else:
                return self.unknown(f"replace() of {_text(node.args[0]) if node.args else 'a value'}, "
                                    "not a known config", node, mod)
            for key, value in kwargs.items():
                new.fields[key] = value
                new.pos[key] = kwpos.get(key) or self.here(node, mod)
            return new
        if dotted == "copy.deepcopy" and args:
            return self.copy(args[0], None, None)
        if dotted == "copy.copy" and args:
            base = args[0]
            if isinstance(base, Obj):
                new = Obj(base.cls, base.ref, base.rest, base.kind, base.ref_mod)
                new.module = base.module
                new.fields, new.pos = dict(base.fields), dict(base.pos)
                return new
            if isinstance(base, (list, dict)):
                return type(base)(base)
            return base
        if dotted == "typing.cast" and len(args) == 2:
            return args[1]
        if dotted == TAIL_FQNS:
            return self.tail_fqns(orig, args, kwargs, star, node, fr)
        if dotted in ("os.getenv", "os.environ.get", "os.environ.__getitem__"):
            return self.unknown(f"{orig}() reads the environment at run time", node, mod)
        if dotted == "functools.partial":
            return self.unknown("functools.partial objects are not followed", node, mod)
        if dotted in ("os.path.join", "posixpath.join") or dotted.startswith("math."):
            values = [self.force(a, node, fr) for a in args]
            for value in values:
                if isinstance(value, U):
                    return value
            if star is not None or kwargs:
                return self.unknown(f"{orig}() with keyword arguments", node, mod)
            if dotted.endswith("path.join"):
                if all(isinstance(v, str) for v in values) and values:
                    import posixpath

                    return posixpath.join(*values)
                return self.unknown(f"{orig}() of values that are not strings", node, mod)
            func = _MATH.get(dotted[5:])
            if func is None or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
                return self.unknown(f"{orig}() is not followed", node, mod)
            if any(abs(v) > MAX_INT for v in values):
                return self.unknown(f"{orig}() of numbers beyond {MAX_INT:.0e}", node, mod)
            try:
                result = func(*values)
            except (ArithmeticError, ValueError, TypeError) as exc:
                raise _Raise(self.unknown(f"{orig}() raises {type(exc).__name__}", node, mod)) from None
            if isinstance(result, int) and abs(result) > MAX_INT:
                return self.unknown(f"{orig}() beyond {MAX_INT:.0e}", node, mod)
            return result
        return NotImplemented

    def tail_fqns(self, orig: str, args, kwargs, star, node, fr: Frame):
        """torchtitan's ``nvfp4_bf16_tail_fqns(num_layers, bf16_tail_fraction)``, recorded, not run: its list
        or its ValueError is the rules' to decide (a TailFqns). Its arguments must be literal (the layer count
        may be ``len(<model spec>.model.layers)``); otherwise it is an ordinary unknown."""
        mod = fr.mod
        names = ("num_layers", "bf16_tail_fraction")
        if star is not None or len(args) > 2 or set(kwargs) - set(names[len(args):]) or \
                len(args) + len(kwargs) != 2:
            return self.unknown(f"{orig}() with these arguments is not followed", node, mod)
        values = dict(zip(names, args))
        values.update(kwargs)
        n = self.force(values["num_layers"], node, fr)
        f = self.force(values["bf16_tail_fraction"], node, fr)
        why = self.unknown(f"{_text(node)}: torchtitan computes this list (or refuses the fraction) from the "
                           "layer count; the NVFP4 rules decide it", node, mod)
        call = {"function": "nvfp4_bf16_tail_fqns", "num_layers": None, "layers_of": None,
                "bf16_tail_fraction": None, "line": why.line, "col": why.col, "file": why.file}
        if isinstance(n, LayerCount):
            call["layers_of"] = {"name": n.name, "flavor": n.flavor}
        elif isinstance(n, int) and not isinstance(n, bool):
            call["num_layers"] = n
        else:
            return n if isinstance(n, U) else self.unknown(f"{orig}() of a layer count that is not an integer",
                                                           node, mod)
        if isinstance(f, (int, float)) and not isinstance(f, bool) and math.isfinite(f):
            call["bf16_tail_fraction"] = f
        else:
            return f if isinstance(f, U) else self.unknown(f"{orig}() of a fraction that is not a finite number",
                                                           node, mod)
        return TailFqns(why.reason, why.line, why.col, why.file, call)

    def builtin(self, name: str, args, kwargs, star, node, fr: Frame):
        mod = fr.mod
        if name in _REFLECTION:
            why = self.unknown(f"reflection: {name}() is not followed", node, mod)
            if name in ("setattr", "delattr") and args:
                self.poison(args[0], why)
            return why
        if star is not None:
            return star
        if name in ("print",):
            return None
        if name in ("isinstance", "issubclass", "callable", "id", "hash", "iter", "next", "open", "input",
                    "map", "filter", "object", "property", "staticmethod", "classmethod", "format", "set",
                    "frozenset"):
            return self.unknown(f"{name}() is not followed", node, mod)
        if name in ("ValueError", "TypeError", "KeyError", "RuntimeError", "AssertionError",
                    "NotImplementedError", "Exception"):
            return self.unknown(f"{name}(...) is an exception object", node, mod)
        if name in ("list", "tuple", "sorted", "reversed", "sum", "any", "all", "enumerate"):
            if len(args) != 1 or (kwargs and name != "sorted"):
                if not args and name in ("list", "tuple"):
                    return [] if name == "list" else ()
                return self.unknown(f"{name}() with these arguments is not followed", node, mod)
            seq = self.iterate(args[0], node.args[0] if node.args else node, fr)
            if isinstance(seq, U):
                return seq
            if name == "list":
                return list(seq)
            if name == "tuple":
                return tuple(seq)
            if name == "enumerate":
                return list(enumerate(seq))
            if name == "reversed":
                return list(reversed(seq))
            items = [self.force(x, node, fr) for x in seq]
            for item in items:
                if isinstance(item, U):
                    return item
            if not all(_literal_ok(x) for x in items):
                return self.unknown(f"{name}() of values that are not literals", node, mod)
            try:
                if name == "sorted":
                    if kwargs:
                        return self.unknown("sorted() with a key is not followed", node, mod)
                    return sorted(items)
                if name == "sum":
                    if not all(isinstance(x, (int, float)) for x in items):
                        return self.unknown("sum() of non-numbers", node, mod)
                    total = sum(items)
                    return total if abs(total) <= MAX_INT else self.unknown("sum beyond bounds", node, mod)
                return any(items) if name == "any" else all(items)
            except TypeError as exc:
                raise _Raise(self.unknown(f"{name}() raises TypeError: {exc}", node, mod)) from None
        if name == "zip":
            seqs = []
            for i, a in enumerate(args):
                seq = self.iterate(a, node, fr)
                if isinstance(seq, U):
                    return seq
                seqs.append(seq)
            return list(zip(*seqs))
        if name == "dict":
            out: dict = {}
            if args:
                base = self.force(args[0], node, fr)
                if isinstance(base, dict):
                    out.update(base)
                elif isinstance(base, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2
                                                             for p in base):
                    for k, v in base:
                        if not isinstance(k, _LITERAL):
                            return self.unknown("dict() key is not a literal", node, mod)
                        out[k] = v
                else:
                    return base if isinstance(base, U) else self.unknown("dict() of an unknown value", node, mod)
            out.update(kwargs)
            return out
        values = [self.force(a, node, fr) for a in args]
        if name == "len" and len(values) == 1 and isinstance(values[0], SpecPart) and values[0].part == "layers" \
                and isinstance(values[0].name, str) and isinstance(values[0].flavor, str) and not kwargs:
            part = values[0]
            why = self.unknown(f"{_text(node)}: the layer count of {part.name} {part.flavor} (the model spec's "
                               "internals are not read statically)", node, mod)
            return LayerCount(why.reason, why.line, why.col, why.file, part.name, part.flavor)
        for value in values:
            if isinstance(value, U):
                return value
        if kwargs or not all(_literal_ok(v) for v in values):
            return self.unknown(f"{name}() of values that are not literals", node, mod)
        try:
            if name == "len":
                return len(values[0])
            if name in ("min", "max"):
                seq = values[0] if len(values) == 1 else values
                return min(seq) if name == "min" else max(seq)
            if name == "range":
                if not all(isinstance(v, int) for v in values) or len(range(*values)) > MAX_ITEMS:
                    return self.unknown("range() too long or of non-integers", node, mod)
                return list(range(*values))
            if name == "abs":
                return abs(values[0])
            if name == "round":
                return round(*values)
            if name == "divmod":
                return divmod(*values)
            if name == "pow":
                reason = _arith_guard(ast.Pow(), values[0], values[1]) if len(values) == 2 else None
                if reason or len(values) != 2:
                    return self.unknown(reason or "pow() with a modulus", node, mod)
                return values[0] ** values[1]
            if name in ("int", "float", "bool", "str", "repr"):
                if values and isinstance(values[0], str) and len(values[0]) > 100 and name != "str":
                    return self.unknown(f"{name}() of a long string", node, mod)
                if name == "int" and values and isinstance(values[0], float) and not math.isfinite(values[0]):
                    raise _Raise(self.unknown("int() of a non-finite float raises", node, mod))
                result = {"int": int, "float": float, "bool": bool, "str": str, "repr": repr}[name](*values)
                if isinstance(result, int) and not isinstance(result, bool) and abs(result) > MAX_INT:
                    return self.unknown(f"{name}() beyond {MAX_INT:.0e}", node, mod)
                if isinstance(result, str) and len(result) > MAX_SEQ:
                    return self.unknown(f"{name}() result too long", node, mod)
                return result
        except (TypeError, ValueError, ArithmeticError, IndexError) as exc:
            raise _Raise(self.unknown(f"{name}() raises {type(exc).__name__}: {exc}", node, mod)) from None
        return self.unknown(f"{name}() is not followed", node, mod)

    def method(self, m: Method, args, kwargs, star, node, fr: Frame):
        recv, name, mod = m.recv, m.name, fr.mod
        if star is not None:
            return star
        try:
            if isinstance(recv, list):
                if name == "append" and len(args) == 1:
                    if len(recv) >= MAX_ITEMS:
                        return self.unknown("list too long", node, mod)
                    recv.append(args[0])
                    return None
                if name == "extend" and len(args) == 1:
                    seq = self.iterate(args[0], node, fr)
                    if isinstance(seq, U):
                        self.havoc_target(m.recv_node, fr, seq)
                        return None
                    if len(recv) + len(seq) > MAX_ITEMS:
                        self.havoc_target(m.recv_node, fr, self.unknown("list too long", node, mod))
                        return None
                    recv.extend(seq)
                    return None
                if name == "insert" and len(args) == 2 and isinstance(args[0], int):
                    recv.insert(args[0], args[1])
                    return None
                if name == "copy" and not args:
                    return list(recv)
                if name == "clear" and not args:
                    recv.clear()
                    return None
                if name == "pop" and len(args) <= 1:
                    return recv.pop(*args)
                if name in ("index", "count", "remove") and len(args) == 1 and _literal_ok(args[0]) \
                        and all(_literal_ok(x) for x in recv):
                    return getattr(recv, name)(args[0])
                if name in ("sort", "reverse") and not args and not kwargs and all(_literal_ok(x) for x in recv):
                    getattr(recv, name)()
                    return None
            elif isinstance(recv, dict):
                if name == "get" and 1 <= len(args) <= 2:
                    key = self.force(args[0], node, fr)
                    if isinstance(key, U):
                        return key
                    return recv.get(key, args[1] if len(args) == 2 else None)
                if name in ("keys", "values", "items") and not args:
                    return list(getattr(recv, name)())
                if name == "copy" and not args:
                    return dict(recv)
                if name == "update" and len(args) <= 1:
                    if args:
                        other = self.force(args[0], node, fr)
                        if not isinstance(other, dict):
                            why = other if isinstance(other, U) else self.unknown("update() of an unknown value",
                                                                                   node, mod)
                            self.havoc_target(m.recv_node, fr, why)
                            return None
                        recv.update(other)
                    recv.update(kwargs)
                    return None
                if name == "setdefault" and 1 <= len(args) <= 2 and isinstance(args[0], _LITERAL):
                    return recv.setdefault(args[0], args[1] if len(args) == 2 else None)
                if name == "pop" and 1 <= len(args) <= 2 and isinstance(args[0], _LITERAL):
                    return recv.pop(*args)
            elif isinstance(recv, str):
                values = [self.force(a, node, fr) for a in args]
                for value in values:
                    if isinstance(value, U):
                        return value
                if name == "join" and len(values) == 1:
                    seq = self.iterate(values[0], node, fr)
                    if isinstance(seq, U):
                        return seq
                    seq = [self.force(x, node, fr) for x in seq]
                    if not all(isinstance(x, str) for x in seq):
                        return next((x for x in seq if isinstance(x, U)), None) or self.unknown(
                            "join() of values that are not strings", node, mod)
                    result = recv.join(seq)
                    return result if len(result) <= MAX_SEQ else self.unknown("string too long", node, mod)
                if name in _STR_METHODS and not kwargs and all(_literal_ok(v) for v in values):
                    if name == "replace" and len(values) >= 2 and isinstance(values[1], str) and \
                            len(recv) * max(1, len(values[1])) > MAX_SEQ:
                        return self.unknown("string too long", node, mod)
                    if name in ("ljust", "rjust", "center", "zfill") and values and \
                            isinstance(values[0], int) and values[0] > MAX_SEQ:
                        return self.unknown("string too long", node, mod)
                    return getattr(recv, name)(*values)
                if name == "format":
                    kw = {k: self.force(v, node, fr) for k, v in kwargs.items()}
                    if re.search(r"\{[^{}]*[:!]", recv) or not all(_literal_ok(v) for v in values) or \
                            not all(_literal_ok(v) for v in kw.values()):
                        return self.unknown("str.format() with specs or non-literals is not followed", node, mod)
                    result = recv.format(*values, **kw)
                    return result if len(result) <= MAX_SEQ else self.unknown("string too long", node, mod)
            elif isinstance(recv, tuple):
                if name in ("index", "count") and len(args) == 1 and _literal_ok(args[0]) and _literal_ok(recv):
                    return getattr(recv, name)(args[0])
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise _Raise(self.unknown(f"{name}() raises {type(exc).__name__}", node, mod)) from None
        why = self.unknown(f"method {type(recv).__name__}.{name}() is not followed", node, mod)
        if name in _MUTATING:
            self.havoc_target(m.recv_node, fr, why)
        return why

    # -- the rebuild torchtitan does ---------------------------------------------------
    def rebuild(self, obj: Obj, fdef, mod: Module) -> None:
        """Run the returned config class's ``__post_init__`` on the final values.

        torchtitan's ConfigManager hands the loaded config to ``tyro.cli(default=...)``,
        which constructs it again, so ``__post_init__`` sees the values the function
        returns (torchtitan/config/manager.py, parse_args). It matters for RL, where
        ``Controller.Config.__post_init__`` writes the trainer's token counts from the
        batcher (torchtitan/experiments/rl/controller.py). The section classes'
        ``__post_init__`` only validate at b5bcd76c6 and are not run.
        """
        cls = obj.ref if isinstance(obj.ref, ClassRef) else None
        kind = self.obj_kind(obj)
        if cls is None and isinstance(obj.ref, Sym) and kind == "controller":
            resolved = self.resolve(obj.ref)
            cls = resolved if isinstance(resolved, ClassRef) else None
            if cls is None:
                trainer = obj.fields.get("trainer")
                if isinstance(trainer, Obj):
                    trainer.fields["training"] = U(
                        f"{obj.cls}.__post_init__ (which may set the trainer's training values) is not in the "
                        "checkout being read", *mod.pos(fdef), mod.path)
                return
        if cls is None:
            return
        post = next((s for s in cls.node.body if isinstance(s, ast.FunctionDef) and s.name == "__post_init__"), None)
        if post is None or len(post.args.args) != 1:
            return
        saved = (self.depth, self.site)
        self.depth, self.site = self.depth + 1, mod.pos(fdef)
        try:
            self.exec_block(post.body, Frame(cls.mod, {post.args.args[0].arg: obj}))
        except _Return:
            pass
        except _Uncertain as unc:
            self.poison(obj, unc.unknown)
        finally:
            self.depth, self.site = saved

    # -- kinds -----------------------------------------------------------------------
    def symbolic(self, node, mod: Module, hops: int = 0):
        """A class expression (annotation, base class) as a Sym/ClassRef, without forcing it."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and len(node.value) < 200 and hops < 2:
            try:
                parsed = ast.parse(node.value, mode="eval").body
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return None
            return self.symbolic(parsed, mod, hops + 1)
        if isinstance(node, ast.Name):
            return self.global_value(mod, node.id, node, Frame(mod, {}))
        if isinstance(node, ast.Attribute) and hops < 12:
            base = self.symbolic(node.value, mod, hops + 1)
            if isinstance(base, (Sym, ClassRef, ModuleVal)):
                return self.get_attr(base, node.attr, node, Frame(mod, {}))
            return None
        if isinstance(node, ast.Constant) and node.value is None:
            return None
        return None

    def class_kind(self, display: str | None, ref, hops: int = 0) -> str | None:
        parts = display.split(".") if display else []
        if len(parts) >= 2 and parts[-1] == "Config":
            owner = parts[-2]
            if owner.endswith("Trainer"):
                return "trainer"
            if owner.endswith("Controller"):
                return "controller"
        if hops > 6:
            return None
        cls = ref
        if isinstance(ref, Sym) and _is_class_name(ref.parts[-1]):
            cls = self.resolve(ref)
        if isinstance(cls, ClassRef):
            for base in cls.node.bases:
                value = self.symbolic(base, cls.mod)
                kind = self.class_kind(_display(value), value, hops + 1)
                if kind:
                    return kind
        return None

    def obj_kind(self, obj: Obj) -> str | None:
        if obj.kind is None:
            kind = self.class_kind(obj.cls, obj.ref)
            if kind is None:
                trainer = obj.fields.get("trainer")
                if isinstance(trainer, Obj) and self.obj_kind(trainer) == "trainer":
                    kind = "controller"
                elif any(f in obj.fields for f in ("parallelism", "training", "model_spec")):
                    kind = "trainer"
            obj.kind = kind or ""
        return obj.kind or None


def _display(value) -> str | None:
    if isinstance(value, Sym):
        return value.orig
    if isinstance(value, ClassRef):
        return value.display
    return None


def _root(expr):
    """The name an attribute / subscript chain starts from (``a`` of ``a.b[0].c``), or None."""
    for _ in range(64):
        if isinstance(expr, (ast.Attribute, ast.Subscript)):
            expr = expr.value
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and \
                expr.func.attr in ("items", "values", "keys", "get", "copy"):
            expr = expr.func.value
        else:
            break
    return expr.id if isinstance(expr, ast.Name) else None


_PURE_METHODS = {"get", "items", "keys", "values", "copy", "index", "count", "startswith", "endswith", "split",
                 "rsplit", "strip", "lower", "upper", "format", "join", "replace", "traverse", "__contains__"}
_PURE_FUNCS = {"replace", "cast", "len", "isinstance", "issubclass", "getattr", "hasattr", "fields", "asdict",
               "dict", "list", "tuple", "set", "frozenset", "sorted", "min", "max", "sum", "any", "all", "zip",
               "enumerate", "str", "int", "float", "bool", "repr", "print", "type", "id", "deepcopy", "range",
               "reversed", "format", "iter", "next", "hash", "callable"}


class _Uncertain(Exception):
    """Control flow (return, break) depends on something unknown: the function's result is unknown."""

    def __init__(self, unknown: U):
        self.unknown = unknown


def _jump(stmts, loop_jumps: bool) -> str | None:
    """"return" (or "break"/"continue" leaving ``stmts``) found in them, outside nested defs."""
    stack = [(s, False) for s in stmts]
    while stack:
        node, in_loop = stack.pop()
        if isinstance(node, ast.Return):
            return "return"
        if isinstance(node, (ast.Break, ast.Continue)) and loop_jumps and not in_loop:
            return "break" if isinstance(node, ast.Break) else "continue"
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        inner = in_loop or isinstance(node, (ast.For, ast.While, ast.AsyncFor))
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt) or isinstance(child, (ast.excepthandler, ast.match_case)):
                stack.append((child, inner))
    return None


class _Stop(Exception):
    def __init__(self, unknown: U):
        self.unknown = unknown


class _Raised:
    __slots__ = ("unknown",)

    def __init__(self, unknown: U):
        self.unknown = unknown


def _as_load(target):
    """An assignment target read as an expression (for augmented assignment)."""
    if isinstance(target, ast.Name):
        return ast.copy_location(ast.Name(target.id, ast.Load()), target)
    if isinstance(target, ast.Attribute):
        return ast.copy_location(ast.Attribute(target.value, target.attr, ast.Load()), target)
    if isinstance(target, ast.Subscript):
        return ast.copy_location(ast.Subscript(target.value, target.slice, ast.Load()), target)
    return target


def _only_raises(stmts) -> bool:
    """A branch whose only effect is to raise (docstrings, pass, asserts aside)."""
    if not stmts:
        return False
    for stmt in stmts[:-1]:
        if not isinstance(stmt, (ast.Pass, ast.Assert)) and not (
                isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            return False
    return isinstance(stmts[-1], ast.Raise)


def _required(fdef) -> int:
    a = fdef.args
    positional = len(a.posonlyargs) + len(a.args)
    return positional - len(a.defaults) + sum(1 for d in a.kw_defaults if d is None)


_YIELD = re.compile(r"\byield\b")


def _is_generator(fdef, mod=None) -> bool:
    """Whether a function body yields (read from its text; a word in a string errs on the safe side)."""
    if mod is not None and getattr(fdef, "end_lineno", None):
        text = mod.line_slice(fdef.lineno, fdef.end_lineno)
        if not _YIELD.search(text):
            return False
    stack = list(fdef.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(node))
    return False


def _arith_guard(op, a, b) -> str | None:
    """Why ``a op b`` is refused (too large to be a config value, or too costly), or None."""
    if isinstance(op, ast.Pow):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
            if isinstance(b, int) and b > 0 and abs(a) > 1:
                if isinstance(a, int) and b * math.log2(abs(a)) > 62:
                    return f"exponent too large ({a} ** {b} exceeds {MAX_INT:.0e})"
                if isinstance(a, float) and b * math.log2(abs(a)) > 1000:
                    return "float exponent overflows"
            return None
        return "** of values that are not numbers"
    if isinstance(op, ast.Mult):
        if isinstance(a, (str, list, tuple)) and isinstance(b, int) or isinstance(b, (str, list, tuple)) and \
                isinstance(a, int):
            seq, n = (a, b) if isinstance(a, (str, list, tuple)) else (b, a)
            if len(seq) * max(n, 0) > (MAX_SEQ if isinstance(seq, str) else MAX_ITEMS):
                return "sequence repetition too long"
        elif isinstance(a, int) and isinstance(b, int) and a.bit_length() + b.bit_length() > 64:
            return f"integer arithmetic beyond {MAX_INT:.0e}"
    if isinstance(op, ast.LShift) and isinstance(b, int) and isinstance(a, int):
        if b > 62 or a.bit_length() + max(b, 0) > 62:
            return f"shift beyond {MAX_INT:.0e}"
    if isinstance(op, ast.Add) and isinstance(a, (str, list, tuple)) and isinstance(b, type(a)):
        if len(a) + len(b) > (MAX_SEQ if isinstance(a, str) else MAX_ITEMS):
            return "sequence too long"
    if isinstance(op, ast.Mod) and isinstance(a, str):
        return "%-formatting is not followed"
    return None


_BINOPS = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b, ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a ** b, ast.LShift: lambda a, b: a << b, ast.RShift: lambda a, b: a >> b,
    ast.BitOr: lambda a, b: a | b, ast.BitXor: lambda a, b: a ^ b, ast.BitAnd: lambda a, b: a & b,
}
_CMPOPS = {
    ast.Eq: lambda a, b: a == b, ast.NotEq: lambda a, b: a != b, ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b, ast.Gt: lambda a, b: a > b, ast.GtE: lambda a, b: a >= b,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}
_MATH_CONSTANTS = {"math.inf": math.inf, "math.nan": math.nan, "math.pi": math.pi, "math.e": math.e,
                   "math.tau": math.tau}
_MATH = {"ceil": math.ceil, "floor": math.floor, "gcd": math.gcd, "lcm": math.lcm,
         "log2": math.log2, "sqrt": math.sqrt, "isqrt": math.isqrt, "log": math.log}
_STR_METHODS = {"strip", "lstrip", "rstrip", "lower", "upper", "split", "rsplit", "replace", "startswith",
                "endswith", "removeprefix", "removesuffix", "title", "capitalize", "count", "find", "rfind",
                "partition", "rpartition", "isdigit", "isalpha", "isalnum", "isupper", "islower", "splitlines",
                "ljust", "rjust", "center", "zfill", "casefold", "swapcase"}


# -----------------------------------------------------------------------------
# From interpreter values to a PySource
# -----------------------------------------------------------------------------
class _Flat:
    MAX_ELEMENTS = 50_000   # values written out per config (HEAD's largest has a few hundred)

    def __init__(self, interp: Interp):
        self.interp = interp
        self.elements = 0
        self.unknown: dict = {}
        self.positions: dict = {}
        self.types: dict = {}
        self.model_module = None
        self.calls: dict = {}   # path -> a TailFqns' call (model.converters[0].fqns)

    def obj(self, obj: Obj, prefix: str, out: dict, depth: int, root: bool = False) -> None:
        if obj.rest is not None:
            self.unknown[prefix] = obj.rest.public()
        if depth > MAX_VALUE_DEPTH:
            self.unknown[prefix] = Unknown("value nested too deeply", 0, 0, self.interp.top.path)
            return
        for name, value in obj.fields.items():
            key = "model" if root and name == "model_spec" else str(name)
            path = f"{prefix}.{key}" if prefix else key
            pos = obj.pos.get(name)
            if pos and pos != _SENTINEL:
                self.positions[path] = pos
            self.value(value, path, key, out, depth + 1)

    def value(self, value, path: str, key: str, out: dict, depth: int) -> None:
        if isinstance(value, U):
            self.unknown[path] = value.public()
        elif isinstance(value, Obj):
            node: dict = {}
            out[key] = node
            if value.cls:
                self.types[path] = value.cls
            if value.kind == "model" and path == "model":
                self.model_module = value.module
            self.obj(value, path, node, depth)
        elif key == "converters" and path.endswith("model.converters") and isinstance(value, (list, tuple)) \
                and value and all(isinstance(item, Obj) and item.rest is None for item in value):
            self.converters(value, path, key, out, depth)
        else:
            plain = self.plain(value, path, depth)
            if isinstance(plain, U):
                self.unknown[path] = plain.public()
            else:
                out[key] = plain

    def converters(self, items, path: str, key: str, out: dict, depth: int) -> None:
        """``model_registry(converters=[...])``: each converter's fields on their own, so that one field that
        cannot be read (``model_compile_enabled=config.compile.enable and ...``) is unknown alone
        (``model.converters[0].model_compile_enabled``) rather than the whole list; a TailFqns is recorded
        in ``calls`` for the NVFP4 rules."""
        self.elements += len(items)
        if self.elements > self.MAX_ELEMENTS:
            self.unknown[path] = U(f"{path} holds more values than a config does ({self.MAX_ELEMENTS:,} in all)",
                                   0, 0, self.interp.top.path).public()
            return
        listed = []
        for i, item in enumerate(items):
            at = f"{path}[{i}]"
            fields: dict = {}
            for name, field in item.fields.items():
                if isinstance(field, FuncRef):
                    continue  # as plain() does: a function is no config value
                got = self.plain(field, f"{at}.{name}", depth + 2)
                if isinstance(got, U):
                    self.unknown[f"{at}.{name}"] = got.public()
                    if isinstance(got, TailFqns):
                        self.calls[f"{at}.{name}"] = dict(got.call)
                else:
                    fields[name] = got
            listed.append(fields)
            if item.cls:
                self.types[at] = item.cls
        out[key] = listed

    def plain(self, value, path: str, depth: int):
        if isinstance(value, _LITERAL):
            return value
        if depth > MAX_VALUE_DEPTH:
            return U("value nested too deeply", 0, 0, self.interp.top.path)
        if isinstance(value, U):
            return value
        if isinstance(value, (list, tuple, dict)):
            self.elements += len(value)
            if self.elements > self.MAX_ELEMENTS:
                return U(f"{path} holds more values than a config does ({self.MAX_ELEMENTS:,} in all)", 0, 0,
                         self.interp.top.path)
        if isinstance(value, (list, tuple)):
            out = []
            for i, item in enumerate(value):
                got = self.plain(item, f"{path}[{i}]", depth + 1)
                if isinstance(got, U):
                    return got
                out.append(got)
            return out
        if isinstance(value, dict):
            out_d = {}
            for k, item in value.items():
                got = self.plain(item, f"{path}.{k}", depth + 1)
                if isinstance(got, U):
                    return got
                out_d[k if isinstance(k, str) else str(k)] = got
            return out_d
        if isinstance(value, Sym) and (_is_constant_name(value.parts[-1]) or value.dotted in _MATH_CONSTANTS):
            # an imported constant stored as is: its value, when it is a literal of the checkout
            interp = self.interp
            forced = interp.force(value, interp.top.tree, Frame(interp.top, {}))
            if isinstance(forced, U):
                return U(forced.reason, 0, 0, forced.file, True)   # placed at its holder by _build
            if not isinstance(forced, Sym):
                return self.plain(forced, path, depth + 1)
        if isinstance(value, Obj):
            if value.rest is not None:
                return value.rest
            if value.cls:  # the class of each object, however deep in lists and dicts ("datasets[0].dataset")
                self.types[path] = value.cls
            out_o = {}
            for k, item in value.fields.items():
                if isinstance(item, FuncRef):
                    # a function the object holds (a data source's sample_processor) is no config value:
                    # left out (null), it does not make the object's other fields, or its list, unknown
                    continue
                got = self.plain(item, f"{path}.{k}", depth + 1)
                if isinstance(got, U):
                    return got
                out_o[k] = got
            return out_o
        site = self.interp.site or (0, 0)
        what = _display(value) or getattr(getattr(value, "node", None), "name", None) or type(value).__name__
        return U(f"{path} is set to {what}, an object that is not a literal", site[0], site[1],
                 self.interp.top.path)


def _nearest(positions: dict, key: str):
    parts = key.split(".") if key else []
    for cut in range(len(parts), 0, -1):
        pos = positions.get(".".join(parts[:cut]))
        if pos:
            return pos
    return None


def _build(interp: Interp, value, mod: Module, fdef, file: str, comments: list) -> PySource:
    flat = _Flat(interp)
    data: dict = {}
    nested = None
    outer = None
    def_line, def_col = mod.pos(fdef)
    if isinstance(value, Obj) and interp.obj_kind(value) == "controller":
        nested = "trainer"
        trainer = value.fields.get("trainer")
        outer_flat = _Flat(interp)
        outer = {}
        rest = {k: v for k, v in value.fields.items() if k != "trainer"}
        shell = Obj(value.cls)
        shell.fields = rest
        outer_flat.obj(shell, "", outer, 0)
        if isinstance(trainer, Obj):
            flat.obj(trainer, "", data, 0, root=True)
            if "model_spec" not in trainer.fields and "model_spec" in value.fields:
                pos = value.pos.get("model_spec")
                if pos and pos != _SENTINEL:
                    flat.positions["model"] = pos
                flat.value(value.fields["model_spec"], "model", "model", data, 1)
            if interp.obj_kind(trainer) and trainer.cls:
                flat.types[""] = trainer.cls
        elif isinstance(trainer, U):
            flat.unknown[""] = trainer.public()
        elif value.rest is not None:
            flat.unknown[""] = value.rest.public()
    elif isinstance(value, Obj):
        flat.obj(value, "", data, 0, root=True)
        if value.cls:
            flat.types[""] = value.cls
    elif isinstance(value, U):
        flat.unknown[""] = value.public()
    else:
        what = "None" if value is None else type(value).__name__
        flat.unknown[""] = Unknown(f"{fdef.name}() returns {what}, not a trainer config", def_line, def_col, file)
    # the public Unknowns name the file as the user gave it; one met while following a shared
    # object (a constant of another module) points at where this function sets its holder
    unknown = {}
    for key, u in flat.unknown.items():
        if u.file == mod.path:
            u = u._replace(file=file)
        if u.line <= 0:
            line, col = _nearest(flat.positions, key) or (def_line, def_col)
            u = u._replace(line=line, col=col, file=file)
        unknown[key] = u
    return PySource(file=file, function=fdef.name, text=mod.text, data=data, unknown=unknown,
                    positions=flat.positions, comments=comments, def_line=def_line, def_col=def_col,
                    nested_under=nested, types=flat.types, model_module=flat.model_module, outer=outer,
                    derived_from=list(interp.derived),
                    calls={k: {**c, "file": file if c.get("file") == mod.path else c.get("file")}
                           for k, c in flat.calls.items()})


# -----------------------------------------------------------------------------
# Public API
# -----------------------------------------------------------------------------
def _stack_depth() -> int:
    depth = 0
    frame = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back
    return depth


class Reader:
    """State shared by the functions of one read: the checkout, derivations already evaluated."""

    def __init__(self, root: str | None, search_path=None):
        self.checkout = Checkout(root, search_path)
        self.derived: dict = {}
        self.active: set = set()
        self.resolved: dict = {}
        self.mutates: dict = {}     # id(FunctionDef) -> (node, params it may write into)
        self.spent = 0
        self.budget = MAX_STEPS     # raised to grow with the file's size by read_registry
        # each nesting level of the interpreter costs a few Python frames: stay well inside the limit
        room = sys.getrecursionlimit() - _stack_depth() - 120
        self.max_nest = max(16, min(300, room // 6))


class RegistryFile:
    """Every config function of one registry file, read statically."""

    def __init__(self, path: str):
        self.path = path
        self.text = ""
        self.root: str | None = None
        self.functions: dict = {}     # name -> PySource, in file order
        self.skipped: list = []       # (name, why) for top-level functions that are not config functions
        self.error: InputError | None = None
        self._reader: Reader | None = None
        self._module: Module | None = None
        self._comments: list = []

    def __repr__(self) -> str:
        return f"RegistryFile({self.path!r}, {len(self.functions)} functions, error={self.error!r})"


def _read_text(path: str) -> str:
    """A registry's text: a regular file only (a FIFO, device or socket is refused before it is opened),
    at most MAX_BYTES read (source.read_bytes)."""
    if os.path.isdir(path):
        raise InputError("ML001", "is a directory, not a Python file")
    return decode_python(read_bytes(path, MAX_BYTES))


def _function_comments(comments: list, fdef, module_ranges: list) -> list:
    start = min([fdef.lineno] + [d.lineno for d in fdef.decorator_list])
    end = getattr(fdef, "end_lineno", None) or fdef.lineno
    out = []
    for comment in comments:
        line = comment[0]
        if start <= line <= end:
            out.append(comment)
        elif "meshlint:" in comment[2] and not any(a <= line <= b for a, b in module_ranges):
            out.append(comment)
    return out


_CALLED = re.compile(r"\b([A-Za-z_]\w*)\s*\(")


def _topo_order(functions: list, mod: Module) -> list:
    """Callees first (iterative DFS), so a chain of derivations written in any order stays shallow."""
    names = {f.name: f for f in functions}
    calls: dict = {}
    for f in functions:
        body = mod.line_slice(f.lineno + 1, f.end_lineno or f.lineno)
        calls[f.name] = [n for n in set(_CALLED.findall(body)) if n in names and n != f.name]
    order: list = []
    state: dict = {}
    for f in functions:
        if f.name in state:
            continue
        stack = [(f.name, iter(calls[f.name]))]
        state[f.name] = 1
        while stack:
            name, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                order.append(names[name])
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter(calls[nxt])))
    return order


def _decorated(fdef) -> str | None:
    for dec in fdef.decorator_list:
        name = _text(dec.func if isinstance(dec, ast.Call) else dec)
        if name not in _TRANSPARENT_DECORATORS:
            return name
    return None


def _evaluate_top(reader: Reader, mod: Module, fdef):
    """Run one top-level function at depth 0 (positions real); never raises."""
    interp = Interp(reader, mod)
    line, col = mod.pos(fdef)
    try:
        decorator = _decorated(fdef)
        if decorator:
            return U(f"{fdef.name}() is decorated by @{decorator}, which may replace it: not followed",
                     line, col, mod.path), interp
        local = interp.bind(FuncRef(mod, fdef), [], {}, fdef, Frame(mod, {}))
        try:
            interp.exec_block(fdef.body, Frame(mod, local))
            value = None
        except _Return as ret:
            value = ret.value
        except _Uncertain as unc:
            value = unc.unknown
        if isinstance(value, Obj):
            interp.rebuild(value, fdef, mod)
    except _Raise as exc:
        interp.raised = True
        value = U(f"{fdef.name}() raises when run: {exc.unknown.reason}", exc.unknown.line, exc.unknown.col,
                  exc.unknown.file)
    except _Limit as exc:
        interp.limited = True
        value = U(f"{fdef.name}() is not followed: {exc}", line, col, mod.path)
    except Exception as exc:   # never a traceback: an interpreter bug is an Unknown for this function
        interp.limited = True
        value = U(f"{fdef.name}() could not be read statically ({type(exc).__name__}: {exc})", line, col, mod.path)
    return value, interp


def _classify(interp: Interp, mod: Module, fdef) -> tuple[str, str]:
    """("config" | "maybe" | "skip", why) from the signature alone."""
    if isinstance(fdef, ast.AsyncFunctionDef):
        return "skip", "async function: torchtitan calls config functions synchronously"
    if fdef.name.startswith("_"):
        return "skip", "private helper (leading underscore): torchtitan lists only public config functions"
    required = _required(fdef)
    if required:
        return "skip", f"takes {required} required argument(s): torchtitan calls a config function with none"
    if fdef.returns is None:
        return "maybe", ""
    try:
        ann = interp.symbolic(fdef.returns, mod)
    except Exception:   # an odd annotation: decide from what the function returns
        return "maybe", ""
    if isinstance(fdef.returns, ast.Constant) and fdef.returns.value is None:
        return "skip", "returns None, not a trainer config"
    display = _display(ann)
    try:
        kind = interp.class_kind(display, ann)
    except Exception:
        kind = None
    if kind in ("trainer", "controller"):
        return "config", display or ""
    if isinstance(ann, Builtin) or (isinstance(fdef.returns, ast.Name) and fdef.returns.id in _BUILTINS):
        return "skip", f"returns {fdef.returns.id if isinstance(fdef.returns, ast.Name) else 'a builtin'}, " \
                       "not a trainer config"
    if isinstance(ann, ClassRef) or (display and display.endswith(".Config")):
        return "skip", f"returns {display}, not a trainer config"
    return "maybe", display or ""


def read_registry(path: str, text: str | None = None, root: str | None = None,
                  search_path=None) -> RegistryFile:
    """Read every top-level config function of ``path`` statically; never raises.

    ``root``: the checkout root imports of other modules resolve against (default: the
    directory holding the file's top-level package). ``search_path``: more roots, searched
    after it (a torchtitan checkout that a registry outside it imports from).
    """
    rf = RegistryFile(path)
    try:
        if text is None:
            text = _read_text(path)
        elif len(text) > MAX_BYTES:
            raise InputError("ML007", f"file is {len(text):,} characters; a config registry is far smaller")
        rf.text = text
        tree = _parse_text(text, path)
    except InputError as exc:
        rf.error = exc
        return rf
    try:
        _read_functions(rf, path, text, tree, root, search_path)
    except Exception as exc:   # never a traceback, whatever the file holds
        rf.error = InputError("ML005", f"could not read this registry statically ({type(exc).__name__}: {exc})")
    return rf


def _read_functions(rf: RegistryFile, path: str, text: str, tree: ast.Module, root: str | None,
                    search_path=None) -> None:
    apath = os.path.abspath(path)
    if root and not (apath + os.sep).startswith(os.path.abspath(root).rstrip(os.sep) + os.sep):
        # a checkout that does not hold the file (--torchtitan-root for a user's own registry):
        # the file's own package is its root, the checkout is searched after it
        search_path = [root] + list(search_path or [])
        root = None
    root = os.path.abspath(root) if root else infer_root(path)
    rf.root = root
    reader = Reader(root, search_path)
    reader.budget = BUDGET_BASE + BUDGET_PER_BYTE * len(text)
    dotted, is_pkg = _dotted_of(apath, root)
    mod = Module(apath, reader.checkout.rel(apath), dotted, is_pkg, text, tree)
    if dotted:
        reader.checkout.modules[dotted] = mod   # derivations back into this file read this text
    rf._reader, rf._module = reader, mod
    try:
        comments = scan_py_comments(text)
    except Exception:
        comments = []
    rf._comments = comments
    defs = [s for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
    ranges = [(min([s.lineno] + [d.lineno for d in getattr(s, "decorator_list", [])]), s.end_lineno or s.lineno)
              for s in tree.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    probe = Interp(reader, mod)
    decisions = {}
    for fdef in defs:
        try:
            decisions[fdef.name] = _classify(probe, mod, fdef)
        except Exception as exc:
            decisions[fdef.name] = ("maybe", f"{type(exc).__name__}")
    # an unannotated function is evaluated only when something in it looks like a config: a big
    # module of ordinary functions (tests, utilities) is not run through the interpreter
    for fdef in defs:
        if decisions[fdef.name][0] == "maybe" and not _config_like(fdef, mod, decisions):
            decisions[fdef.name] = ("skip", "no return annotation and nothing config-like in its body")
    # evaluate callees first; each result is also the derivation snapshot other functions copy,
    # so a chain written in any order costs one evaluation per function
    results: dict = {}
    for fdef in _topo_order(defs, mod):
        if decisions[fdef.name][0] == "skip":
            continue
        value, interp = _evaluate_top(reader, mod, fdef)
        results[fdef.name] = (value, interp)
        key = (mod.path, fdef.name, fdef.lineno)
        if isinstance(fdef, ast.FunctionDef) and _required(fdef) == 0 and not _decorated(fdef) \
                and key not in reader.derived and not interp.limited:
            try:
                reader.derived[key] = _snapshot(interp, value, mod)
            except Exception:
                pass
    for fdef in defs:
        decision, why = decisions[fdef.name]
        if decision == "skip":
            rf.skipped.append((fdef.name, why))
            continue
        value, interp = results[fdef.name]
        if decision == "maybe":
            kind = None
            try:
                kind = interp.obj_kind(value) if isinstance(value, Obj) else None
            except Exception:
                kind = None
            if kind not in ("trainer", "controller"):
                what = "an unknown value" if isinstance(value, U) else (
                    _display(value) or (value.cls if isinstance(value, Obj) else type(value).__name__))
                rf.skipped.append((fdef.name, f"does not return a trainer config (returns {what})"))
                continue
        try:
            rf.functions[fdef.name] = _build(interp, value, mod, fdef, path,
                                             _function_comments(comments, fdef, ranges))
        except Exception as exc:
            line, col = mod.pos(fdef)
            unknown = {"": Unknown(f"{fdef.name}() could not be read statically ({type(exc).__name__}: {exc})",
                                   line, col, path)}
            rf.functions[fdef.name] = PySource(file=path, function=fdef.name, text=text, data={},
                                               unknown=unknown, positions={}, comments=[], def_line=line,
                                               def_col=col)


def _config_like(fdef, mod: Module, decisions: dict) -> bool:
    text = mod.line_slice(fdef.lineno, fdef.end_lineno or fdef.lineno)
    if "config" in text.lower():
        return True
    bindings = mod.bindings()
    for name in set(_CALLED.findall(text)):
        if decisions.get(name, ("",))[0] == "config":
            return True
        binding = bindings.get(name)
        if binding is not None and binding[0] == "from" and "config" in (binding[1].module or "").lower():
            return True
    return False


def clear_caches() -> None:
    """Forget what earlier reads of this process parsed and evaluated (tests, benchmarks)."""
    _PARSE_CACHE.clear()


def _snapshot(interp: Interp, value, mod: Module):
    """A top-level result kept as the derivation snapshot of its function (nothing mutates it later:
    derivations copy it, with positions moved to the call and unknowns saying where they arose)."""
    if isinstance(value, U):
        value = _noted(value, mod.rel, mod.path)
        return _Raised(value) if interp.raised else value
    return _Snap(value, mod.rel, mod.path)


def _noted(u: U, mod_rel: str, mod_path: str | None = None) -> U:
    if u.noted or u.line <= 0 or (mod_path is not None and u.file != mod_path):
        return u
    return U(f"{u.reason} (at {mod_rel}:{u.line})", u.line, u.col, u.file, True)


class _Snap:
    __slots__ = ("value", "rel", "path")

    def __init__(self, value, rel: str, path: str):
        self.value, self.rel, self.path = value, rel, path


def _available(rf: RegistryFile) -> list:
    names = list(rf.functions)
    if rf._module is not None:
        for name, binding in rf._module.bindings().items():
            if name not in names and not name.startswith("_") and name[:1].islower() and binding[0] == "from":
                names.append(name)
    return names


def _no_function(function: str, where: str, available: list) -> InputError:
    import difflib

    close = difflib.get_close_matches(function, available, n=3, cutoff=0.6)
    help_text = f"did you mean {', '.join(repr(c) for c in close)}?" if close else None
    shown = ", ".join(available[:40]) + (f", ... ({len(available)} in all)" if len(available) > 40 else "")
    return InputError("ML006", f"no config function '{function}' in {where}; available: {shown or 'none'}",
                      help=help_text)


def read_function(path: str, function: str, root: str | None = None, search_path=None) -> PySource:
    """The PySource of one function of ``path``; raises InputError (ML006 when there is no such function)."""
    rf = read_registry(path, root=root, search_path=search_path)
    try:
        return _read_one(rf, path, function, search_path)
    except InputError:
        raise
    except Exception as exc:   # never a traceback
        raise InputError("ML005", f"could not read {function} statically ({type(exc).__name__}: {exc})") from None


def _read_one(rf: RegistryFile, path: str, function: str, search_path) -> PySource:
    if rf.error is not None:
        raise rf.error
    if function in rf.functions:
        return rf.functions[function]
    mod, reader = rf._module, rf._reader
    binding = mod.binding(function) if mod is not None else None
    if binding is not None and binding[0] == "def" and isinstance(binding[1], ast.FunctionDef):
        fdef = binding[1]
        if _required(fdef):
            raise InputError("ML006", f"'{function}' in {path} takes arguments: torchtitan calls a config "
                                      "function with none")
        value, interp = _evaluate_top(reader, mod, fdef)
        if isinstance(value, Obj) and interp.obj_kind(value) in ("trainer", "controller") or (
                isinstance(value, U) and fdef.name.startswith("_")):
            return _build(interp, value, mod, fdef, path, _function_comments(rf._comments, fdef, []))
        raise InputError("ML006", f"'{function}' in {path} does not return a trainer config",
                         help=_no_function(function, path, _available(rf)).help)
    if binding is not None and binding[0] == "from":
        interp = Interp(reader, mod)
        sym = interp.global_value(mod, function, mod.tree, Frame(mod, {}))
        target = interp.resolve(sym) if isinstance(sym, Sym) else None
        if isinstance(target, FuncRef) and target.mod.path != mod.path:
            return read_function(target.mod.path, target.node.name, root=rf._reader.checkout.root_of(
                target.mod.path) or rf.root, search_path=search_path)
    raise _no_function(function, path, _available(rf))


def _supported_modules(checkout: Checkout) -> set:
    """torchtitan's --module shorthands, read from its __init__ files (never imported)."""
    out: set = set()
    for dotted, name in (("torchtitan.models", "_supported_models"),
                         ("torchtitan.experiments", "_supported_experiments")):
        mod = checkout.module(dotted)
        binding = mod.binding(name) if mod is not None else None
        if binding is None or binding[0] != "assign":
            continue
        for node in ast.walk(binding[1].value):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                out.add(node.value)
    return out


def find_config_module(root: str, module_dotted: str, config_name: str) -> tuple[str, str]:
    """(file, function) for ``--module M --config F``; see _find_config_module. Raises InputError only."""
    try:
        return _find_config_module(root, module_dotted, config_name)
    except InputError:
        raise
    except Exception as exc:   # never a traceback
        raise InputError("ML006", f"cannot resolve --module {module_dotted} --config {config_name} "
                                  f"({type(exc).__name__}: {exc})") from None


def _find_config_module(root: str, module_dotted: str, config_name: str) -> tuple[str, str]:
    """(file, function) for ``--module M --config F``, resolved the way torchtitan's ConfigManager does.

    A shorthand listed in torchtitan.models/_supported_models or experiments/_supported_experiments
    is looked up as ``torchtitan.models.M``, ``torchtitan.experiments.M`` then
    ``torchtitan.experiments.rl.examples.M`` (``.config_registry``); anything else is a dotted module,
    ``M.config_registry`` first, then ``M`` itself (torchtitan/config/manager.py, _load_config).
    A function the module imports is followed to the file that defines it.
    """
    checkout = Checkout(root)
    supported = _supported_modules(checkout)
    if module_dotted in supported:
        candidates = [f"{prefix}.{module_dotted}.config_registry" for prefix in (
            "torchtitan.models", "torchtitan.experiments", "torchtitan.experiments.rl.examples")]
    else:
        candidates = [f"{module_dotted}.config_registry", module_dotted]
    path = next((p for p in (checkout.file_of(c) for c in candidates if c) if p), None)
    if path is None:
        import difflib

        close = difflib.get_close_matches(module_dotted, sorted(supported), n=3, cutoff=0.6)
        help_text = (f"did you mean {', '.join(repr(c) for c in close)}? " if close else "") + (
            f"shorthands: {', '.join(sorted(supported))}" if supported else "give a dotted module path")
        raise InputError("ML006", f"cannot find --module '{module_dotted}' under {root} "
                                  f"(looked for {', '.join(candidates)})", help=help_text)
    mod = checkout.load(path, helper=False)
    if mod is None:
        raise InputError("ML005", f"{path} cannot be parsed")
    binding = mod.binding(config_name)
    if binding is not None and binding[0] == "def" and isinstance(binding[1], ast.FunctionDef):
        return path, config_name
    if binding is not None and binding[0] == "from":
        reader = Reader(root)
        reader.checkout = checkout
        interp = Interp(reader, mod)
        sym = interp.global_value(mod, config_name, mod.tree, Frame(mod, {}))
        target = interp.resolve(sym) if isinstance(sym, Sym) else None
        if isinstance(target, FuncRef):
            return target.mod.path, target.node.name
    available = [n for n, b in mod.bindings().items()
                 if not n.startswith("_") and n[:1].islower() and b[0] in ("def", "from", "seg")]
    raise _no_function(config_name, path, available)
