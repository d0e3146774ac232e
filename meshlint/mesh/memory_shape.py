"""Reads what the memory arithmetic (meshlint.mesh.memory) needs from an analysed config: the model's shapes, the
activation-checkpointing mode and its options, the dtypes, the optimizer implementation. No torch."""

from __future__ import annotations

from meshlint.mesh.memory import Shape


def _int(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _table(data: dict, name: str) -> dict:
    t = data.get(name) if isinstance(data, dict) else None
    return t if isinstance(t, dict) else {}


def shape(report, entry: dict | None, ac: str, microbatches_flat: int) -> Shape:
    """The Shape of an analysed config; ``entry`` is its model-table entry (torchtitan), ``ac`` the
    activation-checkpointing mode the cost model settled on (config, cluster profile or default)."""
    spec = report.spec
    v = spec.values
    data = getattr(report.source, "data", None) or {}
    e = entry or {}
    kf = spec.dialect == "kempnerforge"
    g = lambda key: _int(v.get(f"model.{key}")) or _int(e.get(key))  # noqa: E731
    n_layers, dim = g("n_layers"), g("dim")
    heads, kv = g("n_heads"), g("n_kv_heads")
    head_dim = g("head_dim") or (dim // heads if dim and heads else None)
    experts = g("num_experts") or 0
    tied = bool(v.get("model.tie_embeddings") or e.get("tied"))
    if kf:
        every = _int(v.get("model.moe_frequency")) or 1
        moe_layers = (n_layers or 0) // every if experts else 0
        top_k = _int(v.get("model.moe_top_k")) or 2
        moe_hidden = _int(v.get("model.moe_hidden_dim")) or _int(v.get("model.ffn_hidden_dim")) or 0
        shared = _int(v.get("model.shared_experts")) or 0
        precision = v.get("train.mixed_precision")
        # KempnerForge stores parameters, gradients and AdamW moments in the param dtype (scripts/train.py:136,
        # distributed/parallel.py:580-583); fp8 keeps bf16 master weights (config/training.py:52-65)
        state = compute = 4 if precision == "fp32" else 2
        fused = _table(data, "optimizer").get("fused", True)
        foreach = fused is False
        option = "op"
        budget = 0.5
        accumulate = (_int(v.get("train.grad_accum_steps")) or 1) > 1
        loss_parallel = False  # the output gathers the logits to the full vocabulary (tensor_parallel.py:168-172)
        compiled_loss = False  # KempnerForge compiles the model only (distributed/parallel.py)
        loss_chunks = 0
    else:
        moe_layers = _int(e.get("moe_layers")) or (n_layers or 0) if experts else 0
        top_k = _int(e.get("top_k")) or 1
        moe_hidden = _int(e.get("moe_hidden_dim")) or _int(v.get("model.moe_hidden_dim")) or 0
        shared = _int(e.get("shared_experts")) or 0
        # fp32 master weights, gradients and moments unless training.dtype = "bfloat16"; the compute dtype is
        # FSDP2's param_dtype (training.mixed_precision_param, default bfloat16)
        state = 2 if v.get("training.dtype") == "bfloat16" else 4
        compute = 4 if v.get("training.mixed_precision_param") == "float32" else 2
        impl = _table(data, "optimizer").get("implementation", v.get("optimizer.implementation", "fused"))
        foreach = impl == "foreach"
        table = _table(data, "activation_checkpoint")
        option = str(table.get("selective_ac_option", "2"))  # job_config.py:655 default
        types = getattr(report.source, "types", None)
        if types is not None:  # registries (0.3.0, main): SelectiveAC is op-level; MemoryBudgetAC a mode of its own
            option = "op"      # torchtitan/distributed/activation_checkpoint.py:185-290 in both
            if "MemoryBudget" in (types.get("activation_checkpoint") or ""):
                ac = "memory_budget"
        budget = table.get("memory_budget", 0.5)
        budget = float(budget) if isinstance(budget, (int, float)) and not isinstance(budget, bool) else 0.5
        accumulate = False  # torchtitan reduce-scatters every microbatch without pp (train.py:530-545)
        # job_config.py:354 disable_loss_parallel, default False
        loss_parallel = _table(data, "parallelism").get("disable_loss_parallel") is not True
        if isinstance(table.get("mode"), str) and table["mode"] == "memory_budget":
            ac = "memory_budget"
        # components/loss.py build_cross_entropy_loss (0.2.x) and BaseLoss._maybe_compile (registries): the loss is
        # torch.compile'd when compile.enable and "loss" in compile.components (default ["model", "loss"]); its
        # memory is inductor's (backend, default "inductor")
        # registries: ChunkedLossWrapper (Trainer.Config.loss) runs lm_head and the loss per chunk of tokens
        loss_chunks = 0
        # (graph_trainer's ChunkedLossWrapperWithParamGrads subclasses it and keeps its chunk loop)
        if types is not None and types.get("loss") in ("ChunkedLossWrapper.Config",
                                                       "ChunkedLossWrapperWithParamGrads.Config"):
            chunks = _table(data, "loss").get("num_chunks", 8)  # components/loss.py Config.num_chunks: 8
            loss_chunks = chunks if isinstance(chunks, int) and not isinstance(chunks, bool) and chunks >= 1 else 0
        compile_ = _table(data, "compile")  # a TOML's table; a registry's values are in spec.values
        components = v.get("compile.components", compile_.get("components", ["model", "loss"]))
        backend = v.get("compile.backend", compile_.get("backend", "inductor"))
        compiled_loss = (v.get("compile.enable", compile_.get("enable")) is True and isinstance(components, list)
                         and "loss" in components and backend == "inductor")
    ffn = _int(v.get("model.ffn_hidden_dim")) or _int(e.get("ffn_hidden_dim")) or (
        moe_hidden * (top_k + shared) if experts else None)
    params = _int(v.get("model.params")) or _int(e.get("params"))
    expert_params = moe_layers * experts * 3 * (dim or 0) * moe_hidden if experts else 0
    return Shape(framework="kempnerforge" if kf else "torchtitan", params=params, n_layers=n_layers, dim=dim,
                 ffn_hidden=ffn, n_heads=heads, n_kv_heads=kv, head_dim=head_dim, vocab=g("vocab_size"), tied=tied,
                 num_experts=experts, moe_layers=moe_layers, moe_hidden=moe_hidden, top_k=top_k if experts else 0,
                 shared_experts=shared, expert_params=expert_params, ac=ac, ac_option=option, memory_budget=budget,
                 state_bytes=state, compute_bytes=compute, foreach_optimizer=foreach, accumulate_unsharded=accumulate,
                 loss_parallel=loss_parallel, compiled_loss=compiled_loss, loss_chunks=loss_chunks, qk_norm=not kf and e.get("qk_norm") is True,
                 # 0.2.x TOML (no registry types): parallelize.py applies DDP to dp_replicate alone; the registry
                 # versions always apply FSDP2 (apply_fsdp_to_decoder, "with shard_degree=1 ... still installs")
                 ddp_replicate=not kf and getattr(report.source, "types", None) is None,
                 sac_saves_all_to_all=not kf and _sac_saves_all_to_all(report, v))


# torchtitan 0.2.x: the models whose _op_sac_save_list holds all_to_all_single (models/{llama4,deepseek_v3,gpt_oss}/
# infra/parallelize.py:59,41,50 @ 9810191bb^; qwen3's, llama3's and the experiments' do not); the registry versions
# share one list that does (distributed/activation_checkpoint.py:63 @ 0.3.0 and @ b5bcd76c6)
A2A_SAVED_V02 = ("llama4", "deepseek_v3", "gpt_oss")


def _sac_saves_all_to_all(report, values: dict) -> bool:
    if getattr(report.source, "types", None) is not None:
        return True
    return values.get("model.name") in A2A_SAVED_V02
