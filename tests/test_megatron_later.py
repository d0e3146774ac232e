"""Options of Megatron-LM releases after core_v0.16.1: the table (flags_later.json), its generator, and ML968's words.

meshlint reads a launch as core_v0.16.1 does; an option only a later release has is still refused (ML968), and the
finding names the first release that has it. The generator reads the releases' source statically; its reading of
core_v0.16.1 must give that release's own parser table. That comparison, and the table against a fresh reading,
run where MEGATRON_LM_GIT names a clone of Megatron-LM with its tags (CI has none: those tests skip, saying so);
the reading itself is tested here on a small tree made as a git repository.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from meshlint.engine.check import Options, check_all
from meshlint.engine.ruleset import load_rules
from meshlint.frameworks.megatron import flags
from meshlint.generate import megatron_flags_later as generate_later
from meshlint.inputs.launch import Word

HERE = Path(flags.__file__).parent
LATER = json.loads((HERE / "flags_later.json").read_text())
BASE = json.loads((HERE / "flags_core_0_16.json").read_text())
OPTIONS = Options(rules=load_rules())
LAUNCH = ("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4 --hidden-size 256 --num-attention-heads 4 "
          "--seq-length 128 --max-position-embeddings 128 --micro-batch-size 1 --global-batch-size 8 {extra}\n")


def words(*texts: str) -> list:
    return [Word(t, 1, 1 + 10 * i) for i, t in enumerate(texts)]


def test_table_names_its_sources_and_lists_only_options_0_16_lacks():
    assert LATER["after"] == "core_v0.16.1" == BASE["tag"]
    names = [r["name"] for r in LATER["read"]]
    assert names[:5] == list(generate_later.RELEASES) and names[-1] == f"main@{generate_later.MAIN[:10]}"
    assert all(re.fullmatch(r"[0-9a-f]{40}", r["commit"]) for r in LATER["read"])
    assert LATER["added"], "the table lists the options added since core_v0.16.1"
    for option, first in LATER["added"].items():
        assert option.startswith("--") and option not in BASE["flags"] and first in names
    assert not set(LATER["added"]) & set(generate_later.CONDITIONAL)


def test_a_later_option_is_still_refused_and_names_its_release():
    option, first = "--step-batch-size-schedule", LATER["added"]["--step-batch-size-schedule"]
    parsed = flags.parse(words("--tensor-model-parallel-size", "2", option, "0:16 1B:32"), "pretrain_gpt.py")
    (refusal,) = parsed.refusals
    assert refusal.later == first == "core_v0.18.0"
    assert refusal.message == (f"unrecognized arguments: {option} 0:16 1B:32 (core_v0.18.0 and later releases have "
                               f"{option}; core_v0.16.1, the release meshlint models, does not)")
    assert parsed.values["tensor_model_parallel_size"] == 2


def test_an_option_only_main_has_says_so():
    option = next(o for o, first in LATER["added"].items() if first.startswith("main@"))
    (refusal,) = flags.parse(words(option), "pretrain_gpt.py").refusals
    assert refusal.later.startswith("main@")
    assert f"Megatron-LM's main at {generate_later.MAIN[:10]} has {option}, no release up to core_v0.19.0 does" \
        in refusal.message


def test_a_misspelt_option_keeps_its_guess_and_has_no_release():
    (refusal,) = flags.parse(words("--tensor-model-paralel-size", "2"), "pretrain_gpt.py").refusals
    assert refusal.later is None and "did you mean --tensor-model-parallel-size?" in refusal.message


def test_an_entry_scripts_own_option_is_not_taken_for_a_later_one():
    vlm_only = next(o for o, e in BASE["flags"].items() if e.get("extra") == "vlm")
    (refusal,) = flags.parse(words(vlm_only), "pretrain_gpt.py").refusals
    assert refusal.later is None and "extra_args_provider adds the vlm options" in refusal.message


def test_the_finding_and_its_help(tmp_path):
    script = tmp_path / "train.sh"
    script.write_text(LAUNCH.format(extra="--step-batch-size-schedule '0:8 1B:16' --tensor-model-paralel-size 2"))
    (report,) = check_all(str(script), OPTIONS)
    later, typo = sorted((f for f in report.findings if f.code == "ML968"), key=lambda f: f.col)
    assert later.severity == "error" and "core_v0.18.0 and later releases have --step-batch-size-schedule" \
        in later.message
    assert later.help.startswith("meshlint reads a launch as Megatron-LM core_v0.16.1 runs it")
    assert "# meshlint: ignore[ML968]" in later.help and "fix the option" not in later.help
    assert typo.help.startswith("fix the option") and "core_v0.16.1 runs it" not in typo.help


def test_the_ignore_the_help_proposes_works(tmp_path):
    script = tmp_path / "train.sh"
    script.write_text("# meshlint: ignore[ML968]\n" + LAUNCH.format(extra="--step-batch-size-schedule '0:8 1B:16'"))
    (report,) = check_all(str(script), OPTIONS)
    assert not [f for f in report.findings if f.code == "ML968"]
    assert [f.code for f in report.suppressed] == ["ML968"]


def test_a_missing_or_damaged_table_leaves_the_0_16_words(monkeypatch, tmp_path):
    for content in (None, "{not json", '{"added": []}', '{"added": {"--x": 1}, "read": []}'):
        path = tmp_path / "flags_later.json"
        if content is not None:
            path.write_text(content)
        monkeypatch.setattr(flags, "_LATER", {})  # restored at the end: later tests read the real table
        monkeypatch.setattr(flags, "LATER_TABLE", str(path))
        assert flags.later_release("--step-batch-size-schedule") is None and flags.later_release("--x") is None
        (refusal,) = flags.parse(words("--step-batch-size-schedule", "0:8"), "pretrain_gpt.py").refusals
        assert refusal.later is None and refusal.message.startswith("unrecognized arguments: ")


# ----------------------------------------------------------------------------- the generator's reading

ARGUMENTS = '''
import argparse
from megatron.training.argument_utils import ArgumentGroupFactory
from megatron.core.transformer import TransformerConfig

def _add_network_size_args(parser):
    exclude = ["init_method"]
    ArgumentGroupFactory(TransformerConfig, exclude=exclude).build_group(parser)
    group = parser.add_argument_group(title="x")
    group.add_argument("--plain", type=int)
    group.add_argument("--opt-in", action=argparse.BooleanOptionalAction)
    return parser

def _add_training_args(parser):
    from megatron.training.training_config import TrainingConfig
    ArgumentGroupFactory(TrainingConfig, exclude=["skipped"]).build_group(parser)
    return parser
'''
PACKAGE = "from .transformer_config import TransformerConfig\n"
TRANSFORMER = '''
from dataclasses import dataclass, field
from megatron.core.model_parallel_config import ModelParallelConfig

@dataclass
class TransformerConfig(ModelParallelConfig):
    num_layers: int = 0
    init_method: object = None
    add_bias_linear: bool = True
    apply_rope_fusion: bool = False
    moe_flag: Optional[bool] = None
    union_flag: Union[bool, None] = True
    pipe_flag: bool | None = False
    count: Optional[int] = None
    internal: int = field(default=0, init=False)
    renamed: int = field(default=1, metadata={"argparse_meta": {"arg_names": ["--renamed-flag"]}})
'''
PARALLEL = '''
from dataclasses import dataclass
from typing import ClassVar

@dataclass
class ModelParallelConfig:
    tensor_model_parallel_size: int = 1
    sequence_parallel: bool = False
    registry: ClassVar[dict] = {}
'''
TRAINING = '''
from dataclasses import dataclass

@dataclass
class TrainingConfig:
    micro_batch_size: int | None = None
    skipped: int = 0
    exit_on_missing_checkpoint: bool = False
'''


def _git(root, *args):
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                   env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"})


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_the_static_reading_follows_argument_utils(tmp_path):
    files = {"megatron/training/arguments.py": ARGUMENTS, "megatron/core/transformer/__init__.py": PACKAGE,
             "megatron/core/transformer/transformer_config.py": TRANSFORMER,
             "megatron/core/model_parallel_config.py": PARALLEL, "megatron/training/training_config.py": TRAINING}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "tree")
    got = generate_later.options_at(str(tmp_path), "HEAD")
    assert got == {
        "--plain", "--opt-in", "--no-opt-in",                       # add_argument, BooleanOptionalAction's --no-
        "--tensor-model-parallel-size", "--sequence-parallel",     # the base dataclass's fields first
        "--num-layers", "--apply-rope-fusion",                     # a bool defaulting to False: store_true
        "--no-add-bias-linear", "--disable-add-bias-linear",       # a bool defaulting to True: store_false
        "--no-moe-flag", "--disable-moe-flag",                     # Optional[bool] = None: not False, store_false
        "--no-union-flag", "--disable-union-flag", "--pipe-flag",  # Union[bool, None]; bool | None = False
        "--count",                                                 # Optional[int]: a value
        "--renamed-flag",                                          # argparse_meta's own names
        "--micro-batch-size", "--exit-on-missing-checkpoint",      # a class imported inside the function
    }  # not: init_method and skipped (excluded), internal (init=False), registry (ClassVar)


@pytest.mark.skipif(not os.environ.get("MEGATRON_LM_GIT"),
                    reason="set MEGATRON_LM_GIT to a clone of Megatron-LM with its tags (core_v0.16.1 to core_v0.19.0)")
def test_the_table_is_what_the_releases_give():
    root = os.environ["MEGATRON_LM_GIT"]
    generate_later.check_reading(root, BASE)  # the static reading of 0.16.1 is the parser's own table
    assert generate_later.table(root) == LATER
