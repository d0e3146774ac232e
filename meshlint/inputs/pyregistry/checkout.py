"""The modules of a torchtitan checkout, parsed lazily, and the state one read shares (``Reader``)."""

from __future__ import annotations

import ast
import os
import re
import sys

from meshlint.errors import InputError
from meshlint.inputs.source import read_bytes
from meshlint.inputs.pyregistry.values import (MAX_BYTES, MAX_HELPER_BYTES_TOTAL, MAX_HELPER_MODULE_BYTES,
    MAX_STEPS)
from meshlint.inputs.pyregistry.pytext import decode_python


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
