"""--pipeline-model-parallel-layout as Megatron-Core 0.16.1 reads it: the string, its stages, the layer split, and
the first refusal.

The grammar and every check follow megatron/core/transformer/pipeline_parallel_layer_layout.py (class
PipelineParallelLayerLayout: ``parse_str_to_list``, ``__init__``, ``validate_layer_layout``), reached from
validate_args (megatron/training/arguments.py:503-527) and TransformerConfig.__post_init__
(transformer_config.py:1307-1362). A stage is a run of characters between ``|``: ``E`` embedding, ``L`` loss, ``t``
a decoder layer, ``m`` an MTP layer; ``(...)*n`` and ``x*n`` repeat, commas are cosmetic. Stage k of the flat list
runs on pp rank k % pp as its virtual stage k // pp.
"""

from __future__ import annotations

import re

PLS = "pipeline_parallel_layer_layout.py"
KEY = "pipeline_model_parallel_layout"
CHARS = {"E": "embedding", "L": "loss", "t": "decoder", "m": "mtp"}
# the release's two expansions, applied in this order, each once over the whole string: a parenthesised group
# without nested parentheses, then a single character, repeated n times (parse_str_to_list)
_GROUP = re.compile(r"\(([^)]+)\)\*(\d+)")
_CHAR = re.compile(r"(.)\*(\d+)")
_MAX_EXPANDED = 1_000_000  # a layout that expands further is not a real model: refused as unreadable


class LayoutError(ValueError):
    """A refusal of the release, with its site and the option it points at."""

    def __init__(self, message: str, source: str, key: str = KEY):
        super().__init__(message)
        self.source = source
        self.key = key


_NAMES = {name: ch for ch, name in CHARS.items()}


def stages(text) -> list:
    """The flat list of stages, each a string of the layer characters (validate_args' parse, arguments.py:519).
    ``text`` may also be the list form a Python config gives (Megatron-Bridge recipes): a list of stages, each a
    list of layer-type names, as PipelineParallelLayerLayout.__init__ takes it."""
    if isinstance(text, (list, tuple)):
        return _list_stages(text)
    s = text.replace(",", "")
    for pattern in (_GROUP, _CHAR):
        s = pattern.sub(lambda m: _repeat(m.group(1), m.group(2)), s)
    out = []
    for stage in s.split("|"):
        bad = next((ch for ch in stage if ch not in CHARS), None)
        if bad is not None:
            raise LayoutError(f"Invalid layer character: {bad!r} in stage {stage!r}; known layer characters: "
                              f"{', '.join(CHARS)} (E embedding, L loss, t decoder layer, m MTP layer)",
                              f"{PLS}:315, parse_str_to_list via arguments.py:519")
        out.append(stage)
    return out


def _list_stages(rows) -> list:
    out = []
    for row in rows:
        if not isinstance(row, (list, tuple)):
            raise LayoutError(f"pipeline_model_parallel_layout must be a list of lists, but a stage is {row!r}",
                              f"{PLS}:33, PipelineParallelLayerLayout.__init__")
        chars = []
        for item in row:
            name = item.strip().lower() if isinstance(item, str) else None
            if name not in _NAMES:  # encoder is a LayerType the release does not build either (validate_layer_layout)
                raise LayoutError(f"{item!r} is not a valid LayerType (embedding, loss, decoder, mtp)",
                                  f"{PLS}:66, PipelineParallelLayerLayout.__init__")
            chars.append(_NAMES[name])
        out.append("".join(chars))
    if sum(len(stage) for stage in out) > _MAX_EXPANDED:
        raise LayoutError(f"the layout holds more than {_MAX_EXPANDED:,} layers", f"{PLS}:33")
    return out


def _repeat(body: str, count: str) -> str:
    n = int(count)
    if len(body) * n > _MAX_EXPANDED:
        raise LayoutError(f"the layout expands to more than {_MAX_EXPANDED:,} characters ({body!r} * {n})",
                          f"{PLS}:301, parse_str_to_list")
    return body * n


def resolve(text: str, pp: int, num_layers: int | None, mtp_layers: int | None) -> dict:
    """{vp, grid: [[stage string per virtual stage] per pp rank], counts: decoder layers likewise, mtp_standalone}
    or raises LayoutError with the first check the release fails."""
    flat = stages(text)
    if len(flat) % pp:  # arguments.py:520 (and PipelineParallelLayerLayout.__init__, :40)
        raise LayoutError(f"the layout has {len(flat)} stages, not divisible by pipeline_model_parallel_size ({pp})",
                          "arguments.py:520", f"{KEY}|pipeline_model_parallel_size")
    vp = len(flat) // pp
    grid = [[flat[v * pp + r] for v in range(vp)] for r in range(pp)]
    order = "".join(flat)  # the flattened layout in layer order (vp-major, then pp rank)
    _validate(order, grid, pp, vp, num_layers, mtp_layers)
    standalone = any("m" in grid[r][-1] for r in range(pp - 1))
    return {"vp": vp if vp > 1 else None, "grid": grid, "counts": [[s.count("t") for s in row] for row in grid],
            "mtp_standalone": standalone}


def _validate(order: str, grid: list, pp: int, vp: int, num_layers, mtp_layers) -> None:
    """validate_layer_layout (pipeline_parallel_layer_layout.py:85-150), check by check, in its order."""
    site = lambda line: f"{PLS}:{line}, validate_layer_layout via transformer_config.py:1359"  # noqa: E731
    if not order or order[0] != "E":
        raise LayoutError("The first layer must be embedding, but the layout " + (
            f"starts with {CHARS[order[0]]}" if order else "has no layers (IndexError)"), site(94))
    if order[-1] != "L":
        raise LayoutError(f"The last layer must be loss, but the layout ends with {CHARS[order[-1]]}", site(97))
    if order.count("E") != 1:
        raise LayoutError(f"Embedding must be specified exactly once (the layout has {order.count('E')})", site(102))
    if order.count("L") != 1:
        raise LayoutError(f"Loss must be specified exactly once (the layout has {order.count('L')})", site(105))
    if isinstance(num_layers, int) and order.count("t") != num_layers:
        raise LayoutError(f"Number of decoder layers {order.count('t')} in the layout must match num_layers "
                          f"{num_layers}", site(106), f"{KEY}|num_layers")
    m = order.count("m")
    if not (m == mtp_layers or (mtp_layers is None and m == 0)):
        raise LayoutError(f"Number of mtp layers in layout ({m}) must match mtp_num_layers ({mtp_layers})", site(111),
                          f"{KEY}|mtp_num_layers")
    if "m" in order and "t" in order[order.index("m"):]:
        raise LayoutError("decoder layers must be placed before MTP layers", site(116))
    for r in range(pp):
        if any("m" in grid[r][v] for v in range(vp - 1)):
            raise LayoutError(f"MTP layers must be in the last virtual pipeline stage of their rank (pp rank {r}: "
                              f"{grid[r]})", site(122))
    for r in range(pp):
        if "m" in grid[r][-1] and grid[r][-1].count("m") != mtp_layers:
            raise LayoutError("All of the MTP layers must be in the same one virtual pipeline stage", site(128))
    if any("m" in grid[0][v] for v in range(vp - 1)):  # unreachable after :121, kept in the release's order
        raise LayoutError(f"MTP must not be in the first pp rank (pp rank 0: {grid[0]})", site(132))


def holders(grid: list) -> tuple:
    """(pp rank, virtual stage) of the embedding and of the loss."""
    where = {}
    for r, row in enumerate(grid):
        for v, stage in enumerate(row):
            for ch in "EL":
                if ch in stage:
                    where[ch] = (r, v)
    return where.get("E", (0, 0)), where.get("L", (len(grid) - 1, len(grid[0]) - 1 if grid else 0))
