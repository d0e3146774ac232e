"""ML716 / ML717 against torchtitan's own ChunkedLossWrapper (main b5bcd76c6 and 0.3.0), run for real on CPU.

On seeded configs (tokens per microbatch or seq_len, cp, tp with and without sequence parallelism, pp,
num_chunks; only ones that pass the sequence/context-parallel divisibility ML704/ML705 check first) meshlint must
report ML716 (main) or ML717 (0.3.0) exactly where the framework's wrapper refuses the tensors a rank holds at the
first step. The framework's side (tests/real_chunked_loss_worker.py, one subprocess per version) shards the inputs
with the version's own ``prepare_context_parallel_input`` on a cp mesh of the fake process group and calls the
version's ``ChunkedLossWrapper`` forward and backward. tp, sequence parallelism and pp are not given to the worker:
the root norm hands the loss hidden states replicated on tp (models/common/decoder_sharding.py
pre_lm_head_norm_config), and a pipeline microbatch is one dataloader batch (main) or a slice of the batch rows
(0.3.0), so meshlint must not let them change its verdict either. Skips, saying why, where torch, spmd_types or
a torchtitan tree is missing.
"""

from __future__ import annotations

import importlib.util
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKER = Path(__file__).resolve().parent / "real_chunked_loss_worker.py"
TREES = {"main": ROOT.parent / "shared" / "frameworks" / "torchtitan-b5bcd76c6",
         "0.3.0": ROOT / ".frameworks" / "torchtitan-0.3.0"}
VERSION = {"main": "main@b5bcd76c6", "0.3.0": "0.3.0"}
CODE = {"main": "ML716", "0.3.0": "ML717"}
N = 40  # cases per version


def _absent(era: str) -> str | None:
    for package in ("torch", "spmd_types"):
        if importlib.util.find_spec(package) is None:
            return f"{package} is not installed (.ci/frameworks.sh)"
    if not (TREES[era] / "torchtitan" / "components" / "loss.py").is_file():
        return f"torchtitan {era} is not at {TREES[era]}"
    return None


def cases(era: str, seed: int) -> list[dict]:
    rnd = random.Random(seed)
    out = []
    while len(out) < N:
        cp, tp, pp = rnd.choice([1, 1, 2, 4, 8]), rnd.choice([1, 2, 4]), rnd.choice([1, 1, 2])
        sp = rnd.random() < 0.7
        chunks = rnd.choice([1, 2, 3, 4, 5, 6, 7, 8, 8, 8, 12, 16, 32])
        divisor = (tp if sp else 1) * (2 * cp if cp > 1 else 1)  # ML704 / ML705: the Trainer checks it first
        tokens = divisor * rnd.randint(1, 400)
        if rnd.random() < 0.4:  # lean towards counts that divide, so both verdicts are frequent
            tokens = divisor * chunks * rnd.randint(1, 40)
        out.append({"era": era, "tokens": tokens, "batch": rnd.choice([1, 2, 4]) * pp, "cp": cp, "tp": tp, "pp": pp,
                    "sp": sp, "chunks": chunks, "seed": len(out)})
    return out


def registry(case: dict) -> str:
    training = (f"num_tokens_per_microbatch_per_dp_rank={case['tokens']}" if case["era"] == "main"
                else f"local_batch_size={case['batch']}, seq_len={case['tokens']}")
    if case["pp"] > 1:
        training += ", num_tokens_per_train_step=-1" if case["era"] == "main" else ""
    world = case["cp"] * case["tp"] * case["pp"] * 2
    return f'''# meshlint: world_size={world} gpus_per_node=8
from torchtitan.components.loss import ChunkedLossWrapper
from torchtitan.config import ParallelismConfig, TrainingConfig
from torchtitan.trainer import Trainer
from torchtitan.models.llama3 import model_registry


def case():
    return Trainer.Config(
        model_spec=model_registry("debugmodel"),
        loss=ChunkedLossWrapper.Config(num_chunks={case["chunks"]}),
        parallelism=ParallelismConfig(context_parallel_degree={case["cp"]}, tensor_parallel_degree={case["tp"]},
                                      pipeline_parallel_degree={case["pp"]}, enable_sequence_parallel={case["sp"]}),
        training=TrainingConfig({training}),
    )
'''


def meshlint_errors(path: Path, era: str) -> set:
    from meshlint.engine.check import Options, check_file
    from meshlint.engine.ruleset import load_rules
    from meshlint.mesh.topology import CliTopology

    report = check_file(str(path), Options(rules=load_rules(), topology=CliTopology(), gpu_memory_gib=1e9,
                                           torchtitan_version=VERSION[era]))
    assert report.status == "checked", report.error
    return {f.code for f in report.findings if f.severity == "error"}


def real_verdicts(era: str, batch: list, tmp: Path) -> list:
    src, out = tmp / f"cases_{era}.json", tmp / f"out_{era}.json"
    src.write_text(json.dumps(batch))
    proc = subprocess.run([sys.executable, str(WORKER), str(TREES[era]), str(src), str(out)], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


@pytest.mark.parametrize("era", ["main", "0.3.0"])
def test_meshlint_agrees_with_the_real_chunked_loss(era, tmp_path):
    why = _absent(era)
    if why:
        pytest.skip(why)
    batch = cases(era, seed=716 if era == "main" else 717)
    real = real_verdicts(era, batch, tmp_path)
    diffs, refused = [], 0
    for case, got in zip(batch, real, strict=True):
        # the local token count the wrapper saw is the one the rule reasons about
        assert got["local"] == case["tokens"] // case["cp"], (case, got)
        if not got["ok"]:
            assert "divisible by num_chunks" in got["error"], (case, got)
            refused += 1
        path = tmp_path / f"case_{era}_{case['seed']}.py"
        path.write_text(registry(case))
        errors = meshlint_errors(path, era)
        if (CODE[era] in errors) != (not got["ok"]):
            diffs.append(f"{case}: framework {'refuses' if not got['ok'] else 'accepts'}, meshlint errors {sorted(errors)}")
    assert not diffs, "\n".join(diffs)
    assert 0 < refused < len(batch), f"the seeded sample must hold both verdicts ({refused} of {len(batch)} refused)"
