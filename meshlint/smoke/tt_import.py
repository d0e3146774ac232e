"""Import torchtitan v0.2 (the TOML era) from a source tree or an installed package, to run its own model code. [torch]

Its package ``__init__`` pulls the tokenizer and data stack, which the model, parallelize and loss path never
calls, so those packages are stood in for by empty modules when this machine lacks them (``stood_in`` says
which). Used by ``smoke --memory`` and by the tests that run torchtitan's own code (one process each: the
stand-ins and the torchtitan module stay for the life of the process)."""

from __future__ import annotations

import os
import sys


def import_torchtitan_v02(root: str):
    """Import torchtitan v0.2 from ``root`` in this process, with stand-ins for the third-party packages its
    parallelize path never calls. Returns (stood_in, pdm, ConfigManager, get_train_spec), or a str: why not."""
    import importlib.abc
    import importlib.machinery
    import importlib.util
    import types

    sys.path.insert(0, root)
    try:
        import torch  # noqa: F401
        from torch.testing._internal.distributed.fake_pg import FakeStore  # noqa: F401
    except Exception as exc:  # noqa: BLE001
        return f"torch with the fake process group is needed: {type(exc).__name__}: {exc}"

    class Stand:  # an empty stand-in: any attribute, call, subscript or subclass works
        def __init__(self, *a, **k):
            pass

        def __call__(self, *a, **k):
            return a[0] if a and callable(a[0]) else Stand()

        def __getattr__(self, name):
            return Stand()

        def __class_getitem__(cls, item):
            return cls

        def __getitem__(self, item):
            return Stand()

    class StandModule(types.ModuleType):
        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            cls = type(name, (Stand,), {})
            setattr(self, name, cls)
            return cls

    absent = {"tokenizers", "torchdata", "datasets", "tiktoken", "blobfile", "sentencepiece", "einops",
              "safetensors", "transformers", "PIL", "wandb"}
    stood_in: set = set()

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, name, path, target=None):
            top = name.split(".")[0]
            if top in absent and (top in stood_in or importlib.machinery.PathFinder.find_spec(top) is None):
                stood_in.add(top)
                return importlib.machinery.ModuleSpec(name, self, is_package=True)
            return None

        def create_module(self, spec):
            module = StandModule(spec.name)
            module.__path__ = []
            return module

        def exec_module(self, module):
            pass

    sys.meta_path.append(Finder())
    sys.modules["torch.utils.tensorboard"] = StandModule("torch.utils.tensorboard")
    pkg = os.path.join(root, "torchtitan")
    spec = importlib.util.spec_from_file_location("torchtitan", os.path.join(pkg, "__init__.py"),
                                                  submodule_search_locations=[pkg])
    sys.modules["torchtitan"] = importlib.util.module_from_spec(spec)  # its __init__ imports the tokenizer stack
    try:
        import torch._inductor.compile_fx  # noqa: F401 - before triton stands in (torch probes it at import)
        import torchtitan.protocols  # noqa: F401

        absent.add("triton")  # the MoE kernels import triton; torch itself must keep seeing it absent
        import torchtitan.models.moe.kernels  # noqa: F401
        absent.discard("triton")
        stood_in.discard("triton")
        for name in [n for n in sys.modules if n == "triton" or n.startswith("triton.")]:
            del sys.modules[name]
        import torchtitan.distributed.parallel_dims as pdm
        from torchtitan.config import ConfigManager
        from torchtitan.protocols.train_spec import get_train_spec
    except Exception as exc:  # noqa: BLE001
        return f"torchtitan v0.2 cannot be imported here: {type(exc).__name__}: {exc}"
    return stood_in, pdm, ConfigManager, get_train_spec


def framework_version(root: str) -> str | None:
    """The torchtitan version at ``root``: an installed package's dist-info, else None (a checkout)."""
    try:
        names = os.listdir(root)
    except OSError:
        return None
    for name in sorted(names):
        if name.startswith("torchtitan-") and name.endswith(".dist-info"):
            return name[len("torchtitan-"):-len(".dist-info")]
    return None
