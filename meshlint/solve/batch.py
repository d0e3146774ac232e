"""Keeping the training recipe's global batch across layouts: what each data-parallel rank must read (microbatch
size and gradient accumulation) for a layout with another data-parallel degree to train on the same global batch.

The global batch is a hyperparameter: ``suggest`` and ``fix`` keep it (sequences and tokens per optimizer step)
by changing the local batch, the microbatch count or the gradient accumulation, and say which keys they changed.
How each framework counts it (docs/cost-model.md, "The global batch"):

* KempnerForge: ``batch_size · grad_accum_steps · dp_replicate · dp_shard`` sequences (``get_dp_info`` counts
  only the replicate and shard dims, kempnerforge/distributed/utils.py:17-40; EP and CP ranks read the same batch);
* torchtitan 0.2.x / 0.3.0: ``global_batch_size`` sequences when set (the trainer accumulates
  ``global / (local_batch_size · dp)`` microbatches), else ``local_batch_size · dp``, dp = dp_replicate · dp_shard;
* torchtitan main: ``num_tokens_per_train_step`` tokens when set, else
  ``num_tokens_per_microbatch_per_dp_rank · dp``;
* Megatron-LM: ``--global-batch-size`` sequences, ``global / (micro_batch_size · dp)`` microbatches per step,
  dp = world / (tp · pp · cp): a layout keeps it by its microbatch size alone.
"""

from __future__ import annotations

from typing import NamedTuple


class Recipe(NamedTuple):
    framework: str               # kempnerforge | torchtitan | main | megatron
    sequences: int | None        # global batch per optimizer step (None: token-counted, main)
    tokens: int                  # global tokens per optimizer step
    seq_len: int
    local: int                   # the config's sequences (main: tokens) per microbatch per data-parallel rank
    micro: int                   # torchtitan 0.2/0.3: sequences per pipeline microbatch; main: num_pp_microbatches
    keys: dict                   # role -> (config key, value as written or None)


class BatchPlan(NamedTuple):
    microbatch_tokens: int       # tokens of one microbatch on one data-parallel rank
    microbatches: int            # per optimizer step (gradient accumulation × pipeline microbatches)
    piped: tuple                 # (microbatch tokens, microbatches) the schedule sees with pp > 1
    changes: list                # [{key, old, new, what}]
    global_batch: dict           # {"sequences", "tokens"}


def _int(v) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v > 0 else None


def recipe(spec, dp: int | None) -> Recipe | None:
    """The config's global batch on its own layout (``dp``: its data-parallel degree, None where the layout does not
    resolve), or None where unknown."""
    v = spec.values
    if spec.dialect == "kempnerforge" and dp:
        b, s = _int(v.get("train.batch_size")), _int(v.get("train.seq_len"))
        a = _int(v.get("train.grad_accum_steps")) or 1
        if not b or not s:
            return None
        return Recipe("kempnerforge", b * a * dp, b * a * dp * s, s, b, 1,
                      {"local": ("train.batch_size", b), "accum": ("train.grad_accum_steps", a)})
    if spec.dialect == "megatron":
        # --global-batch-size sequences per step (num_microbatches_calculator.py: global ÷ (micro · dp)
        # microbatches of --micro-batch-size); without it validate_args sets micro · dp (arguments.py:497-498)
        a = spec.extra.get("args") or {}
        mbs, s = _int(a.get("micro_batch_size")), _int(a.get("seq_length"))
        if not mbs or not s or a.get("rampup_batch_size"):
            return None
        gbs = _int(a.get("global_batch_size")) or (mbs * dp if dp else None)  # written: no layout needed
        if not gbs:
            return None
        return Recipe("megatron", gbs, gbs * s, s, mbs, 1, {"local": ("micro_batch_size", mbs)})
    if spec.dialect != "torchtitan" or not dp:
        return None
    version = (getattr(spec, "framework", None) or {}).get("version") or "0.2.x"
    if version.startswith("main"):
        t, s = _int(v.get("training.num_tokens_per_microbatch_per_dp_rank")), _int(v.get(
            "training.max_context_length"))
        step = _int(v.get("training.num_tokens_per_train_step"))
        if not t or not s:
            return None
        total = step or t * dp
        return Recipe("main", None, total, s, t, _int(v.get("parallelism.num_pp_microbatches")) or 1,
                      {"local": ("training.num_tokens_per_microbatch_per_dp_rank", t),
                       "global": ("training.num_tokens_per_train_step", v.get("training.num_tokens_per_train_step"))})
    local, s = _int(v.get("training.local_batch_size")), _int(v.get("training.seq_len"))
    gbs = _int(v.get("training.global_batch_size"))
    micro = _int(v.get("pp_microbatch_size") if version == "0.2.x" else v.get(
        "parallelism.pipeline_parallel_microbatch_size")) or 1
    if not local or not s:
        return None
    total = gbs or local * dp
    return Recipe("torchtitan", total, total * s, s, local, micro,
                  {"local": ("training.local_batch_size", local),
                   "global": ("training.global_batch_size", v.get("training.global_batch_size"))})


def plan(r: Recipe, dp: int, pp: int, fits=None) -> BatchPlan | None:
    """How a layout with data-parallel degree ``dp`` keeps the recipe's global batch, or None when it cannot (the
    global batch does not split evenly over its ranks). Prefers the config's microbatch size, else the largest
    smaller one that divides the rank's share (and, with pp, still gives every stage a microbatch; ``fits``, a
    function of (microbatch tokens, microbatches), may reject a size that runs out of memory)."""
    unit = r.seq_len if r.framework == "main" else 1   # main counts tokens, in whole contexts
    share_units = (r.tokens // r.seq_len) if r.framework == "main" else r.sequences
    if share_units % dp:
        return None
    share = share_units // dp                          # sequences each data-parallel rank reads per step
    local = r.local // unit if r.framework == "main" else r.local
    options = [b for b in range(min(local, share), 0, -1) if share % b == 0]
    if r.framework == "torchtitan" and pp > 1:
        options = [b for b in options if b % r.micro == 0] or options
    def counts(b: int) -> tuple:
        """(microbatch tokens, microbatches per step as the schedule sees them) with microbatch ``b``."""
        count = share // b
        if pp > 1 and r.framework == "torchtitan":
            per = b // r.micro if b % r.micro == 0 else 1
            return r.micro * r.seq_len, count * per
        return b * r.seq_len, count

    if pp > 1 and r.framework != "main":  # a microbatch small enough that every stage gets one, where one exists
        options = [b for b in options if counts(b)[1] >= pp] or options[-1:]
    if not options:
        return None
    chosen = options[0]
    if fits is not None and not fits(*counts(chosen)):
        # the largest that fits (memory falls with the microbatch: a binary search), else the smallest
        lo, hi = 1, len(options) - 1
        chosen = options[-1]
        while lo <= hi:
            mid = (lo + hi) // 2
            if fits(*counts(options[mid])):
                chosen, hi = options[mid], mid - 1
            else:
                lo = mid + 1
    b = chosen
    accum = share // b
    changes = []
    if r.framework == "megatron":  # the global batch is written: only the microbatch changes
        if b != r.local:
            changes.append(_change(r.keys["local"], b, "sequences per microbatch (--micro-batch-size)"))
        piped = (b * r.seq_len, accum)
    elif r.framework == "kempnerforge":
        if b != r.local:
            changes.append(_change(r.keys["local"], b, "sequences per microbatch"))
        if accum != r.keys["accum"][1]:
            changes.append(_change(r.keys["accum"], accum, "gradient accumulation (pipeline microbatches with pp)"))
        piped = (b * r.seq_len, accum)
    elif r.framework == "torchtitan":
        if b != r.local:
            changes.append(_change(r.keys["local"], b, "sequences per data-parallel rank and microbatch"))
        key, old = r.keys["global"]
        if accum > 1 and old != r.sequences:
            changes.append(_change((key, old), r.sequences, "the global batch, so torchtitan accumulates "
                                                             f"{accum} microbatches"))
        piped = (r.micro * r.seq_len, (b // r.micro if b % r.micro == 0 else 1) * accum)
    else:
        if b * unit != r.local:
            changes.append(_change(r.keys["local"], b * unit, "tokens per microbatch per data-parallel rank"))
        key, old = r.keys["global"]
        if accum > 1 and old != r.tokens:
            changes.append(_change((key, old), r.tokens, f"the global batch in tokens, so torchtitan accumulates "
                                                         f"{accum} microbatches"))
        piped = (b * unit, max(r.micro, 1) * accum)
    return BatchPlan(b * r.seq_len, accum, piped, changes, {"sequences": r.sequences if r.sequences else
                                                            r.tokens // r.seq_len, "tokens": r.tokens})


def _change(key_old: tuple, new: int, what: str) -> dict:
    key, old = key_old
    return {"degree": None, "key": key, "old": old if isinstance(old, int) and not isinstance(old, bool) else None,
            "default": None, "new": new, "what": what}


def global_batch(r: Recipe | None, dp: int, local_tokens: int | None) -> dict | None:
    """The global batch a layout trains on when it keeps every rank's batch as written (no plan)."""
    if r is None or not local_tokens:
        return None
    tokens = local_tokens * dp
    return {"sequences": tokens // r.seq_len, "tokens": tokens}
