"""Megatron-Core 0.16.1 (Megatron-LM tag core_v0.16.1): a launch's options -> Spec -> the groups and layer split it builds.

The version module of the megatron dialect (NAME, read, resolve, pipeline_plan, bytes_per_param).
Values are the parser's (flags.py) with validate_args' derivations (megatron/training/arguments.py:293-1288):
data_parallel_size = world // (tp*pp*cp), expert_tensor_parallel_size defaults to tp, the virtual pipeline
size from --num-layers-per-virtual-pipeline-stage or --num-virtual-stages-per-pipeline-rank (1 -> None),
sequence parallelism switched off at tp = 1, num_query_groups only with --group-query-attention
(core_transformer_config_from_args, :1348-1351). Groups: ranks.py. The layer split: ``layer_split``.
"""

from __future__ import annotations

from meshlint.frameworks.base import Resolution, Spec
from meshlint.frameworks.megatron import config_checks, pstate, rampup, ranks, validate_checks

NAME = "megatron"
SECTION = None              # no TOML section: Megatron configs are launch lines
VERSION = "0.16.1"
TAG = "core_v0.16.1"
COMMIT = "55ac7082517c3878ae653c07c09c534b8aed49f6"
DATE = "2026-03-16"

# degree -> dest of the option that sets it
DEGREE_DESTS = {"tp": "tensor_model_parallel_size", "pp": "pipeline_model_parallel_size",
                "cp": "context_parallel_size", "ep": "expert_model_parallel_size",
                "etp": "expert_tensor_parallel_size"}
WORLD_KEY = "#world"  # findings about the world size point at the launch line
# the options the rules read: an unknown value of one of these skips rules (ML111 says which)
RELEVANT = frozenset(DEGREE_DESTS.values()) | {
    "num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "group_query_attention", "ffn_hidden_size",
    "num_experts", "seq_length", "max_position_embeddings", "micro_batch_size", "global_batch_size", "kv_channels",
    "num_layers_per_virtual_pipeline_stage", "num_virtual_stages_per_pipeline_rank", "decoder_first_pipeline_num_layers",
    "decoder_last_pipeline_num_layers", "use_tp_pp_dp_mapping", "num_distributed_optimizer_instances"}


# rules a layout search satisfies by construction: its batch plan keeps --global-batch-size and picks a
# --micro-batch-size that divides each data-parallel rank's share (meshlint/solve/batch.py)
BATCH_RULES = ("ML964",)


def refused_degree(spec: Spec, name: str, value: int) -> str | None:
    """The rule that refuses a pp whatever the other degrees (the layer split reads only pp and the options), so
    a layout search never enumerates it: ML963, or ML981 for a --pipeline-model-parallel-layout."""
    if name != "pp":
        return None
    split = layer_split(spec.extra.get("args") or {}, value)
    if not split.get("error"):
        return None
    return "ML981" if split.get("layout") else "ML963"


def derive_degrees(spec: Spec, degrees: dict, assigned: frozenset = frozenset()) -> dict:
    """expert_tensor_parallel_size follows tp where the launch does not write it (arguments.py:410-411) and a
    layout search does not choose it (``assigned``)."""
    if "etp" not in assigned and not spec.degree_present.get("etp"):
        degrees = dict(degrees, etp=degrees.get("tp"))
    return degrees


def derived_options(args: dict) -> dict:
    """The options validate_args derives from others before anything reads them: expert_tensor_parallel_size
    from tp where unset (arguments.py:410-411), sequence parallelism off at tp = 1 (arguments.py:907-913)."""
    out = {}
    if args.get("expert_tensor_parallel_size") is None:
        out["expert_tensor_parallel_size"] = args.get("tensor_model_parallel_size")
    if (args.get("tensor_model_parallel_size") or 0) == 1 and args.get("sequence_parallel"):
        out["sequence_parallel"] = False
    return out


def read(source) -> Spec:
    """The options as validate_args leaves them (before the world size is known)."""
    from meshlint.frameworks.megatron import flags

    spec = Spec(NAME)
    spec.framework = {"name": NAME, "version": VERSION, "decided_by": f"Megatron-LM launch ({TAG}, the release modelled)"}
    parsed = source.parsed
    # options an unreadable word may hold are unknown (null), never their defaults
    args = dict.fromkeys(flags.defaults()) if getattr(parsed, "incomplete", False) else flags.defaults()
    args.update({k: v for k, v in source.data.items()})
    unknown = {k for k, v in args.items() if isinstance(v, flags.Unknown)}
    for k in sorted(unknown):
        if k in RELEVANT:  # a data path from $1 skips nothing: only what the rules read is worth a note
            line, col = source.locate(k)
            spec.unreadable.append({"key": k, "reason": args[k].reason, "line": line, "col": col})
        args[k] = None
    for note in getattr(source.parsed, "unknown_words", ()):
        spec.unreadable.append(note)
    spec.extra["incomplete"] = bool(getattr(parsed, "incomplete", False))
    # options whose value is not known (an unreadable word; every option when the line is incomplete)
    spec.extra["unknown"] = sorted(args) if spec.extra["incomplete"] else sorted(unknown)
    spec.extra["env"] = dict(getattr(source.launch, "env", None) or {"known": False})
    spec.extra["refused_by_parser"] = [{"message": r.message, "line": r.line, "col": r.col, "later": r.later}
                                       for r in parsed.refusals]
    spec.extra["notes"] = list(parsed.notes) + list(getattr(source.launch, "notes", []) or [])
    spec.extra["parsed"] = dict(args)  # as the parser leaves them: what validate_args starts from (ML983)
    spec.extra["entry"] = getattr(source.launch, "entry", None)  # pretrain_gpt.py: its args_defaults (ML983)
    args.update(derived_options(args))
    for name, dest in DEGREE_DESTS.items():
        spec.degrees[name] = args.get(dest)
        spec.degree_keys[name] = dest
        spec.degree_present[name] = dest in source.data
    spec.degrees["dp_replicate"] = 1
    spec.degrees["dp_shard"] = -1           # data_parallel_size: world // (tp*pp*cp)
    spec.degree_keys["dp_shard"] = WORLD_KEY
    args.setdefault("bridge_recipe", False)  # True: a Megatron-Bridge recipe (meshlint/inputs/bridge_recipe.py)
    spec.extra["args"] = args
    spec.extra["given"] = sorted(source.data)
    spec.values.update(_model_values(args))
    return spec


def _model_values(a: dict) -> dict:
    """The model facts the generic rules read, from the flags themselves (no model table)."""
    heads, hidden = a.get("num_attention_heads"), a.get("hidden_size")
    groups = a.get("num_query_groups") if a.get("group_query_attention") else heads
    ffn = a.get("ffn_hidden_size")
    if ffn is None and isinstance(hidden, int):
        ffn = int((4 * hidden * 2 / 3) / 64) * 64 if a.get("swiglu") else 4 * hidden  # arguments.py:802-811
    experts = a.get("num_experts") or None  # 0 -> None (arguments.py:1014-1015)
    return {
        "model.n_layers": a.get("num_layers"), "model.n_heads": heads, "model.n_kv_heads": groups,
        "model.dim": hidden, "model.ffn_hidden_dim": ffn, "model.num_experts": experts,
        "model.is_moe": experts is not None, "model.max_seq_len": a.get("max_position_embeddings"),
        "model.moe_hidden_dim": a.get("moe_ffn_hidden_size") or (ffn if experts else None),
        "model.moe_top_k": a.get("moe_router_topk"), "model.known": True, "model.source": "flags",
        "model.called": "", "model.tie_embeddings": not a.get("untie_embeddings_and_output_weights"),
        "model.n_kv_heads_defaulted": not a.get("group_query_attention"),
    }


def resolve(spec: Spec, world: int | None) -> Resolution:
    """validate_args' data-parallel size, then initialize_model_parallel's two generators."""
    a = spec.extra["args"]
    d = dict(spec.degrees)
    res = Resolution(degrees=d)
    names = ("tp", "pp", "cp", "ep", "etp")
    missing = [n for n in names if d.get(n) is None and spec.extra.get("incomplete")]
    if missing:  # not refused: unknown (the launch holds words meshlint cannot read)
        d["dp_shard"] = None
        res.notes.append(f"{', '.join(missing)} unknown: the launch's options are not all readable (see ML111)")
        return res
    bad = [n for n in names if not isinstance(d.get(n), int) or d[n] < 1]
    if bad:
        for n in bad:
            d[n] = None
        d["dp_shard"] = None
        res.framework_error, res.error_stage = f"unusable degree: {', '.join(bad)}", "load"
        return res
    tp, pp, cp, ep, etp = (d[n] for n in names)
    model = tp * pp * cp
    expert = etp * ep * pp
    step = _lcm(model, expert)
    res.valid_worlds = ("multiple", step)
    order = ranks.TP_PP_DP_ORDER if a.get("use_tp_pp_dp_mapping") else ranks.DEFAULT_ORDER
    spec.extra["order"] = order
    if world is None:
        world, res.world_implied = step, True
        res.notes.append(f"world size unknown: shown for the smallest world the degrees allow ({step})")
    res.world_used = world
    if world % model:
        d["dp_shard"] = None
        res.framework_error = (f"AssertionError: world size ({world}) is not divisible by total_model_size "
                               f"(total_model_size={model}) (arguments.py:317)")
        res.error_stage = "resolve"
        return res
    dp = world // model
    d["dp_shard"] = dp
    res.notes.append(f"data_parallel_size = world ({world}) // (tp·pp·cp = {model}) = {dp}")
    if world % expert:
        res.framework_error = (f"RuntimeError: world_size ({world}) is not divisible by "
                               f"expert_tensor_model_pipeline_parallel size ({expert}) (parallel_state.py:793)")
        res.error_stage = "resolve"
        return res
    edp = world // expert
    dense, experts = ranks.grids(tp, pp, cp, ep, etp, world, order)
    spec.extra["grids"] = (dense, experts)
    if not (order.endswith("pp") or pp == 1 or edp == dp):
        res.framework_error = ("AssertionError: When not using pp-last rank ordering, the data parallel size of the "
                               f"attention and moe layers must be the same (dp {dp}, expert dp {edp}) "
                               "(parallel_state.py:808)")
        res.error_stage = "mesh"
        return res
    if pp > 1 and dense.strides[dense.order.index("pp")] != experts.strides[experts.order.index("pp")]:
        res.framework_error = ("AssertionError: Pipeline parallel groups are expected to be the same for Non-Expert "
                               "and Expert part (parallel_state.py:814)")
        res.error_stage = "mesh"
        return res
    res.meshes = {"dense": dense.mesh(), "expert": experts.mesh()}
    res.primary = "dense"
    for grid_name, token, label, _ in ranks.GROUPS:
        grid = dense if grid_name == "dense" else experts
        axis = grid.axis(token, label)
        if axis is not None and (axis.size > 1 or label in ("tp", "pp", "dp", "cp", "ep", "etp", "edp")):
            res.axes[label] = axis
    res.submeshes = submeshes(dense, experts)
    res.notes.append(f"RankGenerator order {order!r} (tp fastest){' (--use-tp-pp-dp-mapping)' if 'pp-dp' in order else ''}"
                     f"; expert grid etp·ep·edp·pp = {etp}·{ep}·{edp}·{pp}")
    return res


def submeshes(dense, experts) -> list:
    """``get_ranks(token)`` for every group initialize_model_parallel builds: the count and rank 0's."""
    from meshlint.limits import MAX_EXAMPLE_MEMBERS

    out = []
    for grid_name, token, label, glob in ranks.GROUPS:
        grid = dense if grid_name == "dense" else experts
        size = grid.size_of(token)
        members = grid.group(0, token, MAX_EXAMPLE_MEMBERS)
        shown = ", ".join(map(str, members)) + (", ..." if size > len(members) else "")
        out.append((f"{grid_name} get_ranks({token!r}) {glob}",
                    f"{grid.count(token)} groups of {size}; rank 0's: [{shown}]"))
    return out


def _lcm(a: int, b: int) -> int:
    from math import gcd

    return a * b // gcd(a, b)


# ----------------------------------------------------------------------------- the layer split

def layer_split(a: dict, pp: int) -> dict:
    """How Megatron-Core 0.16.1 splits the decoder layers over pp ranks and virtual stages, with the first
    check that refuses it: validate_args (arguments.py:520-575), TransformerConfig.__post_init__
    (transformer_config.py:1295-1480), get_num_layers_to_build (transformer_block.py:75-201).

    Returns {vp, counts: [[layers of each virtual stage] per pp rank], error, source, key}."""
    L = a.get("num_layers")
    lpv, nvs, layout = (a.get("num_layers_per_virtual_pipeline_stage"), a.get("num_virtual_stages_per_pipeline_rank"),
                        a.get("pipeline_model_parallel_layout"))
    first, last = a.get("decoder_first_pipeline_num_layers"), a.get("decoder_last_pipeline_num_layers")
    emb, loss = bool(a.get("account_for_embedding_in_pipeline_split")), bool(a.get("account_for_loss_in_pipeline_split"))
    out = {"vp": None, "counts": None, "error": None, "source": None, "key": None}

    def fail(message: str, source: str, key: str) -> dict:
        out.update(error=message, source=source, key=key)
        return out

    if not isinstance(L, int) or not isinstance(pp, int) or pp < 1:
        return out
    if sum(x is not None for x in (lpv, nvs, layout)) > 1:
        return fail("No more than one of the following arguments can be set at the same time: "
                    "--num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank, "
                    "--pipeline-model-parallel-layout", "arguments.py:503", "num_layers_per_virtual_pipeline_stage|"
                    "num_virtual_stages_per_pipeline_rank|pipeline_model_parallel_layout")
    if layout is not None:
        return _layout_split(out, a, layout, L, pp, first, last, emb, loss)
    extra = int(emb) + int(loss)
    vp = None
    if lpv is not None or nvs is not None:
        if nvs is None:
            if first is not None or last is not None:
                return fail("please use --num-virtual-stages-per-pipeline-rank to specify virtual pipeline parallel "
                            "degree when enable uneven pipeline parallelism", "arguments.py:530",
                            "num_layers_per_virtual_pipeline_stage")
            if (L + extra) % pp:
                return fail(f"number of layers of the model ({L + extra}) must be divisible pipeline model parallel "
                            f"size ({pp})", "arguments.py:543", "pipeline_model_parallel_size|num_layers")
            if lpv < 1 or ((L + extra) // pp) % lpv:
                return fail(f"number of layers per pipeline stage ({(L + extra) // pp}) must be divisible number of "
                            f"layers per virtual pipeline stage ({lpv})", "arguments.py:547",
                            "num_layers_per_virtual_pipeline_stage")
            vp = ((L + extra) // pp) // lpv
        else:
            vp = nvs
        if vp == 1:
            vp = None
    elif first is None and last is None and (L + extra) % pp and not a.get("bridge_recipe"):
        # (a Megatron-Bridge recipe has no validate_args: get_num_layers_to_build refuses it below)
        return fail(f"Number of layers ({L + extra}) should be divisible by the pipeline-model-parallel size ({pp})",
                    "arguments.py:570", "pipeline_model_parallel_size|num_layers")
    out["vp"] = vp
    if vp is not None:
        if vp < 1:
            return fail(f"virtual pipeline size {vp} must be positive", "arguments.py:547",
                        "num_virtual_stages_per_pipeline_rank")
        refused = _interleaved_refusal(a, pp)
        if refused:
            return fail(*refused)
    # TransformerConfig.__post_init__
    if (first is not None or last is not None) and (emb or loss):
        return fail("num_layers_in_first_pipeline_stage and num_layers_in_last_pipeline_stage cannot be set at the "
                    "same time with account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split",
                    "transformer_config.py:1300", "decoder_first_pipeline_num_layers|decoder_last_pipeline_num_layers")
    if first is not None or last is not None:
        rest, middle = L, pp
        for value, name in ((first, "first"), (last, "last")):
            if value is None:
                continue
            key = f"decoder_{name}_pipeline_num_layers"
            if value <= 0:
                return fail(f"num_layers_in_{name}_pipeline_stage must be larger than 0",
                            "transformer_config.py:1369" if name == "first" else "transformer_config.py:1388", key)
            if vp is not None and value % vp:
                return fail(f"number of layers at {name} stage: {value} must be divisible by virtual pipeline parallel "
                            f"degree {vp}", "transformer_config.py:1377" if name == "first" else
                            "transformer_config.py:1396", key)
            rest -= value
            middle -= 1
        if bool(rest) != bool(middle):
            return fail(f"Mismatch: {rest} middle layers remaining but {middle} middle PP stages available",
                        "transformer_config.py:1407", "decoder_first_pipeline_num_layers|decoder_last_pipeline_num_layers")
        if middle and rest % middle:
            return fail(f"number of layers at middle stage: {rest} must be divisible by the middle pipeline model "
                        f"parallel size {middle}", "transformer_config.py:1415", "pipeline_model_parallel_size|num_layers")
        if middle and vp is not None and (rest // middle) % vp:
            return fail(f"number of layers on each middle pipeline rank: {rest // middle} must be divisible by "
                        f"virtual pipeline parallel degree {vp}", "transformer_config.py:1429",
                        "num_virtual_stages_per_pipeline_rank")
        per = [rest // middle if middle else 0] * pp
        if first is not None:
            per[0] = first
        if last is not None:
            per[-1] = last
    else:
        if (L + extra) % pp:  # get_num_layers_to_build (also with --num-virtual-stages-per-pipeline-rank)
            return fail(f"num_layers ({L + extra}) should be divisible by pipeline_model_parallel_size ({pp})",
                        "transformer_block.py:155", "pipeline_model_parallel_size|num_layers")
        per = [(L + extra) // pp] * pp
    chunks = vp or 1
    if any(p % chunks for p in per):
        bad = next(p for p in per if p % chunks)
        return fail(f"num_layers_per_pipeline_rank {bad} should be divisible by vp_size {chunks}",
                    "transformer_block.py:174", "num_virtual_stages_per_pipeline_rank")
    counts = [[p // chunks] * chunks for p in per]
    if emb:
        counts[0][0] -= 1
        if counts[0][0] < 0:
            return fail("Not enough layers in the first virtual pipeline stage", "transformer_block.py:193",
                        "account_for_embedding_in_pipeline_split")
    if loss:
        counts[-1][-1] -= 1
        if counts[-1][-1] < 0:
            return fail("Not enough layers in the last virtual pipeline stage", "transformer_block.py:200",
                        "account_for_loss_in_pipeline_split")
    out["counts"] = counts
    built = sum(sum(c) for c in counts)
    if built != L:
        # Megatron-Core builds this without a word: with pp = 1 and both --decoder-first- and
        # --decoder-last-pipeline-num-layers, the one stage is first AND last, and the last count wins
        # (transformer_block.py:141-145) while TransformerConfig's middle check passes on negative numbers
        out["silent"] = True
        return fail(f"Megatron-Core 0.16.1 raises nothing but builds {built} of the {L} layers (the one pipeline "
                    f"stage is both first and last, and --decoder-last-pipeline-num-layers {last} wins)",
                    "transformer_block.py:141-145", "decoder_last_pipeline_num_layers|decoder_first_pipeline_num_layers")
    return out


def _interleaved_refusal(a: dict, pp: int) -> tuple | None:
    """validate_args' pp floor for virtual stages (arguments.py:573-581): (message, site, key) or None."""
    if a.get("overlap_p2p_comm", True) and pp <= 1:
        return ("When interleaved schedule is used, pipeline-model-parallel size should be greater than 1",
                "arguments.py:575", "pipeline_model_parallel_size")
    if not a.get("overlap_p2p_comm", True) and pp <= 2:
        return ("When interleaved schedule is used and p2p communication overlap is disabled, "
                "pipeline-model-parallel size should be greater than 2", "arguments.py:579",
                "pipeline_model_parallel_size")
    return None


def _layout_split(out: dict, a: dict, text: str, L: int, pp: int, first, last, emb: bool, loss: bool) -> dict:
    """The split a --pipeline-model-parallel-layout string gives (layout.py), or the first refusal, in the order
    the release meets them: validate_args parses the string, divides its stages by pp (arguments.py:516-527) and
    asks pp > 1 of virtual stages (:573-581); TransformerConfig refuses the other split options beside it
    (transformer_config.py:1317), then validates the layout."""
    from meshlint.frameworks.megatron import layout

    out["layout"] = True
    try:
        flat = layout.stages(text)
        if len(flat) % pp == 0 and len(flat) // pp > 1:
            refused = _interleaved_refusal(a, pp)
            if refused:
                raise layout.LayoutError(*refused)
        if first is not None or last is not None or emb or loss:
            given = [f for f, v in (("--decoder-first-pipeline-num-layers", first), ("--decoder-last-pipeline-num-"
                     "layers", last), ("--account-for-embedding-in-pipeline-split", emb),
                     ("--account-for-loss-in-pipeline-split", loss)) if v]
            raise layout.LayoutError(f"pipeline_model_parallel_layout cannot be set with other pipeline layout "
                                     f"arguments ({', '.join(given)})", "transformer_config.py:1317",
                                     "pipeline_model_parallel_layout|decoder_first_pipeline_num_layers|"
                                     "decoder_last_pipeline_num_layers")
        resolved = layout.resolve(text, pp, L, a.get("mtp_num_layers"))
    except layout.LayoutError as e:
        out.update(error=str(e), source=e.source, key=e.key)
        return out
    (out["embedding_at"], out["loss_at"]) = layout.holders(resolved["grid"])
    out.update(vp=resolved["vp"], counts=resolved["counts"], grid=resolved["grid"])
    return out


def pipeline_plan(spec: Spec, res: Resolution) -> dict:
    """The generic pipeline facts (stages, layer counts, microbatches) as Megatron computes them."""
    a = spec.extra.get("args", {})
    pp = res.degrees.get("pp")
    split = layer_split(a, pp) if isinstance(pp, int) else {}
    spec.extra["split"] = split
    counts = split.get("counts")
    vp = split.get("vp")
    mbs = a.get("micro_batch_size")
    effective = [sum(rank) for rank in counts] if counts else None
    if effective and a.get("account_for_embedding_in_pipeline_split"):
        effective[0] += 1   # the embedding counts as a layer of the first stage
    if effective and a.get("account_for_loss_in_pipeline_split"):
        effective[-1] += 1
    n_micro, per = _n_micro(a, res)
    group = microbatch_group_refusal(a, pp, vp, n_micro, per)
    return {
        "schedule": ("interleaved_1f1b" if vp else "1f1b") if isinstance(pp, int) and pp > 1 else None,
        "style": "megatron", "stages": (pp * (vp or 1)) if isinstance(pp, int) else None,
        # in the model's order (stage v·pp + r is rank r's chunk v), the order a layout string is written in
        "stages_per_rank": vp or 1, "layer_counts": [counts[r][v] for v in range(len(counts[0])) for r in range(
            len(counts))] if counts else None,
        # the per-rank load, the embedding/loss counted as a layer where the split counts them; first/last stage
        # sizes the user chose are deliberate, not an imbalance to warn about
        "effective_counts": (effective if counts and a.get("decoder_first_pipeline_num_layers") is None and a.get(
            "decoder_last_pipeline_num_layers") is None and a.get("pipeline_model_parallel_layout") is None else None),
        "n_microbatches": n_micro, "microbatch_size": mbs, "split_error": None,
        "schedule_error": group["error"] if group else None,
        "unknown_schedule": False, "microbatches_key": "global_batch_size",
        # the share of a step each rank idles: 1F1B's (pp - 1) / (m + pp - 1); the interleaved schedule's bubble is
        # (pp - 1) / (vp·m) of the compute (Narayanan et al. 2021, §2.2), so (pp - 1) / (vp·m + pp - 1) of the step
        "bubble": (pp - 1) / ((vp or 1) * n_micro + pp - 1) if n_micro and isinstance(pp, int) and pp > 1 else None,
    }


def microbatch_group_refusal(a: dict, pp, vp, m, per) -> dict | None:
    """What forward_backward_pipelining_with_interleaving (megatron/core/pipeline_parallel/schedules.py, core_v0.16.1)
    refuses of the microbatch count at the first step, where virtual stages make the schedule the interleaved one
    (get_forward_backward_func, schedules.py:144-146): with N = --microbatch-group-size-per-virtual-pipeline-stage
    (None -> pp, model_parallel_config.py:447-448), N > M or N < pp raises ValueError (schedules.py:995-1003),
    and 0 < M % N < pp raises RuntimeError (schedules.py:1005-1015). None where it runs or is not decidable (a
    --rampup-batch-size changes M as it ramps: not followed). Else {error, site, group, m, pp, valid: the first
    accepted microbatch counts at or above max(N, M // N * N), need: what an accepted count is, batches: the global batch sizes giving them (``per``:
    micro batch x dp, the samples of one microbatch)}."""
    if not (isinstance(pp, int) and pp > 1 and isinstance(vp, int) and vp > 1 and isinstance(m, int) and m > 0):
        return None
    if a.get("rampup_batch_size") is not None:
        return None
    n = a.get("microbatch_group_size_per_vp_stage")
    if n is None:
        n = pp
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        return None

    def refused(count: int) -> bool:
        return n > count or n < pp or 0 < count % n < pp

    if n > m or n < pp:
        error = ("ValueError: The number of contiguous micro-batches in a virtual pipeline stageshould range in "
                 f"[PP={pp} , M={m}]")
        site = "megatron/core/pipeline_parallel/schedules.py:995-1003"
        cause = (f"the microbatch group size {n} (--microbatch-group-size-per-virtual-pipeline-stage"
                 f"{'' if a.get('microbatch_group_size_per_vp_stage') is not None else ', default pp'}) must lie "
                 f"in [pp = {pp}, M = {m}]")
    elif 0 < m % n < pp:
        error = ("RuntimeError: The remainder of M (the total micro-batches) divided by N (number of contiguous "
                 "micro-batches in a virtual pipeline stage) should be 0, or larger than or equal to the "
                 f"pipeline-parallel size, but it is {m % n}.")
        site = "megatron/core/pipeline_parallel/schedules.py:1005-1015"
        cause = (f"M % N = {m} % {n} = {m % n}, which must be 0 or at least pp = {pp} (N = the microbatch group "
                 f"size, --microbatch-group-size-per-virtual-pipeline-stage"
                 f"{'' if a.get('microbatch_group_size_per_vp_stage') is not None else ', default pp'})")
    else:
        return None
    valid = []
    if n >= pp:
        count = max(n, (m // n) * n)
        while len(valid) < 3 and count <= m + 4 * n:
            if not refused(count):
                valid.append(count)
            count += 1
    need = (f"a multiple of {n}" + (" (pp)" if a.get("microbatch_group_size_per_vp_stage") is None else "")
            if n == pp else f"at least {n}, with a remainder by {n} of 0 or at least pp = {pp}")
    return {"error": error, "site": site, "cause": cause, "need": need, "group": n, "m": m, "pp": pp, "valid": valid,
            "batches": [c * per for c in valid] if per else []}


def bytes_per_param(spec: Spec) -> int | None:
    return None  # the memory estimate (ML504) needs a parameter count: not computed from flags yet


def megatron_facts(spec: Spec, res: Resolution) -> dict:
    """The ``megatron`` fact table rules read (see facts.FACT_DOCS)."""
    a = spec.extra.get("args", {})
    split = spec.extra.get("split") or layer_split(a, res.degrees.get("pp"))
    d = res.degrees
    world = res.world_used
    pp, etp, ep = d.get("pp"), d.get("etp"), d.get("ep")
    edp = world // (etp * ep * pp) if all(isinstance(x, int) and x > 0 for x in (world, etp, ep, pp)) \
        and world % (etp * ep * pp) == 0 else None
    return {
        "args": a, "given": spec.extra.get("given", []), "order": spec.extra.get("order"),
        "dp": d.get("dp_shard"), "edp": edp, "vp": split.get("vp"),
        "model_size": (d["tp"] * d["pp"] * d["cp"]) if all(isinstance(d.get(n), int) for n in ("tp", "pp", "cp")) else None,
        "expert_size": (etp * ep * pp) if all(isinstance(x, int) for x in (etp, ep, pp)) else None,
        "split_error": None if split.get("layout") else split.get("error"), "split_source": split.get("source"),
        "split_key": split.get("key"), "layout_error": split.get("error") if split.get("layout") else None,
        "layout": a.get("pipeline_model_parallel_layout"),
        "split_pps": split_pps(a, d, world) if split.get("error") else [],
        "layer_counts": split.get("counts"), "parser_refusals": spec.extra.get("refused_by_parser", []),
        "world_implied": res.world_implied, "incomplete": spec.extra.get("incomplete", False),
        "env": spec.extra.get("env"),
        # a Megatron-Bridge recipe builds its configs without validate_args: only the options-only checks
        "core_refusals": config_checks.refusals(
            a, spec.extra.get("unknown", ()), spec.extra.get("given", ()),
            None if a.get("bridge_recipe") else spec.extra.get("parsed", a), None if res.world_implied else world,
            spec.extra.get("entry")),
        # a Megatron-Bridge recipe builds its configs without validate_args
        "validate_refusals": [] if a.get("bridge_recipe") else validate_checks.refusals(
            spec.extra.get("parsed", a), spec.extra.get("unknown", ()), spec.extra.get("given", ()),
            None if res.world_implied else world, spec.extra.get("entry")),
        "pstate_refusals": [] if a.get("bridge_recipe") else pstate.refusals(
            a, spec.extra.get("unknown", ()), None if res.world_implied else d.get("dp_shard"), d.get("cp")),
        "microbatch_group": microbatch_group_refusal(a, d.get("pp"), split.get("vp"), *_n_micro(a, res)),
        "cp_comm_types": _cp_comm_types(a.get("cp_comm_type")),
        "decrease_batch": bool(a.get("decrease_batch_size_if_needed")),  # (not read from a Bridge recipe: False)
        "rampup": None if a.get("bridge_recipe") else rampup.refusal(
            a.get("rampup_batch_size"), a.get("global_batch_size"), a.get("micro_batch_size"),
            None if res.world_implied else d.get("dp_shard"), bool(a.get("decrease_batch_size_if_needed")),
            a.get("train_samples")),
    }


def _cp_comm_types(value) -> list | None:
    """--cp-comm-type (a list, default ['p2p']) or a Bridge recipe's model.cp_comm_type (a string, a list per layer,
    or None: TEDotProductAttention's p2p, transformer_engine.py:1240) as a list of strings; None where unknown."""
    if value is None:
        return ["p2p"]
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


def _n_micro(a: dict, res: Resolution):
    """(the microbatch count of a step, and micro batch x dp: the samples of one microbatch), or (None, None)."""
    dp, mbs, gbs = res.degrees.get("dp_shard"), a.get("micro_batch_size"), a.get("global_batch_size")
    if gbs is None and isinstance(mbs, int) and isinstance(dp, int):
        gbs = mbs * dp  # arguments.py:497-498
    if all(isinstance(x, int) and x > 0 for x in (gbs, mbs, dp)):
        return gbs // (mbs * dp), mbs * dp
    return None, None


def split_pps(a: dict, degrees: dict, world: int | None, most: int = 64) -> list:
    """The pipeline sizes up to ``most`` whose layer split these options accept (virtual stages, first/last
    stage counts and a layout included) and, where the world is known, that tp·cp·pp divides: what ML963's and
    ML981's help may propose."""
    tp, cp = degrees.get("tp"), degrees.get("cp")
    model = tp * cp if isinstance(tp, int) and isinstance(cp, int) and tp > 0 and cp > 0 else None
    return [p for p in range(1, most + 1) if not layer_split(a, p).get("error")
            and (not isinstance(world, int) or model is None or world % (model * p) == 0)]


def spec_from_degrees(degrees: dict, **other_values) -> Spec:
    """A Spec from degrees and option values by dest (for suggest/solve), read as a launch giving them would be."""
    data = {DEGREE_DESTS[n]: v for n, v in degrees.items() if n in DEGREE_DESTS}
    data.update(other_values)
    return read(_OptionsSource(data))


class _OptionsSource:
    """Options by dest with no launch line behind them: what ``read`` takes of a parsed launch (every option
    given and known, no refusal, no note; positions are the first line's)."""

    launch = None

    def __init__(self, values: dict):
        self.data = dict(values)
        self.parsed = self
        self.values = self.data
        self.given: dict = {}
        self.refusals: list = []
        self.notes: list = []
        self.incomplete = False

    def locate(self, key) -> tuple:
        return (1, 1)
