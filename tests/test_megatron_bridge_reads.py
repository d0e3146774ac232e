"""What the Megatron-Bridge recipe reader follows that pyregistry alone does not (meshlint/inputs/bridge_recipe.py,
bridge_writes.py): a helper that stops at a branch it cannot decide changes only the fields it may write;
getattr/hasattr/isinstance where the answer is certain; get_mixed_precision_config by name; and the JSON note that
says why a recipe's peak is not estimated."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from meshlint.frameworks.megatron import core_0_16
from meshlint.inputs import bridge_recipe as bridge
from meshlint.inputs.bridge_writes import written_fields

ROOT = Path(__file__).resolve().parent.parent

# the config classes as plain dataclasses (Bridge's training/config.py, reduced to what the recipes below set)
CONFIG = '''from dataclasses import dataclass


@dataclass
class MixedPrecisionConfig:
    bf16: bool = False
    fp16: bool = False
    grad_reduce_in_fp32: bool = True


@dataclass
class TrainingConfig:
    global_batch_size: int = 1
    micro_batch_size: int = 1


@dataclass
class OptimizerConfig:
    optimizer: str = "adam"
    use_distributed_optimizer: bool = False


@dataclass
class DistributedDataParallelConfig:
    use_distributed_optimizer: bool = False
    grad_reduce_in_fp32: bool = False


@dataclass
class ConfigContainer:
    model: object = None
    train: object = None
    optimizer: object = None
    ddp: object = None
    mixed_precision: object = None
'''
MIXED = '''from megatron.bridge.training.config import MixedPrecisionConfig

MIXED_PRECISION_RECIPES = {}


def register(func):
    MIXED_PRECISION_RECIPES[func.__name__] = func
    return func


@register
def bf16_mixed():
    return MixedPrecisionConfig(bf16=True, grad_reduce_in_fp32=True)


def get_mixed_precision_config(name):
    if isinstance(name, MixedPrecisionConfig):
        return name
    name = name.replace("-", "_")
    try:
        return MIXED_PRECISION_RECIPES[name]()
    except KeyError as err:
        raise ValueError(name) from err
'''
# shaped like Bridge's training/flex_dispatcher_backend.py (later than v0.3.1): returns under torch.cuda conditions
FLEX = '''import torch


def _fallback(model_config):
    model_config.moe_token_dispatcher_type = "alltoall"


def apply_flex(model_config, backend=None):
    experts = getattr(model_config, "num_moe_experts", None)
    if experts is None or experts == 0:
        return
    if not torch.cuda.is_available():
        model_config.moe_token_dispatcher_type = "flex"
        return
    if torch.cuda.get_device_properties(0).major < 9:
        _fallback(model_config)
        return
    model_config.moe_shared_expert_overlap = False


def escape(model_config):
    if not torch.cuda.is_available():
        return
    model_config.finalize()
'''
HEAD = '''import torch
from megatron.bridge.models.llama import Llama3ModelProvider8B
from megatron.bridge.training.config import ConfigContainer, DistributedDataParallelConfig, OptimizerConfig
from megatron.bridge.training.config import TrainingConfig
from megatron.bridge.training.flex import apply_flex, escape
from megatron.bridge.training.mixed_precision import get_mixed_precision_config


def _base():
    return ConfigContainer(
        model=Llama3ModelProvider8B(tensor_model_parallel_size=2, num_moe_experts=8, vocab_size=128256),
        train=TrainingConfig(global_batch_size=64, micro_batch_size=1),
        optimizer=OptimizerConfig(optimizer="adam", use_distributed_optimizer=True),
        ddp=DistributedDataParallelConfig(use_distributed_optimizer=True),
        mixed_precision=get_mixed_precision_config("bf16_mixed"),
    )
'''
RECIPES = '''

def flex_config() -> ConfigContainer:
    cfg = _base()
    apply_flex(cfg.model, "deepep")
    return cfg


def escape_config() -> ConfigContainer:
    cfg = _base()
    escape(cfg.model)
    return cfg


def reflect_config() -> ConfigContainer:
    cfg = _base()
    if not isinstance(cfg.mixed_precision, str):
        cfg.mixed_precision.grad_reduce_in_fp32 = False
    if getattr(cfg.model, "num_layers", 0) == 32 and hasattr(cfg.model, "num_moe_experts"):
        cfg.model.recompute_granularity = "full"
        cfg.model.recompute_method = "uniform"
        cfg.model.recompute_num_layers = 2
    return cfg


def hf_config() -> ConfigContainer:
    from megatron.bridge.models import AutoBridge

    cfg = _base()
    cfg.model = AutoBridge.from_hf_pretrained("org/not-cached").get_model_config()
    return cfg
'''


def _checkout(tmp_path) -> Path:
    src = tmp_path / "src" / "megatron" / "bridge"
    (src / "training").mkdir(parents=True)
    (src / "recipes").mkdir()
    (src / "training" / "config.py").write_text(CONFIG)
    (src / "training" / "mixed_precision.py").write_text(MIXED)
    (src / "training" / "flex.py").write_text(FLEX)
    recipe = src / "recipes" / "r.py"
    recipe.write_text(HEAD + RECIPES)
    return recipe


def _args(recipe: Path, function: str) -> dict:
    (source,) = bridge.recipe_sources(str(recipe), function)
    return core_0_16.read(source).extra["args"]


def test_a_helper_that_stops_early_makes_only_its_own_fields_unknown(tmp_path):
    recipe = _checkout(tmp_path)
    a = _args(recipe, "flex_config")
    assert "bridge_memory_unknown" not in a, a.get("bridge_memory_unknown")
    assert (a["bf16"], a["use_distributed_optimizer"], a["num_experts"], a["num_layers"]) == (True, True, 8, 32)
    # handed to a method not followed, the provider may change in any field: the peak is not estimated
    assert "bridge_memory_unknown" in _args(recipe, "escape_config")


def test_written_fields_of_a_parameter():
    tree = ast.parse(FLEX)
    defs = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    assert written_fields(defs["apply_flex"], "model_config", defs.get) == {
        "moe_token_dispatcher_type", "moe_shared_expert_overlap"}
    assert written_fields(defs["escape"], "model_config", defs.get) is None
    cases = {"def f(c):\n    x = c\n    x.a = 1\n": None,            # aliased
             "def f(c):\n    g(c)\n": None,                          # handed to a call not seen into
             "def f(c):\n    c.a.b = 1\n    c.d.append(2)\n    print(c.e, len(c.f))\n": {"a", "d"},
             "def f(c):\n    return c.a\n": {"a"},                   # handed out: the caller may write into it
             "def f(c):\n    if c.a > 1 and getattr(c, 'b'):\n        pass\n": set(),
             "def f(c):\n    if c is None:\n        return\n    c.a = 1\n": {"a"},
             "def f(c):\n    return [c]\n": None,                     # put in a container
             "def f(c):\n    setattr(c, 'a', 1)\n": None,
             "def f(c):\n    n = c.a or 1\n    m = c.b if c.d else 2\n    return n + m\n": set(),
             "def f(c):\n    n = c.a or 1\n    n.x = 2\n": {"a"},     # written through the local name
             "def f(c):\n    x = c or None\n    x.a = 1\n": None,     # ``c or None`` hands c on
             "def f(c):\n    getattr(c, 'a').x = 1\n": None,         # getattr hands c.a back
             "def f(c):\n    n = getattr(c, 'a', 0) or 0\n    for i in range(max(n, 1)):\n        pass\n": set()}
    for text, want in cases.items():
        (fdef,) = ast.parse(text).body
        assert written_fields(fdef, "c", lambda name: None) == want, text


def test_reflection_where_certain(tmp_path):
    recipe = _checkout(tmp_path)
    a = _args(recipe, "reflect_config")
    # isinstance(<MixedPrecisionConfig>, str) is False: the branch runs; getattr/hasattr of fields it holds
    assert a["grad_reduce_in_bf16"] is True
    assert (a["recompute_granularity"], a["recompute_num_layers"]) == ("full", 2)


def test_get_mixed_precision_config_by_name(tmp_path):
    recipe = _checkout(tmp_path)
    a = _args(recipe, "flex_config")
    assert a["bf16"] is True and a["accumulate_allreduce_grads_in_fp32"] is True


def test_why_a_recipe_is_not_sized_is_noted(tmp_path):
    recipe = _checkout(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_CACHE": str(tmp_path / "hf")}
    proc = subprocess.run([sys.executable, "-m", "meshlint", "check", f"{recipe}::hf_config", "--world-size", "8",
                           "--format", "json"], capture_output=True, text=True, env=env, timeout=300)
    (f,) = json.loads(proc.stdout)["files"]
    assert f["memory"] is None
    (note,) = [n for n in f["notes"] if n.startswith("memory: not estimated")]
    assert "org/not-cached's config.json is not in the local Hugging Face cache" in note


def test_deepseek_config_json_gives_multi_latent_attention(tmp_path):
    """models/deepseek/common.py's mapping: MLA shapes (q_lora_rank null: no query compression), q_a/kv_a norms,
    shared experts (moe_intermediate_size x n_shared_experts), the first dense layers."""
    model = tmp_path / "ds"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({
        "num_hidden_layers": 4, "hidden_size": 256, "num_attention_heads": 8, "num_key_value_heads": 8,
        "intermediate_size": 512, "n_routed_experts": 8, "moe_intermediate_size": 64, "n_shared_experts": 2,
        "first_k_dense_replace": 1, "num_experts_per_tok": 2, "q_lora_rank": None, "kv_lora_rank": 32,
        "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "vocab_size": 1000,
        "hidden_act": "silu", "rms_norm_eps": 1e-6, "tie_word_embeddings": False}))
    got, _ = bridge.hf_sizes(str(model), str(tmp_path))
    assert got["multi_latent_attention"] and got["qk_layernorm"] and got["q_lora_rank"] is None
    assert (got["kv_lora_rank"], got["qk_head_dim"], got["qk_pos_emb_head_dim"], got["v_head_dim"]) == (32, 16, 8, 16)
    assert got["moe_shared_expert_intermediate_size"] == 128 and got["moe_layer_freq"] == [0, 1, 1, 1]


def test_provider_table_has_mla_shapes_and_per_layer_moe_lists():
    table = bridge.providers()
    kimi = table["KimiK2Provider"]["fields"]
    assert (kimi["q_lora_rank"], kimi["kv_lora_rank"], kimi["qk_head_dim"], kimi["qk_pos_emb_head_dim"],
            kimi["v_head_dim"], kimi["qk_layernorm"]) == (1536, 512, 128, 64, 128, True)
    assert kimi["moe_layer_freq"] == [0] + [1] * 60        # field(default_factory=lambda: [0] + [1] * 60)
    assert table["MoonlightModelProvider16B"]["fields"]["q_lora_rank"] is None
