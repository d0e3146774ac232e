"""Runs Megatron-Core 0.16.1's own code on configs read from stdin (JSON) and prints what it does (JSON).

Started by tests/test_real_megatron.py in a subprocess of its own (torch and Megatron are imported here,
never in the test process). Modes, one per line of input ``{"mode": ..., "cases": [...]}``:

- ``groups``: for each {tp, pp, cp, ep, etp, world, order}, ``initialize_model_parallel`` on torch's fake
  process group (world ranks, as rank 0): its verdict (the exception it raises, or none), rank 0's groups
  from parallel_state's getters, and every group of both RankGenerators it builds, constructed with the
  arguments initialize_model_parallel gives them (parallel_state.py:700-735).
- ``split``: for each {num_layers, pp, vp, first, last, emb, loss}, ``TransformerConfig(...)`` and then
  ``get_num_layers_to_build`` for every pp rank and virtual stage: the layers each builds, or the error.
- ``layout``: for each {layout, pp, num_layers, mtp, first}, the stage count validate_args divides by pp, then
  ``TransformerConfig(pipeline_model_parallel_layout=...)`` and the layout's ``get_num_layers_to_build`` for
  every pp rank and virtual stage, or the error.
- ``config``: for each {kw}, ``TransformerConfig(**kw)``: where in megatron/core it raises, or that it does not.
- ``params``: Megatron-Core's GPTModel (local spec) built on the meta device for each pp stage: its parameters
  (with ``mla`` {q_lora, kv_lora, qk, pe, v, qk_norm}: an MLATransformerConfig and multi-latent attention).
- ``validate``: for each {argv, world}, Megatron-LM's parser and ``validate_args`` (needs megatron.training,
  from a Megatron-LM checkout at core_v0.16.1 on sys.path): the data-parallel and virtual pipeline sizes,
  or the error. ``get_device_arch_version`` (it reads the GPU) answers 9 (Hopper): the one check that
  depends on it then asks for CUDA_DEVICE_MAX_CONNECTIONS=1, which this worker sets.
- ``rampup``: for each {ramp, gbs, mbs, dp, decrease, train_samples}, RampupBatchsizeNumMicroBatchesCalculator
  built as global_vars.py:93 builds it, then update_train_iters' iteration count (training.py:1139-1156, driven
  here with the real calculator) and every training iteration's update(consumed, consistency_check=True): the
  first exception, its line in num_microbatches_calculator.py and the iteration, or none.
- ``constant``: for each {gbs, mbs, dp, decrease}, ConstantNumMicroBatchesCalculator: the line it raises at, or none.
- ``pstate``: for each {tp, pp, cp, world, use_sharp, sharp_enabled_group, instances, hybrid, hierarchical,
  backend, and optionally ep and etp (1 and tp, as validate_args defaults them)}, ``initialize_model_parallel`` with those options: the line of parallel_state.py it raises at, or none.
- ``vargs``: as ``validate``, but any exception (SystemExit included) is a refusal, reported with the line of
  validate_args' own frame where it raised (a helper's raise: the line calling it).
- ``interleaved``: for each {pp, vp, group, m}, forward_backward_pipelining_with_interleaving's checks of the
  microbatch count (schedules.py:995-1015): the ValueError/RuntimeError they raise, or none.
- ``flex``: for each {tp, pp, ep, etp, world, experts, backend}, ``initialize_model_parallel`` on the fake process
  group as rank 0, then the release's MoEFlexTokenDispatcher built as MoELayer.__init__ builds it
  (moe_layer.py:210-216) from a real TransformerConfig and the process groups parallel_state made: the line of
  token_dispatcher.py it raises at, or none (DeepEP/HybridEP absent here: the managers' own "not installed"
  refusals come after the check and count as passing it).
- ``qkv``: for each {tp, heads, groups} (groups >= tp: below it the QKV split all-gathers on the GPU),
  the release's SelfAttention (local spec, CPU) built on the fake process group as rank 0, then its
  get_query_key_value_tensors on a zero input: the file:line in megatron/core it raises at, or none.
- ``build``: as ``vargs``, then, where validate_args accepts, ``core_transformer_config_from_args(args)`` (the
  TransformerConfig's __post_init__ runs in it): {stage: parser | validate | config | None, line, and for the
  config the file:line of the deepest frame in core_transformer_config_from_args or a config class}.
"""

from __future__ import annotations

import json
import os
import sys


def _fake_world(world: int, current: int | None) -> int:
    """Rank 0 of torch's fake process group of ``world`` ranks (a new one only when the size changes)."""
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if current != world:
        if dist.is_initialized():
            dist.destroy_process_group()
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=world)
    return world


def _groups(cases: list) -> list:
    import torch.distributed as dist

    import megatron.core.parallel_state as ps

    out = []
    current = None
    for c in cases:
        current = _fake_world(c["world"], current)
        order = "tp-cp-ep-pp-dp" if c["mapping"] else "tp-cp-ep-dp-pp"
        entry = {"error": None, "rank0": None, "dense": None, "expert": None}
        try:
            ps.initialize_model_parallel(c["tp"], c["pp"], None, context_parallel_size=c["cp"],
                                         expert_model_parallel_size=c["ep"], expert_tensor_parallel_size=c["etp"],
                                         order=order, create_gloo_process_groups=False)
        except (RuntimeError, AssertionError) as exc:
            entry["error"] = f"{type(exc).__name__}: {exc}"
        else:
            ranks = dist.get_process_group_ranks
            entry["rank0"] = {
                "tp": ranks(ps.get_tensor_model_parallel_group()), "pp": ranks(ps.get_pipeline_model_parallel_group()),
                "dp": ranks(ps.get_data_parallel_group()), "cp": ranks(ps.get_context_parallel_group()),
                "dp_cp": ranks(ps.get_data_parallel_group(with_context_parallel=True)),
                "mp": ranks(ps.get_model_parallel_group()), "ep": ranks(ps.get_expert_model_parallel_group()),
                "etp": ranks(ps.get_expert_tensor_parallel_group()), "edp": ranks(ps.get_expert_data_parallel_group()),
                "tp_ep": ranks(ps.get_expert_tensor_and_model_parallel_group()),
            }
            W, model = c["world"], c["tp"] * c["pp"] * c["cp"]
            dense = ps.RankGenerator(tp=c["tp"], ep=1, dp=W // model, pp=c["pp"], cp=c["cp"], order=order)
            edp = W // (c["etp"] * c["ep"] * c["pp"])
            expert = ps.RankGenerator(tp=c["etp"], ep=c["ep"], dp=edp, pp=c["pp"], cp=1, order=order)
            entry["dense"] = {t: dense.get_ranks(t) for t in ("tp", "cp", "dp", "dp-cp", "pp", "tp-pp", "tp-dp-cp",
                                                               "tp-dp", "tp-cp")}
            entry["expert"] = {t: expert.get_ranks(t) for t in ("ep", "tp", "tp-ep", "tp-ep-pp", "dp")}
        finally:
            ps.destroy_model_parallel()
        out.append(entry)
    return out


def _split(cases: list) -> list:
    import torch

    from megatron.core.transformer.transformer_block import get_num_layers_to_build
    from megatron.core.transformer.transformer_config import TransformerConfig

    out = []
    for c in cases:
        try:
            config = TransformerConfig(
                num_layers=c["num_layers"], hidden_size=64, num_attention_heads=4,
                pipeline_model_parallel_size=c["pp"], virtual_pipeline_model_parallel_size=c["vp"],
                pipeline_dtype=torch.bfloat16, num_layers_in_first_pipeline_stage=c["first"],
                num_layers_in_last_pipeline_stage=c["last"], account_for_embedding_in_pipeline_split=c["emb"],
                account_for_loss_in_pipeline_split=c["loss"])
            counts = [[get_num_layers_to_build(config, vp_stage=(v if c["vp"] else None), pp_rank=r)
                       for v in range(c["vp"] or 1)] for r in range(c["pp"])]
            out.append({"counts": counts, "error": None})
        except (ValueError, AssertionError) as exc:
            out.append({"counts": None, "error": f"{type(exc).__name__}: {exc}"})
    return out


def _config(cases: list) -> list:
    """For each {kw}: ``TransformerConfig(**kw)`` (pipeline_dtype bf16, as core_transformer_config_from_args
    sets it) and where in megatron/core it raises: {error, file, line} or {error: None}."""
    import traceback

    import torch

    from megatron.core.transformer.transformer_config import TransformerConfig

    out = []
    for c in cases:
        try:
            TransformerConfig(**c["kw"], pipeline_dtype=torch.bfloat16)
            out.append({"error": None, "file": None, "line": None})
        except (ValueError, AssertionError, TypeError, ZeroDivisionError) as exc:
            frame = traceback.extract_tb(exc.__traceback__)[-1]
            rel = frame.filename.replace(os.sep, "/")
            rel = "megatron/" + rel.split("/megatron/", 1)[1] if "/megatron/" in rel else rel
            out.append({"error": f"{type(exc).__name__}: {exc}", "file": rel, "line": frame.lineno})
    return out


def _layout(cases: list) -> list:
    """validate_args' parse of the string and its stage count (arguments.py:516-527), the conflict check and
    PipelineParallelLayerLayout with validate_layer_layout (transformer_config.py:1307-1359), then the decoder
    layers each pp rank and virtual stage builds."""
    import torch

    import megatron.core.parallel_state as ps
    from megatron.core.transformer.pipeline_parallel_layer_layout import PipelineParallelLayerLayout as Layout
    from megatron.core.transformer.transformer_config import TransformerConfig

    out = []
    for c in cases:
        try:
            stages = Layout.get_num_stages_from_str(c["layout"])
            assert stages % c["pp"] == 0, "stages not divisible by pp (arguments.py:520)"
            vp = stages // c["pp"]
            assert vp == 1 or c["pp"] > 1, "interleaved schedule needs pp > 1 (arguments.py:575)"
            ps.set_virtual_pipeline_model_parallel_world_size(vp if vp > 1 else None)
            config = TransformerConfig(
                num_layers=c["num_layers"], hidden_size=64, num_attention_heads=4, mtp_num_layers=c["mtp"],
                pipeline_model_parallel_size=c["pp"], virtual_pipeline_model_parallel_size=vp if vp > 1 else None,
                pipeline_dtype=torch.bfloat16, pipeline_model_parallel_layout=c["layout"],
                num_layers_in_first_pipeline_stage=c["first"])
            layout = config.pipeline_model_parallel_layout
            counts = [[layout.get_num_layers_to_build(vp_stage=v, pp_rank=r) for v in range(vp)]
                      for r in range(c["pp"])]
            out.append({"counts": counts, "vp": vp if vp > 1 else None, "error": None})
        except (ValueError, AssertionError, IndexError, NotImplementedError) as exc:
            out.append({"counts": None, "vp": None, "error": f"{type(exc).__name__}: {exc}"})
    return out


def _params(cases: list) -> list:
    """Megatron-Core's own GPTModel (the local spec: no Transformer Engine) built on the meta device for each
    {tp, pp, ep, layers, hidden, ffn, heads, groups, swiglu, bias, rmsnorm, experts, moe_ffn, topk, vocab,
    positions, untie} on the fake process group as rank 0 of each pp stage: the parameters each stage holds."""
    import torch
    import torch.distributed as dist
    from torch.testing._internal.distributed.fake_pg import FakeStore

    import megatron.core.parallel_state as ps
    from megatron.core.models.common.language_module.language_module import LanguageModule
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.tensor_parallel import model_parallel_cuda_manual_seed  # noqa: F401
    from megatron.core.transformer.transformer_config import MLATransformerConfig, TransformerConfig

    # a tied last stage's copy of the embedding is all-reduced from the first at build, on the GPU: skipped here
    # (the parameter exists before it)
    LanguageModule._is_in_embd_group = lambda self: False

    class NoParameters(torch.nn.Module):
        def __init__(self, *args, **kwargs):
            super().__init__()
    # MLASelfAttention's RotaryEmbedding asks for the GPU's index (multi_latent_attention.py:130, no CPU flag): its
    # inverse frequencies are a buffer, not a parameter, so the CPU stands in
    torch.cuda.current_device = lambda: "cpu"
    # without Transformer Engine its import there succeeds with a mock for TELinear (HAVE_TE True), which
    # multi_latent_attention.py:185 then hands to isinstance: TE is absent, so say so
    import megatron.core.transformer.multi_latent_attention as mla_module

    if not isinstance(mla_module.TELinear, type):
        mla_module.HAVE_TE = False
    out = []
    for c in cases:
        per_stage = []
        world = c["tp"] * c["pp"] * c["ep"]
        for stage in range(c["pp"]):
            if dist.is_initialized():
                ps.destroy_model_parallel()
                dist.destroy_process_group()
            rank = stage * c["tp"] * c["ep"]            # tp-cp-ep-dp-pp: pp is the slowest
            dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
            ps.initialize_model_parallel(c["tp"], c["pp"], expert_model_parallel_size=c["ep"],
                                         expert_tensor_parallel_size=1,
                                         create_gloo_process_groups=False)
            mla = c.get("mla")
            extra = dict(q_lora_rank=mla["q_lora"] or None, kv_lora_rank=mla["kv_lora"], qk_head_dim=mla["qk"],
                         qk_pos_emb_head_dim=mla["pe"], v_head_dim=mla["v"], qk_layernorm=mla["qk_norm"],
                         rope_type="rope") if mla else {}
            config = (MLATransformerConfig if mla else TransformerConfig)(
                **extra, num_layers=c["layers"], hidden_size=c["hidden"], ffn_hidden_size=c["ffn"],
                num_attention_heads=c["heads"], num_query_groups=c["groups"], gated_linear_unit=c["swiglu"],
                activation_func=torch.nn.functional.silu if c["swiglu"] else torch.nn.functional.gelu,
                add_bias_linear=c["bias"], normalization="RMSNorm" if c["rmsnorm"] else "LayerNorm",
                tensor_model_parallel_size=c["tp"], pipeline_model_parallel_size=c["pp"],
                expert_model_parallel_size=c["ep"], expert_tensor_parallel_size=1,
                sequence_parallel=False,  # the torch norms refuse it
                num_moe_experts=c["experts"] or None, moe_ffn_hidden_size=c["moe_ffn"] if c["experts"] else None,
                moe_router_topk=c["topk"], pipeline_dtype=torch.bfloat16, use_cpu_initialization=True,
                perform_initialization=False, bf16=True, params_dtype=torch.bfloat16)
            with torch.device("meta"):
                spec = get_gpt_layer_local_spec(
                    c["experts"] or None, normalization="RMSNorm" if c["rmsnorm"] else "LayerNorm",
                    multi_latent_attention=bool(mla), qk_layernorm=bool(mla and mla["qk_norm"]))
                if mla:   # the local DotProductAttention takes no k_channels (MLA passes them): it holds no
                    # parameters, so a stand-in without any takes its place
                    spec.submodules.self_attention.submodules.core_attention = NoParameters
                model = GPTModel(config, spec, vocab_size=c["vocab"],
                    max_sequence_length=c["positions"] or 4096,
                    position_embedding_type="learned_absolute" if c["positions"] else "rope",
                    share_embeddings_and_output_weights=not c["untie"],
                    pre_process=stage == 0, post_process=stage == c["pp"] - 1)
            experts = sum(p.numel() for n, p in model.named_parameters() if ".experts." in n)
            total = sum(p.numel() for p in model.parameters())
            per_stage.append({"dense": total - experts, "experts": experts})
        out.append(per_stage)
    if dist.is_initialized():
        dist.destroy_process_group()
    return out


def _validated(cases: list):
    """(case, args or None where the parser refuses, the exception validate_args raised or None) per case."""
    import argparse

    os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "1"
    import megatron.training.arguments as arguments

    arguments.get_device_arch_version = lambda: 9  # the GPU's compute capability: Hopper
    for c in cases:
        parser = arguments.add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
        try:
            with open(os.devnull, "w") as sink:
                stderr, sys.stderr = sys.stderr, sink
                try:
                    args = parser.parse_args(c["argv"])
                finally:
                    sys.stderr = stderr
        except (SystemExit, KeyError):  # a type converter's KeyError (an enum member by name) escapes argparse
            yield c, None, None
            continue
        args.rank, args.world_size = 0, c["world"]
        try:
            with open(os.devnull, "w") as sink:
                stdout, sys.stdout = sys.stdout, sink
                try:
                    arguments.validate_args(args, {"tokenizer_type": "GPT2BPETokenizer"})
                finally:
                    sys.stdout = stdout
            yield c, args, None
        except BaseException as exc:  # noqa: B036 - exit() inside validate_args is a refusal too
            yield c, args, exc


def _validate(cases: list) -> list:
    out = []
    for _, args, exc in _validated(cases):
        if args is None:
            out.append({"error": "parser", "dp": None, "vp": None})
        elif exc is None:
            out.append({"error": None, "dp": args.data_parallel_size, "vp": args.virtual_pipeline_model_parallel_size})
        elif isinstance(exc, (AssertionError, ValueError, RuntimeError)):
            out.append({"error": f"{type(exc).__name__}: {exc}", "dp": None, "vp": None})
        else:
            raise exc
    return out


def _rampup(cases: list) -> list:
    import traceback

    from megatron.core.num_microbatches_calculator import RampupBatchsizeNumMicroBatchesCalculator as Ramp

    out = []
    for c in cases:
        iteration = None
        try:
            calc = Ramp(c["gbs"], c["mbs"], c["dp"], c["decrease"], 1, *c["ramp"])
            iterations, consumed = 0, 0   # update_train_iters, with the real calculator
            while consumed <= c["ramp"][2] and consumed <= c["train_samples"]:
                calc.update(consumed, consistency_check=False)
                consumed += calc.get_current_global_batch_size()
                iterations += 1
            calc.update(0, consistency_check=False)
            if c["train_samples"] > consumed:
                iterations += (c["train_samples"] - consumed) // c["gbs"]
            consumed = 0
            for iteration in range(iterations):  # the training loop's consistency check
                calc.update(consumed, consistency_check=True)
                consumed += calc.get_current_running_global_batch_size()
            out.append({"error": None, "line": None, "iteration": None, "iterations": iterations})
        except Exception as exc:
            frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename.endswith(
                "num_microbatches_calculator.py")]
            out.append({"error": f"{type(exc).__name__}: {exc}", "line": frames[-1].lineno if frames else None,
                        "iteration": iteration})
    return out


def _constant(cases: list) -> list:
    import traceback

    from megatron.core.num_microbatches_calculator import ConstantNumMicroBatchesCalculator

    out = []
    for c in cases:
        try:
            ConstantNumMicroBatchesCalculator(c["gbs"], c["mbs"], c["dp"], c["decrease"], 1)
            out.append({"error": None, "line": None})
        except Exception as exc:
            frames = traceback.extract_tb(exc.__traceback__)
            out.append({"error": f"{type(exc).__name__}: {exc}", "line": frames[-1].lineno})
    return out


def _vargs(cases: list) -> list:
    import traceback

    out = []
    for _, args, exc in _validated(cases):
        if args is None or exc is None:
            out.append({"error": None if args else "parser", "line": None})
            continue
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.name == "validate_args"]
        out.append({"error": f"{type(exc).__name__}: {exc}"[:300], "line": frames[-1].lineno if frames else None})
    return out


_BUILD_FILES = ("megatron/training/arguments.py", "megatron/core/model_parallel_config.py",
                "megatron/core/transformer/transformer_config.py")


def _build(cases: list) -> list:
    import traceback

    from megatron.training.arguments import core_transformer_config_from_args

    out = []
    for _, args, exc in _validated(cases):
        if args is None:
            out.append({"stage": "parser", "site": None, "error": None})
            continue
        if exc is not None:
            frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.name == "validate_args"]
            out.append({"stage": "validate", "site": frames[-1].lineno if frames else None,
                        "error": f"{type(exc).__name__}: {exc}"[:300]})
            continue
        try:
            core_transformer_config_from_args(args)
            out.append({"stage": None, "site": None, "error": None})
        except Exception as exc:  # noqa: BLE001 - any refusal, reported where the build or the class raised it
            frames = [f for f in traceback.extract_tb(exc.__traceback__)
                      if f.filename.replace(os.sep, "/").endswith(_BUILD_FILES)]
            where = None
            if frames:
                rel = frames[-1].filename.replace(os.sep, "/")
                where = "megatron/" + rel.rsplit("/megatron/", 1)[1] + f":{frames[-1].lineno}"
            out.append({"stage": "config", "site": where, "error": f"{type(exc).__name__}: {exc}"[:300]})
    return out


def _pstate(cases: list) -> list:
    """For each {tp, pp, cp, world, use_sharp, sharp_enabled_group, instances, hybrid, hierarchical, backend},
    ``initialize_model_parallel`` with them (as Megatron-LM's initialize.py:364-386 passes them) on the fake
    process group as rank 0: {error, line} with the line of parallel_state.py where it raised, or {error: None}.
    SHARP's barriers (parallel_state.py:929, 1314) talk to the GPU: communication, not a check, so they are skipped."""
    import traceback

    import torch
    import torch.distributed as dist

    import megatron.core.parallel_state as ps

    dist.barrier = lambda *args, **kwargs: None
    torch.cuda.current_device = lambda: 0
    torch.cuda.synchronize = lambda *args, **kwargs: None
    out, current = [], None
    for c in cases:
        current = _fake_world(c["world"], current)
        try:
            ps.initialize_model_parallel(
                c["tp"], c["pp"], None, pipeline_model_parallel_comm_backend=c["backend"], use_sharp=c["use_sharp"],
                context_parallel_size=c["cp"], hierarchical_context_parallel_sizes=c["hierarchical"],
                expert_model_parallel_size=c.get("ep", 1), expert_tensor_parallel_size=c.get("etp", c["tp"]),
                hybrid_context_parallel=c["hybrid"], num_distributed_optimizer_instances=c["instances"],
                create_gloo_process_groups=False, sharp_enabled_group=c["sharp_enabled_group"])
            out.append({"error": None, "line": None})
        except Exception as exc:  # noqa: BLE001 - any refusal, reported where parallel_state raised it
            lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__)
                     if f.filename.replace(os.sep, "/").endswith("megatron/core/parallel_state.py")]
            out.append({"error": f"{type(exc).__name__}: {exc}", "line": lines[-1] if lines else None})
        finally:
            ps.destroy_model_parallel()
            ps._HYBRID_DP_CP_GROUPS.clear()
    return out


def _interleaved(cases: list) -> list:
    """For each {pp, vp, group, m}: forward_backward_pipelining_with_interleaving's microbatch checks
    (schedules.py:995-1015) on a real TransformerConfig, only the process groups faked and torch.zeros kept on
    the CPU: {error: "ValueError: ..." | "RuntimeError: ..." | None}; anything the schedule raises after those
    checks (it has no model to run) counts as accepted."""
    import torch

    import megatron.core.pipeline_parallel.schedules as sched
    from megatron.core.enums import ModelType
    from megatron.core.transformer.transformer_config import TransformerConfig

    zeros = torch.zeros
    sched.torch.zeros = lambda *a, **k: zeros(*a, **{x: y for x, y in k.items() if x != "device"})

    class Group:
        def __init__(self, n):
            self.n = n

        def size(self):
            return self.n

        def rank(self):
            return 0

    class P2P:
        def __init__(self, config, pp):
            self.config, self.pp_group = config, Group(pp)

    class Collection:
        pass

    out = []
    for c in cases:
        config = TransformerConfig(num_layers=c["pp"] * c["vp"], hidden_size=64, num_attention_heads=4,
                                   pipeline_model_parallel_size=c["pp"], virtual_pipeline_model_parallel_size=c["vp"],
                                   pipeline_dtype=torch.bfloat16, bf16=True,
                                   microbatch_group_size_per_vp_stage=c["group"])
        chunks = []
        for _ in range(c["vp"]):
            chunk = torch.nn.Module()
            chunk.config, chunk.model_type = config, ModelType.encoder_or_decoder
            chunks.append(chunk)
        pg = Collection()
        for name in ("tp", "cp", "embd", "pos_embd", "dp_cp"):
            setattr(pg, name, Group(1))
        pg.pp = Group(c["pp"])
        error = None
        try:
            sched.forward_backward_pipelining_with_interleaving(
                forward_step_func=None, data_iterator=[iter([])] * c["vp"], model=chunks, num_microbatches=c["m"],
                seq_length=16, micro_batch_size=1, forward_only=False, p2p_communicator=P2P(config, c["pp"]),
                pg_collection=pg)
        except (ValueError, RuntimeError) as exc:
            if "contiguous micro-batches" in str(exc) or "remainder of M" in str(exc):
                error = f"{type(exc).__name__}: {exc}"
        except Exception:  # noqa: BLE001 - past the checks: no model to run
            pass
        out.append({"error": error})
    return out


def _flex(cases: list) -> list:
    import traceback

    import torch

    import megatron.core.parallel_state as ps
    from megatron.core.process_groups_config import ProcessGroupCollection
    from megatron.core.transformer.moe.token_dispatcher import MoEFlexTokenDispatcher
    from megatron.core.transformer.transformer_config import TransformerConfig

    out, current = [], None
    for c in cases:
        current = _fake_world(c["world"], current)
        try:
            ps.initialize_model_parallel(c["tp"], c["pp"], None, expert_model_parallel_size=c["ep"],
                                         expert_tensor_parallel_size=c["etp"], create_gloo_process_groups=False)
            config = TransformerConfig(
                num_layers=c["pp"] * 2, hidden_size=64, num_attention_heads=4, num_moe_experts=c["experts"],
                moe_router_topk=2, moe_token_dispatcher_type="flex", moe_flex_dispatcher_backend=c["backend"],
                tensor_model_parallel_size=c["tp"], pipeline_model_parallel_size=c["pp"],
                expert_model_parallel_size=c["ep"], expert_tensor_parallel_size=c["etp"],
                sequence_parallel=c["tp"] > 1, add_bias_linear=False, pipeline_dtype=torch.bfloat16, bf16=True)
            local = c["experts"] // c["ep"]  # as BaseMoELayer.__init__ (moe_layer.py:100-110), rank 0
            MoEFlexTokenDispatcher(local, list(range(local)), config=config,
                                   pg_collection=ProcessGroupCollection.use_mpu_process_groups())
            out.append({"error": None, "line": None})
        except Exception as exc:  # noqa: BLE001 - reported where token_dispatcher.py raised it
            lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__)
                     if f.filename.replace(os.sep, "/").endswith("megatron/core/transformer/moe/token_dispatcher.py")]
            out.append({"error": f"{type(exc).__name__}: {exc}", "line": lines[-1] if lines else None})
        finally:
            ps.destroy_model_parallel()
    return out


def _qkv(cases: list) -> list:
    import traceback

    import torch

    import megatron.core.parallel_state as ps
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.process_groups_config import ProcessGroupCollection
    from megatron.core.transformer.attention import SelfAttention
    from megatron.core.transformer.transformer_config import TransformerConfig

    spec = get_gpt_layer_local_spec().submodules.self_attention
    out, current = [], None
    for c in cases:
        current = _fake_world(c["tp"], current)
        try:
            ps.initialize_model_parallel(c["tp"], 1, create_gloo_process_groups=False)
            config = TransformerConfig(num_layers=1, hidden_size=c["heads"] * 8, num_attention_heads=c["heads"],
                                       num_query_groups=c["groups"], tensor_model_parallel_size=c["tp"],
                                       use_cpu_initialization=True, add_bias_linear=False)
            attention = SelfAttention(config, spec.submodules, layer_number=1,
                                      attn_mask_type=spec.params["attn_mask_type"],
                                      pg_collection=ProcessGroupCollection.use_mpu_process_groups())
            attention.get_query_key_value_tensors(torch.zeros(4, 1, config.hidden_size))
            out.append({"error": None, "where": None})
        except Exception as exc:  # noqa: BLE001 - reported where megatron/core raised it
            frame = [f for f in traceback.extract_tb(exc.__traceback__)
                     if "megatron/core/" in f.filename.replace(os.sep, "/")][-1]
            where = "megatron/core/" + frame.filename.replace(os.sep, "/").split("megatron/core/", 1)[1]
            out.append({"error": f"{type(exc).__name__}: {exc}", "where": f"{where}:{frame.lineno}"})
        finally:
            ps.destroy_model_parallel()
    return out


def main() -> int:
    import warnings

    warnings.filterwarnings("ignore")
    for line in sys.stdin.read().splitlines():  # exit() in validate_args closes stdin
        request = json.loads(line)
        result = {"groups": _groups, "split": _split, "layout": _layout,
                  "params": _params, "validate": _validate, "vargs": _vargs, "rampup": _rampup, "constant": _constant,
                  "config": _config, "pstate": _pstate, "build": _build,
                  "interleaved": _interleaved, "flex": _flex, "qkv": _qkv}[request["mode"]](request["cases"])
        print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
