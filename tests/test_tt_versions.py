"""torchtitan versions: the table, telling checkouts apart by their code, and each version's ParallelDims.

The expected meshes below were printed by the real ``ParallelDims(...).build_mesh()`` of
torchtitan 0.3.0 and of main at b5bcd76c6 on the fake process group (torch 2.13.0,
spmd_types 0.2.3); tests/test_real_torchtitan.py compares hundreds more configs live.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import ROOT

from meshlint.frameworks.torchtitan import main_b5bcd76c6 as torchtitan_main, v0_3_0 as torchtitan_v030
from meshlint.frameworks import versions
from meshlint.errors import RuleFileError
from meshlint.engine.rules import build_rule

SHARED = ROOT.parent / "shared" / "frameworks"
MAIN = SHARED / "torchtitan-b5bcd76c6"
V02 = SHARED / "torchtitan-v0.2-9810191bb-parent"
V030 = next((p for p in (ROOT / ".frameworks" / "torchtitan-0.3.0", Path("/tmp/tt/v030"))
             if (p / "torchtitan" / "distributed" / "parallel_dims.py").is_file()), None)
MODULES = {"0.3.0": torchtitan_v030, "main@b5bcd76c6": torchtitan_main}


def resolve(version: str, world: int | None, backend: str | None = None, **degrees):
    module = MODULES[version]
    spec = module.spec_from_degrees(degrees, **({"spmd_backend": backend} if backend else {}))
    return module.resolve(spec, world)


# --------------------------------------------------------------------------- the table

def test_ids_aliases_and_modules():
    assert versions.ids("torchtitan") == ["0.1.0", "0.2.x", "0.3.0", "main@b5bcd76c6"]
    assert versions.canonical("torchtitan", "main@b5bcd76c6") == "main@b5bcd76c6"
    assert versions.canonical("torchtitan", "b5bcd76c6") is None  # strict: ids only
    for alias, canon in [("b5bcd76c6", "main@b5bcd76c6"), ("b5bcd76", "main@b5bcd76c6"), ("main", "main@b5bcd76c6"),
                         ("v0.3.0", "0.3.0"), ("0.2.2", "0.2.x"), ("v0.1.0", "0.1.0"), ("0.1", "0.1.0"), ("v0.2.1", "0.2.x"), ("0.4.0", None),
                         ("deadbeef", None), ("", None)]:
        assert versions.canonical("torchtitan", alias, strict=False) == canon, alias
    assert versions.module("torchtitan", "0.2.x").VERSION == "0.2.x"
    for version, module in MODULES.items():
        assert versions.module("torchtitan", version) is module
        assert module.VERSION == version and module.NAME == "torchtitan"
        for name in ("KEYS", "read", "resolve", "attach_model", "pipeline_plan", "bytes_per_param",
                     "spec_from_degrees", "DESCRIPTION", "COMMIT", "DATE"):
            assert hasattr(module, name), f"{version} lacks {name}"
    with pytest.raises(versions.VersionError, match="is not a version meshlint models"):
        versions.module("torchtitan", "9.9")


@pytest.mark.skipif(not MAIN.is_dir(), reason="../shared/frameworks/torchtitan-b5bcd76c6 is absent")
def test_identify_main_from_its_code_not_its_version_file():
    version, evidence = versions.identify(str(MAIN))
    assert version == "main@b5bcd76c6"
    assert "parallel_dims.py:188" in evidence and "configs.py:37" in evidence
    assert "version.txt says 0.2.2" in evidence
    assert versions.identify(str(MAIN / "torchtitan"))[0] == "main@b5bcd76c6"  # the package dir itself


@pytest.mark.skipif(not V02.is_dir(), reason="../shared/frameworks/torchtitan-v0.2-9810191bb-parent is absent")
def test_identify_the_toml_era():
    version, evidence = versions.identify(str(V02))
    assert version == "0.2.x" and "etp" in evidence


@pytest.mark.skipif(V030 is None, reason="torchtitan 0.3.0 is not unpacked (.ci/frameworks.sh)")
def test_identify_030():
    version, evidence = versions.identify(str(V030))
    assert version == "0.3.0" and "full_dtensor" in evidence and "no ep check" in evidence


def _fake_checkout(root: Path, parallel_dims: str, configs: str) -> str:
    """Marker lines only (what identify looks for), not framework code."""
    (root / "torchtitan" / "distributed").mkdir(parents=True)
    (root / "torchtitan" / "config").mkdir(parents=True)
    (root / "torchtitan" / "distributed" / "parallel_dims.py").write_text(parallel_dims)
    (root / "torchtitan" / "config" / "configs.py").write_text(configs)
    return str(root)


def test_identify_synthetic_checkouts(tmp_path):
    main_like = _fake_checkout(tmp_path / "a", 'class P:\n    spmd_backend: str = "spmd_types"\n'
                                               '    x = 1  # if sparse_region % ep != 0: raise\n',
                               "class T:\n    num_tokens_per_microbatch_per_dp_rank: int = 1\n")
    assert versions.identify(main_like)[0] == "main@b5bcd76c6"
    rel_like = _fake_checkout(tmp_path / "b", 'class P:\n    spmd_backend: str = "full_dtensor"\n',
                              "class T:\n    local_batch_size: int = 8\n")
    assert versions.identify(rel_like)[0] == "0.3.0"
    # between the two: the nearest (and it says so); the config keys the code has weigh most
    closer = _fake_checkout(tmp_path / "c", 'class P:\n    spmd_backend: str = "full_dtensor"\n'
                                            '    x = 1  # if sparse_region % ep != 0: raise\n',
                            "class T:\n    num_tokens_per_microbatch_per_dp_rank: int = 1\n")
    version, evidence = versions.identify(closer)
    assert version == "main@b5bcd76c6" and "nearest" in evidence and "4 of 5" in evidence
    tie = _fake_checkout(tmp_path / "e", 'class P:\n    spmd_backend: str = "full_dtensor"\n',
                         "class T:\n    num_tokens_per_microbatch_per_dp_rank: int = 1\n")
    version, evidence = versions.identify(tie)  # 3 of 5 markers each way: the token-budget keys decide
    assert version == "main@b5bcd76c6" and "nearest" in evidence and "3 of 5" in evidence
    older = _fake_checkout(tmp_path / "d", "class P:\n    ep: int\n", "")
    assert versions.identify(older)[0] is None
    assert versions.identify(str(tmp_path / "nothing"))[0] is None


def test_from_keys():
    assert versions.from_keys("torchtitan", {"training": {"num_tokens_per_microbatch_per_dp_rank": 8192}})[0] == \
        "main@b5bcd76c6"
    assert versions.from_keys("torchtitan", {"training": {"local_batch_size": 4}})[0] == "0.3.0"
    assert versions.from_keys("torchtitan", {"parallelism": {"spmd_backend": "full_dtensor"}})[0] == "0.3.0"
    assert versions.from_keys("torchtitan", {"parallelism": {"tensor_parallel_degree": 2}}) is None
    both = {"training": {"local_batch_size": 4, "max_context_length": 8}}
    assert versions.from_keys("torchtitan", both) is None
    assert versions.from_keys("kempnerforge", both) is None


def _dataclass_defaults(path: Path, classes: tuple) -> dict:
    """``section.field -> default`` of the config dataclasses, read with ast (never imported)."""
    sections = {"TrainingConfig": "training", "ParallelismConfig": "parallelism", "CompileConfig": "compile"}
    out = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef) and node.name in classes:
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value is not None:
                    value = item.value
                    if isinstance(value, ast.Call):  # field(default_factory=lambda: [...])
                        value = value.keywords[0].value.body
                    out[f"{sections[node.name]}.{item.target.id}"] = ast.literal_eval(value)
    return out


@pytest.mark.parametrize("version, root", [("main@b5bcd76c6", MAIN), ("0.3.0", V030)])
def test_every_default_is_the_dataclass_default(version, root):
    if root is None or not (root / "torchtitan" / "config" / "configs.py").is_file():
        pytest.skip(f"torchtitan {version} source is absent")
    defaults = _dataclass_defaults(root / "torchtitan" / "config" / "configs.py",
                                   ("TrainingConfig", "ParallelismConfig", "CompileConfig"))
    keys = {k.path: k for k in MODULES[version].KEYS if not k.path.startswith("model.")}
    assert set(keys) == set(defaults), f"fields: missing {set(defaults) - set(keys)}, extra {set(keys) - set(defaults)}"
    for path, default in defaults.items():
        assert keys[path].default == default, path
    backend = keys["parallelism.spmd_backend"]
    assert set(backend.choices) == set(MODULES[version].SEMANTICS.backends)


# --------------------------------------------------------------------------- ParallelDims

def test_main_spmd_types_meshes_as_parallel_dims_builds_them():
    res = resolve("main@b5bcd76c6", 32, "spmd_types", dp_replicate=2, dp_shard=-1, cp=2, tp=2, pp=2, ep=4)
    assert res.framework_error is None and res.degrees["dp_shard"] == 2
    assert res.global_meshes == {
        "dataloading": (("pp", "batch", "cp", "tp"), (2, 4, 2, 2)),
        "loss": (("loss_mesh",), (8,)),
        "dense": (("pp", "dp_replicate", "dp_shard", "cp", "tp"), (2, 2, 2, 2, 2)),
        "sparse": (("pp", "dp_replicate", "efsdp", "ep"), (2, 2, 2, 4)),
        "spmd_dense_for_fwdbwd": (("dp", "cp", "tp"), (4, 2, 2)),
        "spmd_sparse_for_fwdbwd": (("dp_replicate", "efsdp", "ep"), (2, 2, 4)),
    }
    # the 1-D meshes by name, and the first group of each (rank 0's), as the real ones print
    groups = {"pp": [0, 16], "batch": [0, 4, 8, 12], "loss": [0, 2, 4, 6, 8, 10, 12, 14], "dp_replicate": [0, 8],
              "cp": [0, 2], "tp": [0, 1], "ep": [0, 1, 2, 3], "efsdp": [0, 4], "dp": [0, 4, 8, 12],
              "dp_shard": [0, 4]}
    assert list(res.axes) == list(groups)
    assert {n: a.group(0) for n, a in res.axes.items()} == groups
    assert res.primary == "dense" and res.mesh.dims == ("pp", "dp_replicate", "dp_shard", "cp", "tp")
    assert res.valid_worlds == ("multiple", 16)


def test_main_partial_dtensor_and_the_fake_backend_meshes():
    res = resolve("main@b5bcd76c6", 8, "partial_dtensor", tp=2)
    assert res.global_meshes["dense"] == (("pp", "dp_replicate", "fsdp", "tp"), (1, 1, 4, 2))
    assert "spmd_dense_for_fwdbwd" not in res.global_meshes and "dp" not in res.axes
    optional = dict(res.submeshes)
    assert optional['get_optional_mesh("fsdp")'] == "4 ranks"
    assert optional['get_optional_mesh("efsdp")'].startswith("None (8 ranks on the fake backend")
    # ep = 1 under spmd_types: no spmd_sparse_for_fwdbwd, dp_shard kept alive at size 1
    res = resolve("main@b5bcd76c6", 8, None, tp=8)
    assert "spmd_sparse_for_fwdbwd" not in res.global_meshes
    assert dict(res.submeshes)['get_optional_mesh("dp_shard")'] == "1 rank"


def test_030_full_dtensor_and_spmd_meshes():
    res = resolve("0.3.0", 8, "full_dtensor", tp=2)
    assert res.global_meshes == {
        "dataloading": (("pp", "batch", "cp", "tp"), (1, 4, 1, 2)),
        "loss": (("loss_mesh",), (4,)),
        "dense": (("pp", "dp_replicate", "dp_shard", "cp", "tp"), (1, 1, 4, 1, 2)),
        "sparse": (("pp", "dp_replicate", "efsdp", "ep"), (1, 1, 8, 1)),
    }
    assert dict(res.submeshes)["spmd_meshes()"] == "[(dp_shard, tp) 4×2]"
    res = resolve("0.3.0", 32, "spmd_types", dp_replicate=2, cp=2, tp=2, pp=2, ep=4)
    assert dict(res.submeshes)["spmd_meshes()"] == "[(dp, cp, tp) 4×2×2, (dp_replicate, efsdp, ep) 2×2×4]"


def test_ep_that_does_not_divide_main_raises_early_030_dies_late():
    main = resolve("main@b5bcd76c6", 3, None, dp_shard=3, ep=2)
    assert main.error_stage == "resolve" and not main.meshes
    assert main.framework_error == "ValueError: expert_parallel_degree (2) must divide dp_shard * cp * tp (3)"
    late = resolve("0.3.0", 6, None, dp_shard=3, tp=2, ep=4)
    assert late.error_stage == "mesh" and late.meshes["sparse"] is None and late.meshes["dense"] is not None
    assert ("The product of mesh_sizes=(1, 1, 1, 4) is 4, but the original dimension at dim=0 has size 6. "
            "These must be equal for unflatten to work correctly.") in late.framework_error
    assert late.global_meshes == {}  # build_mesh raised: ParallelDims has no _global_meshes
    zero = resolve("0.3.0", 8, "partial_dtensor", ep=16)  # efsdp = 8 // 16 = 0
    assert "mesh_sizes=(1, 1, 0, 16) is 0" in zero.framework_error
    for version in MODULES:
        assert resolve(version, None, None, dp_shard=3, tp=2, ep=4).valid_worlds[0] == "none"
        assert resolve(version, None, None, tp=2, ep=4).valid_worlds == ("multiple", 4)


def test_the_asserts_before_the_meshes():
    floored = resolve("main@b5bcd76c6", 3, None, tp=4)
    assert floored.framework_error.startswith("AssertionError: assert dp_shard >= 1")
    product = resolve("0.3.0", 12, None, tp=8)  # dp_shard = 12 // 8 = 1, 1 * 8 != 12
    assert product.framework_error == ("AssertionError: Invalid parallel dims: dp_replicate(1) * dp_shard(1) * "
                                       "cp(1) * tp(8) * pp(1) != WORLD_SIZE(12)")
    bad = resolve("main@b5bcd76c6", 8, None, tp=0)
    assert bad.error_stage == "load" and "Parallelism degree should be >= 1" in bad.framework_error


def test_world_unknown():
    res = resolve("main@b5bcd76c6", None, None, tp=2)
    assert res.framework_error is None and res.degrees["dp_shard"] is None and not res.meshes
    implied = resolve("main@b5bcd76c6", None, None, dp_shard=2, tp=2)
    assert implied.world_implied and implied.world_used == 4


# --------------------------------------------------------------------------- reading

class _Src:
    def __init__(self, data, unknown=None):
        self.data, self._unknown = data, unknown or {}

    def unknown_of(self, path):
        parts = path.split(".")
        return next((self._unknown[".".join(parts[:i])] for i in range(len(parts), 0, -1)
                     if ".".join(parts[:i]) in self._unknown), None)

    def has_key(self, path):
        node = self.data
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True


class _U:
    def __init__(self, reason, line, col):
        self.reason, self.line, self.col = reason, line, col


def test_a_whole_section_unreadable_is_one_entry_and_every_value_unknown():
    spec = torchtitan_main.read(_Src({"parallelism": {"tensor_parallel_degree": 8}},
                                     {"parallelism": _U("built by reflection", 12, 5)}))
    assert spec.unreadable == [{"key": "parallelism", "reason": "built by reflection", "line": 12, "col": 5}]
    assert all(spec.degrees[n] is None for n in ("tp", "pp", "dp_shard", "ep"))
    assert spec.values["parallelism.spmd_backend"] is None  # unknown, not the default
    assert spec.values["training.max_context_length"] == 2048
    res = torchtitan_main.resolve(spec, 8)
    assert res.framework_error is None and not res.meshes and "could not be read statically" in res.notes[0]


def test_values_the_dataclasses_reject_are_problems():
    spec = torchtitan_main.read(_Src({"parallelism": {"num_pp_microbatches": 0, "spmd_backend": "full_dtensor"},
                                      "training": {"num_tokens_per_train_step": 0, "local_batch_size": 8},
                                      "model": {"name": "llama3", "flavor": "8B"}}))
    problems = {p["key"]: p for p in spec.problems}
    assert "num_pp_microbatches must be greater than 0" in problems["parallelism.num_pp_microbatches"]["note"]
    assert "must be either 'partial_dtensor' or 'spmd_types'" in problems["parallelism.spmd_backend"]["note"]
    assert "-1 or greater than 0" in problems["training.num_tokens_per_train_step"]["expected"]
    assert spec.values["parallelism.num_pp_microbatches"] is None
    assert [(u["key"], u["suggestion"]) for u in spec.unknown_keys] == [  # renamed after 0.3.0
        ("training.local_batch_size", "num_tokens_per_microbatch_per_dp_rank")]
    ok = torchtitan_v030.read(_Src({"parallelism": {"spmd_backend": "full_dtensor"}}))
    assert not ok.problems and ok.values["parallelism.spmd_backend"] == "full_dtensor"
    typo = torchtitan_v030.read(_Src({"parallelism": {"tensor_paralel_degree": 2}}))
    assert typo.unknown_keys[0]["suggestion"] == "tensor_parallel_degree"


def test_model_registry_defaults_of_the_version():
    spec = torchtitan_main.read(_Src({"model": {"name": "gpt_oss", "flavor": "20b"}}))
    assert spec.values["model.attn_backend"] == "varlen" and spec.values["model.pipelining"] is True
    spec = torchtitan_main.read(_Src({"model": {"name": "flux", "flavor": "flux-dev"}}))
    assert spec.values["model.pipelining"] is False
    spec = torchtitan_v030.read(_Src({"model": {"name": "kimi_k2_7", "flavor": "debugmodel",
                                                "moe_comm_backend": "hybridep"}}))
    assert spec.values["model.family"] == "kimi" and spec.values["model.moe_comm_backend"] == "hybridep"
    assert spec.framework == {"name": "torchtitan", "version": "0.3.0", "decided_by": None}


def test_spec_from_degrees_for_every_version():
    spec = versions.spec_from_degrees("torchtitan", "0.2.x", {"tp": 2, "etp": 2, "ep": 2}, seq_len=4096)
    assert spec.degrees["etp"] == 2 and spec.values["training.seq_len"] == 4096
    assert spec.framework["version"] == "0.2.x"
    spec = torchtitan_main.spec_from_degrees({"dp_replicate": 1, "dp_shard": -1, "cp": 1, "tp": 2, "pp": 1, "ep": 1},
                                             spmd_backend="partial_dtensor", disable_cuda_graphs=True)
    assert spec.values["parallelism.spmd_backend"] == "partial_dtensor"
    assert spec.values["training.disable_cuda_graphs"] is True
    with pytest.raises(ValueError, match="no degree 'etp'"):
        torchtitan_main.spec_from_degrees({"etp": 2})
    with pytest.raises(ValueError, match="no key meshlint reads"):
        torchtitan_v030.spec_from_degrees({}, num_pp_microbatches=2)


# --------------------------------------------------------------------------- rules limited to versions

RULE = {"code": "TEAM002", "name": "x", "severity": "error", "summary": "s", "check": "tp <= 4", "message": "m"}


def test_frameworks_field_limits_a_rule():
    rule = build_rule({**RULE, "frameworks": ["torchtitan@b5bcd76c6", "torchtitan@0.2.2"]}, "r.toml", "user")
    assert rule.frameworks == ("torchtitan@main@b5bcd76c6", "torchtitan@0.2.x")
    assert rule.dialects == ("torchtitan",)
    assert rule.applies_to("torchtitan", "torchtitan@0.2.x") and not rule.applies_to("torchtitan", "torchtitan@0.3.0")
    assert rule.when.source.startswith("framework.id in ['torchtitan@main@b5bcd76c6', 'torchtitan@0.2.x']")
    for bad, fragment in [(["torchtitan"], "not framework@version"), (["torchtitan@9.9"], "not a version"),
                          (["slurm@1"], "not framework@version"), ([], "non-empty")]:
        with pytest.raises(RuleFileError, match=fragment):
            build_rule({**RULE, "frameworks": bad}, "r.toml", "user")
    with pytest.raises(RuleFileError, match="not one of the rule's dialects"):
        build_rule({**RULE, "dialects": ["kempnerforge"], "frameworks": ["torchtitan@0.3.0"]}, "r.toml", "user")


def test_rl_policy_trainer_and_subclassed_sections():
    rl = _Src({"parallelism": {"pipeline_parallel_degree": 2}})
    rl.nested_under, rl.types = "trainer", {"": "PolicyTrainer.Config"}
    spec = torchtitan_main.read(rl)
    assert spec.values["trainer.runs_trainer"] is False
    assert spec.values["trainer.config_class"] == "PolicyTrainer.Config"
    graph = _Src({"compile": {"mode": "aot", "enable": True}})
    graph.types = {"": "GraphTrainer.Config", "compile": "GraphTrainerCompileConfig"}
    spec = torchtitan_main.read(graph)
    assert not spec.unknown_keys and spec.values["trainer.runs_trainer"] is True  # mode is the subclass's field
    plain = _Src({"compile": {"mode": "aot"}})
    assert [u["key"] for u in torchtitan_main.read(plain).unknown_keys] == ["compile.mode"]
