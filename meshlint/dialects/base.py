"""What every dialect shares: the key tables, reading values, and the spec/resolution types.

A dialect module provides:
  NAME, SECTION          its name and the section that identifies it
  KEYS                   the keys it reads (type, default, fact name)
  STRICT_SECTIONS        sections whose unknown keys the framework itself rejects
  read(source) -> Spec   values as the framework would load them
  resolve(spec, world) -> Resolution   the mesh(es) the framework would build
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

from meshlint.mesh import Axis, Mesh

DEGREES = ("pp", "dp_replicate", "dp_shard", "cp", "tp", "ep", "etp")
MAX_DEGREE = 1 << 24  # 16,777,216: larger than any cluster; bigger is a typo


class Key(NamedTuple):
    path: str                    # dotted config path, e.g. "distributed.tp"
    type: str                    # int | bool | str | float | table
    default: Any = None
    fact: str | None = None      # fact name rules see, e.g. "tp" or "model.n_heads"
    choices: tuple = ()
    doc: str = ""

    @property
    def section(self) -> str:
        return self.path.split(".", 1)[0]

    @property
    def leaf(self) -> str:
        return self.path.split(".", 1)[1] if "." in self.path else self.path


@dataclass
class Spec:
    """A config as the framework loads it, before world size is applied."""

    dialect: str
    degrees: dict = field(default_factory=dict)        # name -> int | None (None: unusable); dp_shard may be -1
    degree_keys: dict = field(default_factory=dict)    # name -> dotted key path
    degree_present: dict = field(default_factory=dict)  # name -> written in the file?
    values: dict = field(default_factory=dict)         # fact path -> value, defaults applied
    problems: list = field(default_factory=list)       # invalid values (type, choice, shape)
    unknown_keys: list = field(default_factory=list)   # keys the framework does not know
    load_error: str | None = None                      # first error the framework raises on load
    hints: list = field(default_factory=list)          # topology hints declared by the file itself
    extra: dict = field(default_factory=dict)          # dialect-specific facts (native dims)


@dataclass
class Resolution:
    """The mesh(es) a framework builds for a spec and a world size."""

    degrees: dict                                      # resolved (dp_shard inferred), None when unknown
    world_used: int | None = None                      # world the meshes are laid out for
    world_implied: bool = False                        # world unknown, implied by explicit degrees
    meshes: dict = field(default_factory=dict)         # name -> Mesh | None (None: cannot be built)
    primary: str | None = None                         # which mesh is "the mesh" in reports
    axes: dict = field(default_factory=dict)           # name -> Axis: the 1-D meshes the framework names
    framework_error: str | None = None                 # first error the framework raises resolving/building
    error_stage: str | None = None                     # load | resolve | mesh
    notes: list = field(default_factory=list)          # declared-vs-resolved differences, in words
    valid_worlds: tuple | None = None                  # ("exact", n) | ("multiple", n) | ("none", why)
    world_factors: list = field(default_factory=list)  # [(degree, value)] whose product must be the world
    submeshes: list = field(default_factory=list)      # [(how the framework asks, what it gets)]
    outside: tuple | None = None                       # (first, last) ranks outside the primary mesh

    @property
    def mesh(self) -> Mesh | None:
        if self.framework_error or self.primary is None:
            return None
        return self.meshes.get(self.primary)


# ----------------------------------------------------------------------------- reading

def lookup(data: dict, path: str) -> tuple[bool, Any]:
    node: Any = data
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "table"
    return type(value).__name__  # dates and times


_TYPE_OK: dict[str, Callable[[Any], bool]] = {
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "float": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "table": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
}
_TYPE_WORDS = {"int": "an integer", "bool": "true or false", "str": "a string", "float": "a number",
               "table": "a table", "array": "an array"}

# A coercion policy: (key, raw value) -> (value the framework ends up with or None, note for the user)
Coerce = Callable[[Key, Any], tuple]


def no_coercion(framework: str) -> Coerce:
    def coerce(key: Key, raw: Any) -> tuple:
        return None, f"{framework} expects {_TYPE_WORDS[key.type]} here"
    return coerce


def read_keys(data: dict, keys: list, coerce: Coerce, spec: Spec) -> None:
    """Fill ``spec.values`` (and problems) from ``data`` for every key in ``keys``."""
    broken_sections: set[str] = set()
    for section in dict.fromkeys(k.section for k in keys):
        present, value = lookup(data, section)
        if present and not isinstance(value, dict):
            broken_sections.add(section)
            spec.problems.append(_problem(section, "table", value, None,
                                          f"[{section}] must be a table; the framework cannot read its keys"))
    for key in keys:
        if key.section in broken_sections:
            value: Any = None
        else:
            present, raw = lookup(data, key.path)
            value = key.default
            if present:
                value = _checked(key, raw, coerce, spec)
        if key.fact:
            spec.values[key.fact] = value


def _checked(key: Key, raw: Any, coerce: Coerce, spec: Spec) -> Any:
    if _TYPE_OK[key.type](raw):
        if key.choices and raw not in key.choices:
            spec.problems.append(_problem(key.path, key.type, raw, key.choices,
                                          f"must be one of {', '.join(map(repr, key.choices))}"))
            return None
        return float(raw) if key.type == "float" else raw
    value, note = coerce(key, raw)
    spec.problems.append(_problem(key.path, key.type, raw, key.choices, note))
    return value


def _problem(key: str, expected: str, raw: Any, choices: tuple | None, note: str) -> dict:
    shown = repr(raw) if not isinstance(raw, (dict, list)) else type_of(raw)
    if isinstance(raw, bool):
        shown = "true" if raw else "false"
    elif isinstance(raw, str):
        shown = '"' + raw.replace('"', '\\"') + '"'
    return {
        "key": key,
        "expected": _TYPE_WORDS.get(expected, expected) if not choices else "one of " + ", ".join(map(repr, choices)),
        "actual": type_of(raw),
        "value": shown[:60],
        "note": note,
    }


def unknown_keys(data: dict, sections: tuple, keys: list, spec: Spec) -> None:
    """Keys in the framework's strict sections that it does not define (with a did-you-mean)."""
    known: dict[str, list[str]] = {}
    for key in keys:
        known.setdefault(key.section, []).append(key.leaf)
    for section in sections:
        table = data.get(section)
        if not isinstance(table, dict):
            continue
        for name in table:
            if name in known.get(section, ()):
                continue
            close = _close_matches(name, known.get(section, []), n=1, cutoff=0.6)
            spec.unknown_keys.append({"key": f"{section}.{name}", "section": section, "name": name,
                                      "suggestion": close[0] if close else None})


def degree_items(spec: Spec) -> list:
    """One record per declared degree (per dim for the native dialect), for the range rule."""
    if spec.dialect == "native":
        return [{"name": d["name"], "key": d["key"], "value": d["size"], "present": True}
                for d in spec.extra.get("dims", []) if d["name"] is not None]
    return [
        {"name": name, "key": spec.degree_keys[name], "value": spec.degrees.get(name),
         "present": spec.degree_present.get(name, False)}
        for name in DEGREES if name in spec.degree_keys
    ]


def axes_of(mesh: Mesh) -> dict:
    return {dim: mesh.axis(dim) for dim in mesh.dims}


def flattened(mesh: Mesh, dims: tuple, name: str) -> Axis:
    """The 1-D mesh ``mesh[dims]._flatten(name)``: adjacent dims make one strided axis."""
    first, last = mesh.dim_index(dims[0]), mesh.dim_index(dims[-1])
    if list(mesh.dims[first : last + 1]) != list(dims):
        raise ValueError(f"{dims} are not adjacent in {mesh.dims}")
    size = 1
    for i in range(first, last + 1):
        size *= mesh.sizes[i]
    return Axis(name, size, mesh.strides[last], mesh.name, mesh.size)


def _close_matches(word, choices, n=1, cutoff=0.6):
    import difflib  # only needed when something is misspelt

    return difflib.get_close_matches(word, choices, n=n, cutoff=cutoff)
