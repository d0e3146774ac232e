"""``--scale-to N``: the config's mesh on the N devices at hand, shrinking only the data-parallel dims. No torch.

tp, pp, cp, ep and etp are kept, because they are what the smoke is for; the
data-parallel degree becomes N / (everything else), keeping dp_replicate when
it still divides it (and leaves dp_shard at least 2 where it was) and giving
the rest to dp_shard. The config is then resolved again for N ranks, exactly
as the framework would resolve the scaled config.
"""

from __future__ import annotations

import copy

from meshlint.frameworks.dialects import module_of
from meshlint.errors import MeshlintError

KEPT = ("tp", "pp", "cp", "ep", "etp")


class ScaleError(MeshlintError):
    pass


def scale(report, n: int) -> tuple:
    """A copy of ``report`` re-resolved for ``n`` ranks, and what changed (for the report)."""
    res, spec = report.resolution, report.spec
    world = report.topology.world_size
    d = res.degrees
    if any(d.get(k) is None for k in ("dp_replicate", "dp_shard", "tp", "pp", "cp", "ep")):
        raise ScaleError(f"{report.path}: the degrees are not all known, so they cannot be scaled")
    factors = [name for name, _value, _inferred in res.world_factors]
    others = 1
    for name in factors:
        if name not in ("dp_replicate", "dp_shard"):
            others *= d[name]
    if n >= world:
        raise ScaleError(f"--scale-to {n}: the config already runs on {world} ranks; scaling only shrinks")
    if n % others:
        raise ScaleError(f"--scale-to {n}: the kept degrees ({' × '.join(f'{k} {d[k]}' for k in factors if k not in ('dp_replicate', 'dp_shard'))} "
                         f"= {others}) do not divide {n}; use a multiple of {others}")
    dp_total = n // others
    replicate = 1
    for r in range(min(d["dp_replicate"], dp_total), 0, -1):
        if dp_total % r == 0 and dp_total // r >= min(d["dp_shard"], 2):
            replicate = r
            break
    new_spec = copy.copy(spec)
    new_spec.degrees = dict(spec.degrees, dp_replicate=replicate, dp_shard=dp_total // replicate)
    new = copy.copy(report)
    new.spec = new_spec
    new.topology = copy.copy(report.topology)  # the scaled report runs on n ranks, whatever the file said
    new.topology.world_size, new.topology.world_source = n, f"--scale-to {n}"
    new.resolution = module_of(new_spec).resolve(new_spec, n)  # the config's framework version
    if new.resolution.framework_error:
        raise ScaleError(f"--scale-to {n}: the scaled config (dp_replicate {replicate}, dp_shard "
                         f"{dp_total // replicate}) is refused: {new.resolution.framework_error}")
    before = {k: d[k] for k in ("dp_replicate", "dp_shard")}
    after = {k: new.resolution.degrees[k] for k in ("dp_replicate", "dp_shard")}
    kept = {k: d[k] for k in KEPT if d.get(k) is not None}
    return new, {"from": world, "to": n, "before": before, "after": after, "kept": kept}


def describe(scaled: dict) -> str:
    changes = ", ".join(f"{k} {scaled['before'][k]} → {scaled['after'][k]}" for k in scaled["before"]
                        if scaled["before"][k] != scaled["after"][k])
    kept = ", ".join(f"{k} {v}" for k, v in scaled["kept"].items() if v > 1) or "nothing else"
    return f"scaled from {scaled['from']} to {scaled['to']} ranks: {changes or 'no change'} ({kept} kept)"
