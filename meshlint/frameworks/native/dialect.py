"""The native dialect: a mesh written by hand, dims listed outer -> inner.

    [mesh]
    world_size = 64          # optional: the world this mesh is for
    gpus_per_node = 8        # optional: node size, for placement rules
    dims = [                 # outer -> inner; the LAST dim varies fastest
      { name = "pp",       size = 2 },
      { name = "dp_shard", size = -1 },   # -1: fill the remaining ranks (at most one dim)
      { name = "tp",       size = 8 },
    ]

``[[mesh.dims]]`` tables work too. Each dim may carry ``role`` (pp,
dp_replicate, dp_shard, cp, tp, ep, etp) when its name is not a role itself
(``{ name = "model", size = 8, role = "tp" }``); common aliases (dp, fsdp,
ddp, replicate, shard, sp) are understood. The mesh is exactly
``init_device_mesh(device, sizes, mesh_dim_names=names)``: every dim kept,
in the order written.
"""

from __future__ import annotations

from math import prod

from meshlint.frameworks.base import DEGREES, MAX_DEGREE, Key, Resolution, Spec, axes_of, read_keys, type_of
from meshlint.limits import MAX_MESH_DIMS
from meshlint.mesh.devmesh import Mesh
from meshlint.mesh.topology import MAX_WORLD, Hint

NAME = "native"
SECTION = "mesh"
STRICT_SECTIONS = ("mesh",)
ROLES = DEGREES
ALIASES = {"dp": "dp_shard", "fsdp": "dp_shard", "shard": "dp_shard", "dp_shard_cp": "dp_shard",
           "ddp": "dp_replicate", "replicate": "dp_replicate", "hsdp_replicate": "dp_replicate",
           "sp": "cp", "context": "cp", "tensor": "tp", "model": "tp", "pipeline": "pp", "expert": "ep"}
DIM_KEYS = ("name", "size", "role")

KEYS = [
    Key("mesh.world_size", "int", None, "native.world_size"),
    Key("mesh.gpus_per_node", "int", None, "native.gpus_per_node"),
    Key("mesh.dims", "array", None, None),
]


def read(source) -> Spec:
    spec = Spec(dialect=NAME)
    read_keys(source.data, KEYS, _no_coercion, spec)
    mesh = source.data.get("mesh")
    if isinstance(mesh, dict):
        for name in mesh:
            if name not in ("world_size", "gpus_per_node", "dims"):
                close = _close_matches(name, ["world_size", "gpus_per_node", "dims"], n=1, cutoff=0.6)
                spec.unknown_keys.append({"key": f"mesh.{name}", "section": "mesh", "name": name,
                                          "suggestion": close[0] if close else None, "framework": None})
    dims = _read_dims(mesh.get("dims") if isinstance(mesh, dict) else None, spec)
    spec.extra["dims"] = dims
    names = [d["name"] for d in dims]
    spec.extra["duplicates"] = sorted({n for n in names if n is not None and names.count(n) > 1})
    for role in ROLES:
        mine = [d for d in dims if d["role"] == role]
        spec.degree_keys[role] = mine[0]["key"] if mine else "mesh.dims"
        spec.degree_present[role] = bool(mine)
        sizes = [d["size"] for d in mine]
        if any(s is None or abs(s) > MAX_DEGREE for s in sizes):
            spec.degrees[role] = None  # unusable (the range rule names the dim): never a product of huge sizes
        elif -1 in sizes:
            spec.degrees[role] = -1
        else:
            spec.degrees[role] = prod(sizes) if sizes else 1
    for fact, label in (("native.world_size", "world_size"), ("native.gpus_per_node", "gpus_per_node")):
        value = spec.values.get(fact)
        if value is not None and 1 <= value <= MAX_WORLD:
            line = source.locate("mesh." + label)[0]
            spec.hints.append(Hint(f"[mesh] {label} on line {line}", **{label: value}))
    spec.load_error = _load_error(dims, spec.extra["duplicates"])
    return spec


def _no_coercion(key: Key, raw) -> tuple:
    if key.path == "mesh.dims":
        return None, ('list the mesh dims outer -> inner, e.g. dims = [{ name = "dp_shard", size = -1 }, '
                      '{ name = "tp", size = 8 }]')
    return None, "write a whole number of ranks (no quotes, no decimal point)"


def _read_dims(raw, spec: Spec) -> list:
    if raw is None:
        spec.problems.append({"key": "mesh.dims", "expected": "an array of dims", "actual": "missing",
                              "value": "", "note": "list the mesh dims outer -> inner, e.g. "
                              'dims = [{ name = "dp_shard", size = -1 }, { name = "tp", size = 8 }]'})
        return []
    if not isinstance(raw, list):
        return []  # the key's type check has said so
    if not raw:
        spec.problems.append({"key": "mesh.dims", "expected": "a non-empty array of dims", "actual": "an empty array",
                              "value": "", "note": "a mesh needs at least one dim"})
        return []
    if len(raw) > MAX_MESH_DIMS:  # every dim is an axis with its own placement: bound them before that work
        spec.problems.append({"key": "mesh.dims", "expected": f"at most {MAX_MESH_DIMS} dims",
                              "actual": f"{len(raw):,} dims", "value": "",
                              "note": "meshlint's limit on mesh dims (a DeviceMesh has a handful)"})
        return []
    dims = []
    for i, item in enumerate(raw):
        key = f"mesh.dims[{i}]"
        if not isinstance(item, dict):
            spec.problems.append({"key": key, "expected": "a table { name, size }", "actual": type_of(item),
                                  "value": "", "note": "each dim is a table with a name and a size"})
            dims.append({"index": i, "name": None, "role": None, "size": None, "key": key, "declared": None})
            continue
        for extra in item:
            if extra not in DIM_KEYS:
                close = _close_matches(extra, list(DIM_KEYS), n=1, cutoff=0.6)
                spec.unknown_keys.append({"key": f"{key}.{extra}", "section": "mesh.dims", "name": extra,
                                          "suggestion": close[0] if close else None, "framework": None})
        name = item.get("name")
        if not isinstance(name, str) or not name:
            _dim_problem(spec, item, key, "name", "a string", "every dim needs a name")
            name = None
        size = item.get("size")
        if isinstance(size, bool) or not isinstance(size, int):
            _dim_problem(spec, item, key, "size", "an integer", "every dim needs an integer size (-1 to fill)")
            size = None
        role = item.get("role")
        if role is not None and role not in ROLES:
            spec.problems.append({"key": f"{key}.role", "expected": "one of " + ", ".join(ROLES),
                                  "actual": type_of(role), "value": repr(role)[:40],
                                  "note": "role says which parallelism the dim carries"})
            role = None
        if role is None and name is not None:
            role = name if name in ROLES else ALIASES.get(name)
        dims.append({"index": i, "name": name, "role": role, "size": size, "key": f"{key}.size",
                     "declared": size})
    return dims


def _dim_problem(spec: Spec, item: dict, key: str, field: str, expected: str, note: str) -> None:
    present = field in item
    spec.problems.append({"key": f"{key}.{field}", "expected": expected,
                          "actual": type_of(item[field]) if present else "nothing",
                          "value": repr(item[field])[:40] if present else "", "note": note})


def _load_error(dims: list, duplicates: list) -> str | None:
    if duplicates:
        return f"RuntimeError: Each mesh_dim_name must be unique (repeated: {', '.join(duplicates)})"
    if sum(1 for d in dims if d["size"] == -1) > 1:
        return "more than one dim has size -1: only one size can be inferred"
    for d in dims:
        if d["size"] is not None and (d["size"] == 0 or d["size"] < -1):
            return f"dim {d['name']!r} has size {d['size']}: sizes are >= 1 (or -1 to fill)"
    return None


def resolve(spec: Spec, world: int | None) -> Resolution:
    dims = spec.extra["dims"]
    d = dict(spec.degrees)
    res = Resolution(degrees=d)
    res.world_factors = [(dim["name"], dim["size"], dim["size"] == -1) for dim in dims]
    if spec.load_error:
        res.framework_error, res.error_stage = spec.load_error, "load"
        return res
    if not dims or any(dim["size"] is None or dim["name"] is None or dim["size"] > MAX_DEGREE for dim in dims):
        res.framework_error, res.error_stage = "the mesh dims are incomplete or invalid", "load"
        return res
    fill = next((dim for dim in dims if dim["size"] == -1), None)
    known = prod(dim["size"] for dim in dims if dim is not fill)
    res.valid_worlds = ("multiple", known) if fill else ("exact", known)
    if world is None:
        if fill:
            res.notes.append(f"dim {fill['name']!r} (size -1) is inferred from the world size, which is unknown")
            return res
        world, res.world_implied = known, True
    res.world_used = world
    sizes = []
    for dim in dims:
        if dim is fill:
            if world % known:
                res.framework_error = f"world size {world} is not divisible by the other dims' product {known}"
                res.error_stage = "resolve"
                return res
            size = world // known
            res.notes.append(f"{dim['name']} = -1 resolves to {world} / {known} = {size}")
        else:
            size = dim["size"]
        sizes.append(size)
    res.world_factors = [(dim["name"], s, dim is fill) for dim, s in zip(dims, sizes)]
    for role in ROLES:
        mine = [s for dim, s in zip(dims, sizes) if dim["role"] == role]
        d[role] = prod(mine) if mine else 1
    mesh = Mesh("main", tuple(dim["name"] for dim in dims), tuple(sizes))
    if mesh.size > world:
        res.framework_error = (f"RuntimeError: Mesh should not be bigger than default world size {world}, "
                               f"but found {mesh.size} ranks!")
        res.error_stage = "mesh"
        return res
    res.meshes = {"main": mesh}
    res.primary = "main"
    res.axes = axes_of(mesh)
    if mesh.size < world:
        res.outside = (mesh.size, world - 1)
        res.notes.append(f"the mesh covers {mesh.size} of {world} ranks")
    return res


def _close_matches(word, choices, n=1, cutoff=0.6):
    import difflib  # only needed when something is misspelt

    return difflib.get_close_matches(word, choices, n=n, cutoff=cutoff)
