"""Read a registry file's config functions (``read_registry``, ``read_function``) and find a config module."""

from __future__ import annotations

import ast
import os
import re

from meshlint.errors import InputError
from meshlint.inputs.pysource import PySource, Unknown
from meshlint.inputs.source import read_bytes
from meshlint.inputs.pyregistry.values import (BUDGET_BASE, BUDGET_PER_BYTE, Builtin, _BUILTINS, ClassRef,
    FuncRef, _Limit, MAX_BYTES, Obj, _Raise, _Return, _Snap, Sym, _TRANSPARENT_DECORATORS, U)
from meshlint.inputs.pyregistry.pytext import decode_python, scan_py_comments
from meshlint.inputs.pyregistry.checkout import (Checkout, _dotted_of, infer_root, Module, _PARSE_CACHE,
    _parse_text, Reader)
from meshlint.inputs.pyregistry.frame import _display, Frame, _Raised, _required, _text, _Uncertain
from meshlint.inputs.pyregistry.interp import Interp
from meshlint.inputs.pyregistry.build import _build


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
