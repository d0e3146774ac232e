"""Megatron-Core 0.16.1's batch-size ramp-up (--rampup-batch-size START INCR SAMPLES) as it runs: the first refusal.

RampupBatchsizeNumMicroBatchesCalculator (megatron/core/num_microbatches_calculator.py) is built at start-up
(global_vars.py:93): its __init__ asserts (:398-429), divides the ramp-up samples by the number of increments
(:436) and calls update(0), which divides by that quotient (:456). Then every training iteration calls
update(consumed samples, consistency_check=True) (training.py:2736), which asserts that the batch size the
ramp has reached divides by micro batch x data parallel size (:475-476) unless --decrease-batch-size-if-needed.
The iterations run are update_train_iters' count (training.py:1128-1156). The ramp is followed segment by segment
(one batch size each) with Megatron's own float arithmetic, so a million-iteration ramp costs a few steps.
"""

from __future__ import annotations

SOURCE = "num_microbatches_calculator.py"
MAX_SEGMENTS = 20_000  # batch sizes followed at most (a ramp of more increments is left undecided: no finding)


class _TooLong(Exception):
    """The ramp has more batch sizes than meshlint follows."""


def refusal(ramp, gbs, mbs, dp, decrease: bool, train_samples) -> dict | None:
    """{site, message, key, iteration} of the first refusal, or None (also where a value is unknown).
    ``dp`` None: the world is not known, only what does not read it is checked."""
    if not isinstance(ramp, (list, tuple)) or len(ramp) != 3 or not all(isinstance(v, int) for v in ramp):
        return None
    start, incr, samples = ramp
    if not isinstance(gbs, int) and isinstance(mbs, int) and isinstance(dp, int):
        gbs = mbs * dp  # validate_args' default (arguments.py:497-498)
    if not isinstance(gbs, int):
        return None
    for ok, line, message, key in (
            (gbs > 0, 398, f"global batch size should be positive, got {gbs}.", "global_batch_size"),
            (start > 0, 401, f"start batch size should be positive, got {start}.", "rampup_batch_size"),
            (incr > 0, 404, f"batch size increment should be positive, got {incr}.", "rampup_batch_size"),
            (samples >= 0, 407, f"ramp-up samples should be non-negative, got {samples}.", "rampup_batch_size")):
        if not ok:
            return _found(line, f"AssertionError: {message}", key)
    if isinstance(mbs, int) and isinstance(dp, int) and mbs * dp <= 0:
        return _found(421, "AssertionError: micro batch size times data parallel size is not positive", "micro_batch_size")
    diff = gbs - start
    if diff < 0:
        return _found(425, "AssertionError: expected global batch size to be greater than or equal to start batch "
                           f"size, got {gbs} and {start}", "rampup_batch_size")
    if diff % incr:
        return _found(429, f"AssertionError: expected global batch size interval ({diff}) to be divisible by global "
                           f"batch size increment ({incr})", "rampup_batch_size")
    increments = diff // incr
    if increments == 0:
        return _found(436, f"ZeroDivisionError: the start batch size is the global batch size ({gbs}): no increment "
                           "to ramp over (ramup_samples / 0)", "rampup_batch_size")
    per = samples / increments
    if per == 0:
        return _found(456, "ZeroDivisionError: 0 ramp-up samples: update(0) divides the consumed samples by 0.0 "
                           "samples per increment", "rampup_batch_size")
    if decrease or not isinstance(mbs, int) or not isinstance(dp, int) or not isinstance(train_samples, int):
        return None
    unit = mbs * dp
    if start % unit == 0 and incr % unit == 0 and gbs % unit == 0:
        return None  # every batch size of the ramp divides
    try:
        return _first_indivisible(start, incr, samples, gbs, per, train_samples, mbs, dp)
    except _TooLong:
        return None


def _first_indivisible(start, incr, samples, gbs, per, train_samples, mbs, dp) -> dict | None:
    """The first batch size of the ramp training reaches that does not divide by mbs x dp."""
    unit = mbs * dp
    for first, consumed, batch, _ in _segments(start, incr, samples, gbs, per):
        if batch % unit == 0:
            continue
        # update_train_iters counts every iteration starting at <= both limits; past them, count them all
        if consumed > min(samples, train_samples) and first >= _train_iters(start, incr, samples, gbs, per,
                                                                             train_samples):
            return None
        return _found(476, f"AssertionError at training iteration {first} ({consumed} samples consumed): the ramp's "
                               f"batch size {batch} is not divisible by micro batch size ({mbs}) times data parallel "
                               f"size ({dp}) = {unit}", "rampup_batch_size", iteration=first)
    return None


def _found(line: int, message: str, key: str, iteration: int | None = None) -> dict:
    return {"site": f"{SOURCE}:{line}", "message": message, "key": key, "iteration": iteration}


def _batch(consumed: int, start: int, incr: int, samples: int, gbs: int, per: float) -> int:
    """update()'s current global batch size at ``consumed`` samples (num_microbatches_calculator.py:453-460)."""
    if consumed > samples:
        return gbs
    return start + int(consumed / per) * incr


def _segments(start, incr, samples, gbs, per, limit=None, max_iterations=None):
    """(first iteration, consumed samples then, batch size, iterations) of each run of iterations with one batch
    size, the consumed samples growing by the batch each iteration, while fewer than ``max_iterations`` have run
    and the consumed samples stay <= ``limit`` (update_train_iters' loop)."""
    consumed, iteration, count = 0, 0, 0
    while (max_iterations is None or iteration < max_iterations) and (limit is None or consumed <= limit):
        count += 1
        if count > MAX_SEGMENTS:
            raise _TooLong
        batch = _batch(consumed, start, incr, samples, gbs, per)
        if consumed > samples:  # the full batch from here on: one last segment (of no end without a limit)
            n = max_iterations - iteration if max_iterations is not None else (
                (limit - consumed) // batch + 1 if limit is not None else None)
            yield iteration, consumed, batch, n
            return
        steps = (batch - start) // incr
        n = max(1, min(-int(-(per * (steps + 1) - consumed) // batch), (samples - consumed) // batch + 1))
        while n > 1 and _batch(consumed + (n - 1) * batch, start, incr, samples, gbs, per) != batch:
            n -= 1   # Megatron's float division decides the boundary: check it, do not trust the estimate
        while _batch(consumed + n * batch, start, incr, samples, gbs, per) == batch and consumed + n * batch <= samples:
            n += 1
        if max_iterations is not None:
            n = min(n, max_iterations - iteration)
        if limit is not None:
            n = min(n, (limit - consumed) // batch + 1)
        yield iteration, consumed, batch, n
        consumed += n * batch
        iteration += n


def _train_iters(start, incr, samples, gbs, per, train_samples) -> int:
    """update_train_iters' count for sample-based training with a ramp (training.py:1139-1156)."""
    iterations, consumed = 0, 0
    for _, at, batch, n in _segments(start, incr, samples, gbs, per, limit=min(samples, train_samples)):
        iterations, consumed = iterations + n, at + n * batch
    if train_samples > consumed:
        iterations += (train_samples - consumed) // gbs
    return iterations
