"""Ground truth for the torchtitan data and checkpoint refusal rules (ML870-ML879): torchtitan's own code.

For each torchtitan tree on this machine a child process imports the real config classes and functions
(optional packages that play no part in them -- datasets, tokenizers, torchdata, ... -- are inert stand-ins)
and runs each case: the value a rule's bad fixture uses must be refused with the message the rule quotes,
and the value its good fixture uses must be accepted. A tree that is absent, or a module that cannot be
imported here, skips its cases, saying which.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "frameworks"
TREES = {
    "0.2.x": SHARED / "torchtitan-v0.2-9810191bb-parent",
    "0.3.0": ROOT / ".frameworks" / "torchtitan-0.3.0",
    "main": SHARED / "torchtitan-b5bcd76c6",
}

pytestmark = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")

PRELUDE = textwrap.dedent('''
    import importlib.abc, importlib.machinery, json, sys, types, warnings
    warnings.filterwarnings("ignore")
    sys.path.insert(0, sys.argv[1])
    STUB = ("datasets", "torchdata", "tokenizers", "transformers", "grain", "safetensors", "einops", "torchvision",
            "tiktoken", "blobfile", "sentencepiece", "tensorboard", "wandb", "triton", "torch_checkpointing")
    ONLY_FOR_THE_CHECKOUT = ("triton",)  # torch probes triton itself: a stand-in only for the checkout's imports

    def _from_checkout():
        frame = sys._getframe(2)
        while frame is not None and "importlib" in frame.f_code.co_filename:
            frame = frame.f_back
        return frame is not None and frame.f_code.co_filename.startswith(sys.argv[1])

    class _Meta(type):  # a stand-in class: any attribute, call, subscript or subclass works
        def __getattr__(cls, name):
            if name.startswith("__") and name.endswith("__"):
                raise AttributeError(name)
            return _anything(cls.__name__ + "." + name)
        def __call__(cls, *args, **kwargs):
            if not cls.__dict__.get("_stand_in"):  # a real class deriving from a stand-in
                return super().__call__(*args, **kwargs)
            if len(args) == 1 and callable(args[0]) and not kwargs:
                return args[0]  # used as a decorator
            return _anything(cls.__name__ + "()")
        def __getitem__(cls, item):
            return cls

    def _anything(name):
        return _Meta(name, (), {"_stand_in": True})

    class _Stub(types.ModuleType):
        __path__ = []
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            if self.__name__.split(".")[0] in ONLY_FOR_THE_CHECKOUT:  # kernels: decorators, tl.constexpr, ...
                t = _anything(name)
            else:  # a plain class, which a framework class may derive from alongside its own metaclass
                t = type(name, (), {"__init__": lambda s, *a, **k: None,
                                    "__class_getitem__": classmethod(lambda c, i: c)})
            setattr(self, name, t)
            return t

    class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path, target=None):
            top = name.split(".")[0]
            if name == "torch.utils.tensorboard":  # torch's own shim refuses a missing tensorboard
                return importlib.machinery.ModuleSpec(name, self, is_package=True)
            if top in STUB and (top not in ONLY_FOR_THE_CHECKOUT or _from_checkout()):
                return importlib.machinery.ModuleSpec(name, self, is_package=True)
        def create_module(self, spec):
            return _Stub(spec.name)
        def exec_module(self, module):
            pass

    sys.meta_path.insert(0, _Finder())
    out = {}

    def case(name, fn):
        try:
            fn()
            out[name] = ["accepted", ""]
        except (ValueError, TypeError, AssertionError) as exc:
            out[name] = ["refused", f"{type(exc).__name__}: {exc}"]
        except ImportError as exc:
            out[name] = ["skipped", f"{type(exc).__name__}: {exc}"]
        except Exception as exc:  # anything else: the case is wrong, not the rule
            out[name] = ["error", f"{type(exc).__name__}: {exc}"]
''')

# ML875/ML876: the same patch-layout checks in 0.3.0 and main (needs torch and case() in the worker)
PATCH_ORDER = """
# ML875: the patch layouts (the first image of a batch), and MRoPE's need for block order
from types import SimpleNamespace
from torchtitan.hf_datasets.multimodal.mm_collator import MultiModalCollator
from torchtitan.hf_datasets.multimodal.utils.image import vision_to_patches

image = torch.zeros(1, 28, 28, 3)
for order in ("block", "raster", "column"):
    case(f"ml875-patches-{order}", lambda order=order: vision_to_patches(image, 14, 1, 2, patch_order=order))
def mrope(order):
    def run():
        try:
            MultiModalCollator._build_mrope_positions(
                SimpleNamespace(patch_order=order), torch.zeros(1, 4, dtype=torch.long), None, None, None,
                image_token_id=1, video_token_id=2)
        except AttributeError:
            pass  # past the patch_order check: the rest reads collator fields this stand-in lacks
    return run

for order in ("block", "raster"):
    case(f"ml875-mrope-{order}", mrope(order))
"""

CKPT_REG = """
import tempfile
import torch

def ckpt_case(name, exclude):
    def run():
        cfg = CheckpointManager.Config(enable=True, folder="ck", exclude_from_loading=exclude)
        m = CheckpointManager(cfg, dataloader=None, model_parts=[torch.nn.Linear(2, 2)], optimizers=None,
                              lr_schedulers=None, states={"train_state": object()}, sd_adapter=None,
                              base_folder=tempfile.mkdtemp())
        assert sorted(m.states) == ["dataloader", "lr_scheduler", "model", "optimizer", "train_state"], m.states
        m._states_to_load(False)
    case(name, run)
"""

# version -> the child's cases (Python run after PRELUDE), each recording case(name, fn)
CASES = {
    "0.3.0": """
from torchtitan.hf_datasets import text_datasets as T
from torchtitan.hf_datasets.interleaved import InterleavedDataset

class DS:  # what InterleavedDataset asks of a dataset (HuggingFaceTextDataset and ChatDataset have all three)
    def state_dict(self): return {}
    def load_state_dict(self, s): pass
    def reloop(self): pass

def interleave(weights, strategy="on_first_exhausted"):
    return lambda: InterleavedDataset([DS() for _ in weights], weights, seed=0, stopping_strategy=strategy)

# ML870
case("ml870-infinite-mixed", lambda: T.InterleavedHuggingFaceTextDataLoader.Config(
    sources=[T.HFDataSource(dataset="c4", infinite=False), T.HFDataSource(dataset="c4_test")]))
case("ml870-infinite-same", lambda: T.InterleavedHuggingFaceTextDataLoader.Config(
    sources=[T.HFDataSource(dataset="c4", weight=3), T.HFDataSource(dataset="c4_test", weight=1)]))
case("ml870-chat-infinite-mixed", lambda: T.InterleavedChatDataLoader.Config(
    sources=[T.ChatDataSource(dataset_path="json", infinite=False, sample_processor=len),
             T.ChatDataSource(dataset_path="csv", sample_processor=len)]))
case("ml870-negative-weight", interleave([2.0, -1.0]))
case("ml870-zero-weights", interleave([0.0, 0], "all_exhausted"))
case("ml870-zero-and-one", interleave([0.0, 1], "all_exhausted"))
case("ml870-strategy", interleave([1.0], "all"))
case("ml870-empty-sources", lambda: T.InterleavedChatDataLoader.Config(sources=[]))

# ML871
from torchtitan.components.checkpointer.dcp import CheckpointManager
""" + CKPT_REG + """
ckpt_case("ml871-misspelt", ["dataloader", "lr_schedulers"])
ckpt_case("ml871-known", ["dataloader", "train_state", "optimizer", "lr_scheduler"])

# ML873: the registered names, and the refusal of any other
from torchtitan.models.flux import flux_datasets as FL
from torchtitan.hf_datasets.multimodal import mm_datasets as MM
out["keys:torchtitan.hf_datasets.text_datasets"] = list(T.DATASETS)
out["keys:torchtitan.models.flux.flux_datasets"] = list(FL.DATASETS)
out["keys:torchtitan.hf_datasets.multimodal.mm_datasets"] = list(MM.MM_DATASETS)
case("ml873-text-unregistered", lambda: T._validate_dataset("fineweb", "/data/fineweb"))
case("ml873-text-registered", lambda: T._validate_dataset("c4", "/data/c4"))
case("ml873-flux-text-name", lambda: FL._validate_dataset("c4"))
case("ml873-mm-unregistered", lambda: MM._validate_mm_dataset("laion"))
import torch

""" + PATCH_ORDER,
    "main": """
from torchtitan.components.checkpointer.dcp import CheckpointManager
""" + CKPT_REG + """
ckpt_case("ml871-misspelt", ["dataloader", "lr_schedulers"])
ckpt_case("ml871-known", ["dataloader", "train_state", "optimizer", "lr_scheduler"])

# ML872: torch_checkpointing refuses remote paths (the folder joined under dump_folder, initial_load_path)
from torchtitan.components.checkpointer.torch_checkpointing import TorchCheckpointingManager

def torch_ckpt(folder, base, initial=None):
    def run():
        cfg = TorchCheckpointingManager.Config(enable=True, folder=folder, initial_load_path=initial)
        try:
            TorchCheckpointingManager(cfg, dataloader=None, model_parts=[torch.nn.Linear(2, 2)], optimizers=None,
                                      lr_schedulers=None, states={"train_state": object()}, sd_adapter=None,
                                      base_folder=base)
        except (AttributeError, TypeError) as exc:
            if "remote URI" in str(exc):
                raise
            # past the check: what follows builds the torch_checkpointing backend, a stand-in here
    return run

case("ml872-remote-folder", torch_ckpt("s3://bucket/run/checkpoint", tempfile.mkdtemp()))
case("ml872-remote-dump-folder", torch_ckpt("checkpoint", "s3://bucket/run"))
case("ml872-remote-dump-absolute-folder", torch_ckpt("/checkpoints/run", "s3://bucket/run"))
case("ml872-local-folder", torch_ckpt("/checkpoints/run", tempfile.mkdtemp()))

# ML874: the dataset tree's own checks
from torchtitan.components.data import (DatasetConcatConfig, DatasetMixConfig, FirstFitPackingConfig,
                                        HuggingFaceRandomAccessSource, HuggingFaceStreamingSource,
                                        SingleDatasetConfig, WeightedDataset)
from torchtitan.components.data.types import DatasetIterationPolicy
from torchtitan.hf_datasets.multimodal.mm_datasets import MMSamplePackingConfig

src = HuggingFaceRandomAccessSource.Config(path="json", split="train")
single = SingleDatasetConfig(source=src)
case("ml874-no-bins", lambda: FirstFitPackingConfig(dataset=single, num_packing_bins=0))
case("ml874-four-bins", lambda: FirstFitPackingConfig(dataset=single, num_packing_bins=4))
case("ml874-mm-no-bins", lambda: MMSamplePackingConfig(dataset=single, num_packing_bins=0))
case("ml874-name-in-kwargs", lambda: HuggingFaceStreamingSource.Config(path="allenai/c4", split="train",
                                                                      load_dataset_kwargs={"name": "en"}))
case("ml874-split-in-kwargs", lambda: HuggingFaceRandomAccessSource.Config(path="json", split="train",
                                                                          load_dataset_kwargs={"split": "train"}))
case("ml874-other-kwargs", lambda: HuggingFaceStreamingSource.Config(path="allenai/c4", split="train", name="en",
                                                                    load_dataset_kwargs={"trust_remote_code": True}))
case("ml874-zero-weight", lambda: DatasetMixConfig(datasets=(WeightedDataset(dataset=single, weight=0.8),
                                                             WeightedDataset(dataset=single, weight=0.0))
                                                   ).build(context=None, dataset_iteration_policy=None))


def mix(*weights):
    return lambda: DatasetMixConfig(datasets=tuple(WeightedDataset(dataset=single, weight=w) for w in weights)
                                    ).build(context=None, dataset_iteration_policy=None)


case("ml874-empty-mix", mix())
case("ml874-inf-weight", mix(1.0, float("inf")))
case("ml874-nan-weight", mix(float("nan")))
case("ml874-empty-concat", lambda: DatasetConcatConfig(datasets=()).build(
    context=None, dataset_iteration_policy=DatasetIterationPolicy(seed=0, shuffle=False, repeat=False, dp_rank=0,
                                                                  dp_world_size=1, streaming_shuffle_buffer_size=1)))

""" + PATCH_ORDER,
    "0.2.x": """
import tempfile
import torch
from torchtitan.components.checkpoint import CheckpointManager
from torchtitan.config.job_config import Checkpoint

def ckpt_case(name, exclude):
    def run():
        cfg = Checkpoint(enable=True, folder="ck", exclude_from_loading=exclude)
        m = CheckpointManager(dataloader=None, model_parts=[torch.nn.Linear(2, 2)], optimizers=None,
                              lr_schedulers=None, states={"train_state": object()}, checkpoint_config=cfg,
                              sd_adapter=None, base_folder=tempfile.mkdtemp())
        assert sorted(m.states) == ["dataloader", "lr_scheduler", "model", "optimizer", "train_state"], m.states
        m._states_to_load(False)
    case(name, run)

ckpt_case("ml871-misspelt", ["data_loader"])
ckpt_case("ml871-known", ["dataloader", "optimizer", "lr_scheduler"])

from torchtitan.hf_datasets import text_datasets as T
from torchtitan.models.flux import flux_datasets as FL
from torchtitan.experiments.vlm.datasets import mm_datasets as MM
out["keys:torchtitan.hf_datasets.text_datasets"] = list(T.DATASETS)
out["keys:torchtitan.models.flux.flux_datasets"] = list(FL.DATASETS)
out["keys:torchtitan.experiments.vlm.datasets.mm_datasets"] = list(MM.MM_DATASETS)
case("ml873-text-unregistered", lambda: T._validate_dataset("fineweb-edu", "/data/fineweb-edu"))
case("ml873-flux-text-name", lambda: FL._validate_dataset("c4"))
case("ml873-flux-registered", lambda: FL._validate_dataset("cc12m-test"))
""",
}

# (version, case, "refused"/"accepted", text the refusal must contain)
EXPECT = [
    ("0.3.0", "ml870-infinite-mixed", "refused", "same 'infinite' setting"),
    ("0.3.0", "ml870-infinite-same", "accepted", ""),
    ("0.3.0", "ml870-chat-infinite-mixed", "refused", "same 'infinite' setting"),
    ("0.3.0", "ml870-negative-weight", "refused", "All weights must be non-negative"),
    ("0.3.0", "ml870-zero-weights", "refused", "Sum of weights must be positive"),
    ("0.3.0", "ml870-zero-and-one", "accepted", ""),
    ("0.3.0", "ml870-strategy", "refused", "stopping_strategy must be"),
    ("0.3.0", "ml870-empty-sources", "refused", "At least one source"),  # ML112, from the schema check
    ("0.2.x", "ml871-misspelt", "refused", "data_loader not found in state_dict"),
    ("0.2.x", "ml871-known", "accepted", ""),
    ("0.3.0", "ml871-misspelt", "refused", "lr_schedulers not found in state_dict"),
    ("0.3.0", "ml871-known", "accepted", ""),
    ("main", "ml871-misspelt", "refused", "lr_schedulers not found in state_dict"),
    ("main", "ml871-known", "accepted", ""),
    ("main", "ml872-remote-folder", "refused", "checkpoint.folder is a remote URI"),
    ("main", "ml872-remote-dump-folder", "refused", "checkpoint.folder is a remote URI ('s3://bucket/run/checkpoint')"),
    ("main", "ml872-remote-dump-absolute-folder", "accepted", ""),
    ("main", "ml872-local-folder", "accepted", ""),
    ("main", "ml874-no-bins", "refused", "num_packing_bins must be positive"),
    ("main", "ml874-four-bins", "accepted", ""),
    ("main", "ml874-mm-no-bins", "refused", "num_packing_bins must be positive"),
    ("main", "ml874-name-in-kwargs", "refused", "first-class Hugging Face fields repeated in kwargs: ['name']"),
    ("main", "ml874-split-in-kwargs", "refused", "first-class Hugging Face fields repeated in kwargs: ['split']"),
    ("main", "ml874-other-kwargs", "accepted", ""),
    ("main", "ml874-zero-weight", "refused", "DatasetMixConfig requires finite, positive-weight datasets"),
    ("main", "ml874-empty-mix", "refused", "DatasetMixConfig requires finite, positive-weight datasets"),
    ("main", "ml874-inf-weight", "refused", "DatasetMixConfig requires finite, positive-weight datasets"),
    ("main", "ml874-nan-weight", "refused", "DatasetMixConfig requires finite, positive-weight datasets"),
    ("main", "ml874-empty-concat", "refused", "DatasetConcatConfig requires map-style children"),
    ("0.3.0", "ml875-patches-block", "accepted", ""),
    ("0.3.0", "ml875-patches-raster", "accepted", ""),
    ("0.3.0", "ml875-patches-column", "refused", "patch_order must be 'block' or 'raster'"),
    ("0.3.0", "ml875-mrope-block", "accepted", ""),
    ("0.3.0", "ml875-mrope-raster", "refused", "MRoPE requires patch_order='block'"),
    ("main", "ml875-patches-block", "accepted", ""),
    ("main", "ml875-patches-raster", "accepted", ""),
    ("main", "ml875-patches-column", "refused", "patch_order must be 'block' or 'raster'"),
    ("main", "ml875-mrope-block", "accepted", ""),
    ("main", "ml875-mrope-raster", "refused", "MRoPE requires patch_order='block'"),
    ("0.3.0", "ml873-text-unregistered", "refused", "Dataset fineweb is not supported"),
    ("0.3.0", "ml873-text-registered", "accepted", ""),
    ("0.3.0", "ml873-flux-text-name", "refused", "Dataset c4 is not supported"),
    ("0.3.0", "ml873-mm-unregistered", "refused", "Dataset laion is not supported"),
    ("0.2.x", "ml873-text-unregistered", "refused", "Dataset fineweb-edu is not supported"),
    ("0.2.x", "ml873-flux-text-name", "refused", "Dataset c4 is not supported"),
    ("0.2.x", "ml873-flux-registered", "accepted", ""),
]

_RESULTS: dict = {}


def results(version: str) -> dict:
    if version not in _RESULTS:
        root = TREES[version]
        if not (root / "torchtitan").is_dir():
            _RESULTS[version] = None
        else:
            proc = subprocess.run([sys.executable, "-c", PRELUDE + CASES[version] + "\nprint(json.dumps(out))\n",
                                   str(root)], capture_output=True, text=True, timeout=600, cwd=str(root))
            last = (proc.stderr.strip().splitlines() or [""])[-1]
            if proc.returncode != 0 and last.startswith(("ImportError", "ModuleNotFoundError")):
                _RESULTS[version] = {"": last}  # a package this machine lacks: the version's cases skip
                return _RESULTS[version]
            assert proc.returncode == 0, proc.stderr[-3000:]
            _RESULTS[version] = json.loads(proc.stdout.strip().splitlines()[-1])
    return _RESULTS[version]


@pytest.mark.parametrize("case", EXPECT, ids=[f"{c[0]}-{c[1]}" for c in EXPECT])
def test_the_framework_refuses_what_the_rule_says(case):
    version, name, verdict, text = case
    found = results(version)
    if found is None:
        pytest.skip(f"{TREES[version]} is not on this machine")
    if "" in found:
        pytest.skip(f"torchtitan {version} cannot be imported here: {found['']}")
    got, message = found[name]
    if got == "skipped":
        pytest.skip(message)
    assert got == verdict, message
    assert text in message, message


@pytest.mark.parametrize("version", ["0.2.x", "0.3.0"])
def test_the_generated_dataset_names_are_the_frameworks(version):
    """meshlint/data/datasets.toml (generated with ast) holds exactly the keys the imported dicts have."""
    import tomllib

    found = results(version)
    if found is None:
        pytest.skip(f"{TREES[version]} is not on this machine")
    with open(ROOT / "meshlint" / "data" / "datasets.toml", "rb") as f:
        registries = tomllib.load(f)[version]["registries"]
    if "" in found:
        pytest.skip(f"torchtitan {version} cannot be imported here: {found['']}")
    real = {k.split(":", 1)[1]: v for k, v in found.items() if k.startswith("keys:")}
    assert real and set(real) == set(registries)
    for kind, names in real.items():
        assert registries[kind]["names"] == names, kind


def test_the_dataset_table_is_up_to_date():
    """Regenerating meshlint/data/datasets.toml from the three trees gives the file as committed."""
    from meshlint.generate import datasets

    trees = {"0.2.x": TREES["0.2.x"], "0.3.0": TREES["0.3.0"], "main@b5bcd76c6": TREES["main"]}
    missing = [v for v, root in trees.items() if not (root / "torchtitan").is_dir()]
    if missing:
        pytest.skip(f"not on this machine: {', '.join(missing)}")
    text = datasets.generate({v: str(root) for v, root in trees.items()})
    assert text == (ROOT / "meshlint" / "data" / "datasets.toml").read_text(encoding="utf-8"), \
        "meshlint/data/datasets.toml is stale: regenerate it (" + datasets.COMMAND + ")"
