"""From interpreter values to a ``PySource``: flatten the returned config into dotted keys with positions."""

from __future__ import annotations

from meshlint.inputs.pysource import PySource, Unknown
from meshlint.inputs.pyregistry.values import FuncRef, _LITERAL, MAX_VALUE_DEPTH, Obj, Sym, TailFqns, U
from meshlint.inputs.pyregistry.checkout import Module
from meshlint.inputs.pyregistry.frame import _display, Frame, _is_constant_name, _MATH_CONSTANTS, _SENTINEL
from meshlint.inputs.pyregistry.interp import Interp


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
