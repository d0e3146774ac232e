"""The refusals of Megatron-Core 0.16.1's initialize_model_parallel that read only options and the rank groups.

Megatron-LM's initialize_distributed (megatron/training/initialize.py:364-386) passes --use-sharp,
--sharp-enabled-group, --num-distributed-optimizer-instances, --hybrid-context-parallel,
--hierarchical-context-parallel-sizes and --pipeline-model-parallel-comm-backend straight to
initialize_model_parallel (megatron/core/parallel_state.py), which asserts on them in this order (the first one
that fires stops the start-up). Two of its checks never fire from a launch line: argparse's choices for
--sharp-enabled-group and --pipeline-model-parallel-comm-backend refuse any other value first (rule ML968).
The product of --hierarchical-context-parallel-sizes is asserted by validate_args first (arguments.py:405) with
the same condition as parallel_state.py:984; both lines are named.
"""

from __future__ import annotations

import math


def _site(site: str, key: str, options: str, condition: str, message: str) -> dict:
    return {"site": site, "key": key, "options": options, "condition": condition, "message": message}


def refusals(args: dict, unknown, dp: int | None, cp: int | None) -> list:
    """Every check above that fires, in the order initialize_model_parallel runs them ([] where a value it reads
    is unknown: undecided, no finding). ``dp``/``cp``: the data/context-parallel sizes (None: not known)."""
    unknown = set(unknown or ())

    def known(*names) -> bool:
        return not any(n in unknown for n in names)

    out: list = []
    sharp, group = args.get("use_sharp"), args.get("sharp_enabled_group")
    instances = args.get("num_distributed_optimizer_instances")
    if known("use_sharp", "sharp_enabled_group") and isinstance(sharp, bool):
        if sharp and group == "dp_replica" and known("num_distributed_optimizer_instances") \
                and isinstance(instances, int) and not instances > 1:
            out.append(_site("megatron/core/parallel_state.py:720", "sharp_enabled_group",
                             "--sharp-enabled-group or --num-distributed-optimizer-instances",
                             f"num_distributed_optimizer_instances ({instances}) > 1",
                             f"dp_replica group requires num_distributed_optimizer_instances > 1 (it is {instances})"))
        elif not sharp and group is not None:
            out.append(_site("megatron/core/parallel_state.py:724", "sharp_enabled_group",
                             "--sharp-enabled-group (drop it) or --use-sharp (add it)",
                             f"sharp_enabled_group ({group!r}) is None",
                             "sharp_enabled_group is only valid when use_sharp is True"))
    if args.get("hybrid_context_parallel") is True and known("hybrid_context_parallel") \
            and isinstance(dp, int) and isinstance(cp, int) and (dp * cp) % 2:
        out.append(_site("megatron/core/parallel_state.py:941", "hybrid_context_parallel",
                         "--hybrid-context-parallel (drop it) or dp·cp (make it even)",
                         f"every dp-cp group has dp·cp = {dp}·{cp} = {dp * cp} ranks, an even number",
                         f"Hybrid context parallel requires an even number of ranks (each dp-cp group has {dp * cp})"))
    sizes = args.get("hierarchical_context_parallel_sizes")
    if sizes and known("hierarchical_context_parallel_sizes", "context_parallel_size") and isinstance(cp, int) \
            and isinstance(sizes, (list, tuple)) and all(isinstance(s, int) for s in sizes) \
            and math.prod(sizes) != cp:
        product = "·".join(map(str, sizes))
        out.append(_site("megatron/training/arguments.py:405 (and megatron/core/parallel_state.py:984)",
                         "hierarchical_context_parallel_sizes",
                         "--hierarchical-context-parallel-sizes or --context-parallel-size",
                         f"prod(hierarchical_context_parallel_sizes) = {product} = {math.prod(sizes)} == "
                         f"context_parallel_size ({cp})",
                         f"the hierarchical context-parallel sizes multiply to {math.prod(sizes)}, not to the "
                         f"context-parallel size {cp}"))
    return out
