"""The degrees a framework version lets a layout choose, and every assignment of them for a target world.

An assignment is a value per degree. The *factors* are the degrees whose product
the framework compares with the world size (``ML103``): KempnerForge multiplies
``pp·dp_replicate·dp_shard·cp·tp·ep``, torchtitan ``pp·dp_replicate·dp_shard·cp·tp``,
a native mesh its dims. torchtitan's expert degrees are *borrowed*: ``ep`` (and
``etp`` in v0.2.x) take their ranks from ``dp_shard·cp·tp`` and must divide it (the
framework raises, or dies building the sparse mesh, otherwise: ``ML402``/``ML701``).

The enumeration is closed form: ordered factorizations of the world into the
factors (each factor a divisor of what is left, the last one the remainder), then
the borrowed degrees among the divisors of the ranks they borrow. A 4,096-GPU world
has 1,820 five-factor layouts before any rule; brute force over integers would have
billions. A ``check`` callback sees every partial assignment, so a rule that reads
only the degrees assigned so far cuts the whole subtree (see ``prune``).
"""

from __future__ import annotations

from typing import Callable, Iterator, NamedTuple

from meshlint.engine.expr.functions import divisors  # noqa: F401 - also imported from here (valid, tests)
from meshlint.errors import MeshlintError

KF_FACTORS = ("pp", "dp_replicate", "dp_shard", "cp", "tp", "ep")
TT_FACTORS = ("pp", "dp_replicate", "dp_shard", "cp", "tp")
ACC_FACTORS = ("dp_replicate", "dp_shard", "cp", "tp")
MG_FACTORS = ("pp", "dp_shard", "cp", "tp")   # Megatron-Core: world = tp·cp·dp·pp, dp derived from the world
REGION = ("dp_shard", "cp", "tp")   # the ranks torchtitan's expert degrees borrow


class SolveError(MeshlintError):
    """A search that cannot be set up (no world size, an unknown degree to keep, ...): exit 2."""


class Target(NamedTuple):
    """What the layouts are searched for: the world, the node shape, and which degrees may change."""

    world_size: int
    gpus_per_node: int | None = None
    placement: str = "block"
    keep: tuple = ()            # degrees fixed at their current values
    vary: tuple | None = None   # only these may change (None: every degree)
    fixed: tuple = ()           # (degree, value) pairs fixed by the caller (fix --set, explain alternatives)


class Space(NamedTuple):
    """The degrees of one framework version."""

    framework: str          # "kempnerforge", "torchtitan@0.2.x", "torchtitan@main@b5bcd76c6", "native"
    names: tuple            # every degree the search assigns, in the order reports list them
    factors: tuple          # their product is the world
    borrowed: tuple         # outside the product, dividing dp_shard·cp·tp (torchtitan ep, and etp in 0.2.x)
    fill: str | None        # the factor the config writes as -1 (inferred from the world), if any
    keys: dict              # degree -> the config key that sets it
    roles: dict             # degree -> role (a native dim's role; the degree itself otherwise)

    @property
    def has_etp(self) -> bool:
        return "etp" in self.borrowed


def space_for(spec) -> Space:
    """The degrees of the framework version ``spec`` was read with."""
    fw = getattr(spec, "framework", None) or {}
    if spec.dialect == "native":
        dims = spec.extra.get("dims", [])
        names = tuple(d["name"] for d in dims)
        if any(n is None for n in names) or len(set(names)) != len(names):
            raise SolveError("the native mesh has unnamed or repeated dims: fix their names first (ML206)")
        fill = next((d["name"] for d in dims if d["size"] == -1), None)
        return Space("native", names, names, (), fill, {d["name"]: d["key"] for d in dims},
                     {d["name"]: d["role"] for d in dims})
    keys = dict(spec.degree_keys)
    fill = "dp_shard" if spec.degrees.get("dp_shard") == -1 else None
    if spec.dialect == "kempnerforge":
        names = KF_FACTORS
        return Space("kempnerforge", names, KF_FACTORS, (), fill, keys, {n: n for n in names})
    if spec.dialect == "megatron":
        # the expert grid (etp·ep·edp·pp) is built from the same world: ep·etp divides dp·cp·tp, as torchtitan's
        # borrowed degrees do; etp is searched only where the model has experts or the launch writes it (else it
        # follows tp, arguments.py:410-411)
        moe = bool(spec.values.get("model.is_moe"))
        borrowed = ("ep", "etp") if moe or spec.degree_present.get("etp") else ("ep",)
        names = MG_FACTORS + borrowed
        return Space(f"megatron@{fw.get('version')}", names, MG_FACTORS, borrowed, "dp_shard", keys,
                     {n: n for n in names})
    if spec.dialect == "accelerate":  # ParallelismConfig's sizes (DeepSpeed SP, outside the mesh, is kept as is)
        if (spec.values.get("accelerate.sp") or 1) > 1:
            raise SolveError("sp > 1 (DeepSpeed sequence parallelism) builds no mesh: meshlint does not search it")
        return Space(f"accelerate@{fw.get('version')}", ACC_FACTORS, ACC_FACTORS, (), None, keys,
                     {n: n for n in ACC_FACTORS})
    version = fw.get("version") or "0.2.x"
    if version == "0.2.x":
        names = TT_FACTORS + ("ep", "etp")
        return Space("torchtitan@0.2.x", names, TT_FACTORS, ("ep", "etp"), fill, keys, {n: n for n in names})
    names = TT_FACTORS + ("ep",)
    return Space(f"torchtitan@{version}", names, TT_FACTORS, ("ep",), fill, keys, {n: n for n in names})


def current(report, space: Space) -> dict:
    """The config's own value of each degree: resolved where the framework resolves it, else as written
    (None where unknown: an unreadable value, or dp_shard = -1 that cannot be inferred)."""
    spec, res = report.spec, report.resolution
    if space.framework == "native":
        out = {}
        sizes = {}
        if res is not None and res.world_factors:
            sizes = {name: value for name, value, _inferred in res.world_factors}
        for dim in spec.extra.get("dims", []):
            value = sizes.get(dim["name"], dim["size"])
            out[dim["name"]] = value if isinstance(value, int) and value >= 1 else None
        return out
    resolved = res.degrees if res is not None else {}
    out = {}
    for name in space.names:
        value = resolved.get(name)
        if value is None:
            value = spec.degrees.get(name)
        out[name] = value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None
    return out


def role_values(space: Space, values: dict) -> dict:
    """Degree facts (pp, tp, ...) of an assignment: the degrees themselves, or a native mesh's role products
    (None for a role one of whose dims is not assigned yet)."""
    if space.framework != "native":
        return values
    out: dict = {}
    unknown = set()
    for name, role in space.roles.items():
        if role is None:
            continue
        v = values.get(name)
        if v is None:
            unknown.add(role)
        else:
            out[role] = out.get(role, 1) * v
    for role in unknown:
        out[role] = None
    return out


Check = Callable[[str, dict], bool]  # (degree just assigned, the assignment so far) -> keep going


def assignments(space: Space, world: int, allowed: dict, check: Check | None = None) -> Iterator[dict]:
    """Every assignment whose factors multiply to ``world`` and whose borrowed degrees divide
    ``dp_shard·cp·tp``, each degree within ``allowed[name]`` (a set, or None for any value), and
    every prefix accepted by ``check``. Yields a fresh dict per assignment."""
    if not space.factors:  # nothing to assign (a native mesh with no usable dims)
        return
    ok = check or (lambda _name, _values: True)
    world_divisors = divisors(world)
    # most constrained factors first; the least constrained (the fill, else dp_shard) takes the remainder
    last = space.fill or ("dp_shard" if "dp_shard" in space.factors else space.factors[-1])
    if allowed.get(last) is not None and any(allowed.get(f) is None for f in space.factors if f != last):
        # a fixed remainder constrains less than a free factor would: let a free one take the remainder
        last = next(f for f in reversed(space.factors) if allowed.get(f) is None and f != last)
    head = sorted((f for f in space.factors if f != last),
                  key=lambda f: (len(allowed[f]) if allowed.get(f) is not None else len(world_divisors),
                                 space.factors.index(f)))
    order = head + [last]
    choices = {f: [v for v in world_divisors if allowed.get(f) is None or v in allowed[f]] for f in order}
    values: dict = {}

    def borrowed(i: int) -> Iterator[dict]:
        if i == len(space.borrowed):
            yield {n: values[n] for n in space.names}
            return
        name = space.borrowed[i]
        region = values["dp_shard"] * values["cp"] * values["tp"]
        used = values.get("ep", 1) if name == "etp" else 1
        room = region // used if region % used == 0 else 0
        if not room:
            return
        pool = allowed.get(name)
        if name == "etp" and values.get("ep", 1) > 1 and space.framework.startswith("torchtitan"):
            options = sorted({1, values["tp"]})  # ML401: etp = tp or 1 when ep > 1
        elif name == "etp" and space.framework.startswith("megatron"):
            # Megatron accepts any etp the grid divides; the search proposes the two its MoE guides use, 1 and
            # tp, and a value --keep or --set fixes (a pool of one)
            options = sorted({1, values["tp"]} | (set(pool) if pool is not None and len(pool) == 1 else set()))
        elif name == "etp":
            # without ep, torchtitan 0.2.x shards no expert over etp (apply_moe_ep_tp uses the tp mesh, and
            # efsdp is not built: parallel_dims._mesh_exist): any other etp changes nothing but the mesh shape
            options = [1]
        else:
            options = divisors(room)
        for v in options:
            if room % v or (pool is not None and v not in pool):
                continue
            values[name] = v
            if ok(name, values):
                yield from borrowed(i + 1)
        values.pop(name, None)

    def factors(i: int, remaining: int) -> Iterator[dict]:
        name = order[i]
        if i == len(order) - 1:
            if allowed.get(name) is not None and remaining not in allowed[name]:
                return
            values[name] = remaining
            if ok(name, values):
                yield from borrowed(0)
            values.pop(name, None)
            return
        for v in choices[name]:
            if v > remaining:
                break
            if remaining % v:
                continue
            values[name] = v
            if ok(name, values):
                yield from factors(i + 1, remaining // v)
        values.pop(name, None)

    yield from factors(0, world)


def count_factorizations(world: int, k: int) -> int:
    """Ordered factorizations of ``world`` into ``k`` factors (each >= 1): the search space before any rule."""
    n, p, total = world, 2, 1
    from math import comb

    while p * p <= n:
        e = 0
        while n % p == 0:
            n //= p
            e += 1
        if e:
            total *= comb(e + k - 1, k - 1)
        p += 1
    if n > 1:
        total *= k
    return total
