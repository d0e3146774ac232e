"""torchtitan at any registry-era commit: the semantics applied are identified from the checkout's code and
stated, what the code has beyond them is named, and nothing crashes.

Two parts: a sample of real commits of torchtitan's history (9810191bb to the mirror's HEAD), exported from
the local mirror (skipped where there is none); and variants of the modelled b5bcd76c6 tree synthesized in
tmp (a field added, a model added, the ep check removed, ETP back, ...) that need no mirror.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
import tt_history

from meshlint.engine.check import Options, check_all
from meshlint.frameworks.torchtitan import ttdiff
from meshlint.frameworks import versions
from meshlint.engine.ruleset import load_rules
from meshlint.mesh.topology import CliTopology

B5 = Path("/work/shared/frameworks/torchtitan-b5bcd76c6")
SAMPLE = 24
REGISTRY = ("0.3.0", "main@b5bcd76c6")


@pytest.fixture(autouse=True)
def _fresh_reads():
    ttdiff.clear()
    from meshlint.inputs import ttroot

    ttroot._CHECKOUTS.clear()
    yield
    ttdiff.clear()
    ttroot._CHECKOUTS.clear()


# ----------------------------------------------------------------------------- the real history

needs_mirror = pytest.mark.skipif(not tt_history.available(), reason=f"no torchtitan mirror at {tt_history.MIRROR}")


@pytest.fixture(scope="session")
def history_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("tt-commits"))


def _sample():
    return tt_history.sample(SAMPLE) if tt_history.available() else []


@needs_mirror
def test_the_sample_spans_the_registry_era():
    rows = _sample()
    assert len(rows) >= 20
    shas = {sha for sha, _, _ in rows}
    for ref in ("9810191bb", "de329200b", "c4b409af2", "253a12a2a", "73aed7f6c"):
        assert ref in shas
    months = {date[:7] for _, date, _ in rows}
    assert {"2026-02", "2026-03", "2026-04", "2026-05", "2026-06", "2026-07", "2026-08"} <= months


@needs_mirror
@pytest.mark.parametrize("sha, date, why", _sample(), ids=lambda v: v if re.fullmatch(r"[0-9a-f]{9}", str(v)) else "")
def test_every_sampled_commit_is_checked_without_a_crash(sha, date, why, history_cache):
    root = tt_history.export(sha, history_cache)
    r = tt_history.check_tree(root)
    assert not r["crashes"], "\n".join(r["crashes"])
    assert not r["ml008"], r["ml008"]
    assert r["configs"] > 10 and r["unstated"] == 0
    assert r["version"] in REGISTRY and "identified from the code" in r["decided_by"]
    assert r["launch"].startswith("checked"), r["launch"]
    # the semantics follow the code: the token-budget keys are main's, the old batch keys 0.3.0's
    tokens = "num_tokens_per_microbatch_per_dp_rank" in (Path(root) / "torchtitan/config/configs.py").read_text()
    assert r["version"] == ("main@b5bcd76c6" if tokens else "0.3.0")


@needs_mirror
def test_the_reproduction_of_issue_19(history_cache):
    root = tt_history.export("de329200b", history_cache)
    r = tt_history.check_tree(root)
    assert r["version"] == "0.3.0" and "nearest modelled version" in r["decided_by"]
    assert "expert tensor parallelism (etp)" in r["unmodelled"]
    assert "parallelism.expert_tensor_parallel_degree" in r["unmodelled"]
    assert "llama4" in r["unmodelled"]


# ----------------------------------------------------------------------------- synthesized variants

needs_b5 = pytest.mark.skipif(not B5.is_dir(), reason=f"no reference tree at {B5}")

CONFIG = '''# meshlint: world_size=8
from torchtitan.config import ParallelismConfig, TrainingConfig
from torchtitan.trainer import Trainer
from torchtitan.models.llama3 import model_registry


def run():
    return Trainer.Config(
        parallelism=ParallelismConfig(tensor_parallel_degree=2{extra}),
        training=TrainingConfig(disable_cuda_graphs=True),
        model_spec=model_registry("debugmodel"),
    )
'''


def _tree(tmp_path: Path) -> Path:
    """The files identify() and ttdiff read, copied from the b5bcd76c6 tree (model folders as stand-ins)."""
    root = tmp_path / "tt"
    for rel in ("torchtitan/config/configs.py", "torchtitan/distributed/parallel_dims.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(B5 / rel, root / rel)
    for folder in sorted((B5 / "torchtitan/models").iterdir()):
        if (folder / "config_registry.py").is_file():
            (root / "torchtitan/models" / folder.name).mkdir(parents=True)
            (root / "torchtitan/models" / folder.name / "config_registry.py").write_text("# stand-in\n")
    return root


def _edit(path: Path, old: str, new: str, count: int = 1) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, count))


def _check(root: Path, extra: str = "", version: str | None = None):
    config = root / "user" / "my_config.py"
    config.parent.mkdir(exist_ok=True)
    config.write_text(CONFIG.format(extra=extra))
    options = Options(rules=load_rules(), topology=CliTopology(world_size=8), torchtitan_root=str(root),
                      torchtitan_version=version)
    (report,) = check_all(str(config), options)
    assert report.status == "checked", report.error
    return report


def _names(report) -> list:
    return [u["name"] for u in report.spec.framework["unmodelled"]]


@needs_b5
def test_the_modelled_tree_has_nothing_unmodelled(tmp_path):
    root = _tree(tmp_path)
    assert versions.identify(str(root))[0] == "main@b5bcd76c6"
    report = _check(root)
    assert report.spec.framework["version"] == "main@b5bcd76c6"
    assert _names(report) == []
    assert not [f for f in report.findings if f.severity != "info"]


@needs_b5
def test_a_field_the_checkout_adds_is_named_not_unknown(tmp_path):
    root = _tree(tmp_path)
    _edit(root / "torchtitan/config/configs.py", "    expert_parallel_degree: int = 1\n",
          "    expert_parallel_degree: int = 1\n    expert_overlap_chunks: int = 1\n")
    report = _check(root, ", expert_overlap_chunks=4")
    assert "parallelism.expert_overlap_chunks" in _names(report)
    codes = [(f.code, f.line) for f in report.findings if f.severity != "info"]
    assert codes == [("ML115", 9)], codes
    (finding,) = [f for f in report.findings if f.code == "ML115"]
    assert "expert_overlap_chunks" in finding.message and "main@b5bcd76c6" in finding.message
    # the same key without the checkout's field is the unknown key it is
    plain = _check(_tree(tmp_path / "plain"), ", expert_overlap_chunks=4")
    assert [f.code for f in plain.findings if f.severity == "error"] == ["ML108"]


@needs_b5
def test_a_field_the_checkout_lacks_is_refused(tmp_path):
    root = _tree(tmp_path)
    text = (root / "torchtitan/config/configs.py").read_text()
    line = re.search(r"^    enable_sequence_parallel: bool = True\n", text, re.MULTILINE)
    (root / "torchtitan/config/configs.py").write_text(text[:line.start()] + text[line.end():])
    report = _check(root, ", enable_sequence_parallel=False")
    absent = [u for u in report.spec.framework["unmodelled"] if u["name"] == "parallelism.enable_sequence_parallel"]
    assert [u["kind"] for u in absent] == ["absent-key"]
    errors = [f for f in report.findings if f.severity == "error"]
    assert [f.code for f in errors] == ["ML108"] and "this checkout" in errors[0].message


@needs_b5
def test_a_model_the_tables_lack_is_named(tmp_path):
    root = _tree(tmp_path)
    (root / "torchtitan/models/llama5").mkdir()
    (root / "torchtitan/models/llama5/config_registry.py").write_text("# stand-in\n")
    shutil.rmtree(root / "torchtitan/models/flux")  # a model the checkout dropped: nothing to report
    report = _check(root)
    assert [u for u in report.spec.framework["unmodelled"] if u["kind"] == "model"] == [
        {"kind": "model", "name": "llama5", "where": "torchtitan/models/llama5/config_registry.py",
         "detail": report.spec.framework["unmodelled"][0]["detail"]}]
    assert "flux" not in _names(report)
    assert not [f for f in report.findings if f.code == "ML115"]  # this config builds llama3


@needs_b5
def test_a_missing_ep_check_is_named_and_matters_with_ep(tmp_path):
    root = _tree(tmp_path)
    text = (root / "torchtitan/distributed/parallel_dims.py").read_text()
    text = re.sub(r"must divide\s*\"\s*f?\"dp_shard \* cp \* tp", "xx", text).replace("% ep != 0", "% ep == 7")
    (root / "torchtitan/distributed/parallel_dims.py").write_text(text)
    version, how = versions.identify(str(root))
    assert version == "main@b5bcd76c6" and "nearest modelled version" in how and "no ep check" in how
    assert _names(_check(root)) == ["ep divides dp_shard*cp*tp"]
    assert not [f for f in _check(root).findings if f.code == "ML115"]  # ep = 1: the check is moot
    assert not [f for f in _check(root, ", expert_parallel_degree=2").findings if f.code == "ML115"]  # it divides
    report = _check(root, ", expert_parallel_degree=3, data_parallel_shard_degree=4")
    (finding,) = [f for f in report.findings if f.code == "ML115"]
    assert "no check that ep divides" in finding.message


@needs_b5
def test_etp_and_the_legacy_layout_are_named(tmp_path):
    root = _tree(tmp_path)
    _edit(root / "torchtitan/distributed/parallel_dims.py", "    ep: int\n", "    ep: int\n    etp: int\n")
    text = (root / "torchtitan/distributed/parallel_dims.py").read_text()
    (root / "torchtitan/distributed/parallel_dims.py").write_text(re.sub(r"(?m)^(\s+)spmd_backend\s*:", r"\1spmd_mode:", text))
    text = (root / "torchtitan/config/configs.py").read_text()
    (root / "torchtitan/config/configs.py").write_text(re.sub(r"(?m)^    spmd_backend\s*:.*\n", "", text))
    assert versions.identify(str(root))[0] == "main@b5bcd76c6"  # registry era: never read as 0.2.x
    report = _check(root)
    kinds = {u["kind"] for u in report.spec.framework["unmodelled"]}
    assert {"etp", "backend"} <= kinds
    assert not [f for f in report.findings if f.code == "ML115"]  # etp = 1: the mesh meshlint lays out
    assert report.spec.values["parallelism.spmd_backend"] == "partial_dtensor"
    assert tuple(report.resolution.mesh.dims) == ("pp", "dp_replicate", "fsdp", "tp")  # partial_dtensor's layout


@needs_b5
def test_a_field_of_another_section_is_listed_quietly(tmp_path):
    root = _tree(tmp_path)
    (root / "torchtitan/components").mkdir()
    (root / "torchtitan/components/optimizer.py").write_text(
        "from dataclasses import dataclass\n\n\nclass OptimizersContainer:\n    @dataclass\n    class Config:\n"
        "        name: str = 'AdamW'\n        lr: float = 8e-4\n        warmup_ratio: float = 0.1\n")
    config = CONFIG.format(extra="").replace("        training=", "        optimizer=OptimizersContainer.Config(warmup_ratio=0.2),\n"
                                                "        training=")
    config = config.replace("from torchtitan.trainer import Trainer",
                            "from torchtitan.trainer import Trainer\n"
                            "from torchtitan.components.optimizer import OptimizersContainer")
    (root / "user").mkdir()
    (root / "user/my_config.py").write_text(config)
    options = Options(rules=load_rules(), topology=CliTopology(world_size=8), torchtitan_root=str(root))
    (report,) = check_all(str(root / "user/my_config.py"), options)
    assert not [f for f in report.findings if f.severity != "info"], [f.message for f in report.findings]
    assert "optimizer.warmup_ratio" in _names(report)


@needs_b5
def test_the_version_is_stated_in_text_and_json(tmp_path):
    from meshlint.report.json_report import framework_version
    from meshlint.report.text import render

    root = _tree(tmp_path)
    _edit(root / "torchtitan/config/configs.py", "    expert_parallel_degree: int = 1\n",
          "    expert_parallel_degree: int = 1\n    expert_overlap_chunks: int = 1\n")
    report = _check(root)
    fw = framework_version(report.spec)
    assert fw["version"] == "main@b5bcd76c6" and fw["decided_by"].startswith("identified from the code")
    assert [u["name"] for u in fw["unmodelled"]] == ["parallelism.expert_overlap_chunks"]
    text = render([report])
    assert re.search(r"^torchtitan main@b5bcd76c6 semantics applied \(identified from the code .*not modelled in "
                     r"this checkout: parallelism\.expert_overlap_chunks$", text, re.MULTILINE), text


@needs_b5
def test_a_forced_version_is_still_compared_with_the_checkout(tmp_path):
    report = _check(_tree(tmp_path), version="0.3.0")
    fw = report.spec.framework
    assert fw["version"] == "0.3.0" and fw["decided_by"].startswith("--torchtitan-version")
    assert "training.num_tokens_per_microbatch_per_dp_rank" in _names(report)


def test_a_toml_era_checkout_reads_a_registry_config_without_a_crash(tmp_path):
    root = tmp_path / "tt"
    (root / "torchtitan/config").mkdir(parents=True)
    (root / "torchtitan/models").mkdir()
    (root / "torchtitan/distributed").mkdir()
    (root / "torchtitan/config/job_config.py").write_text("class Parallelism:\n    expert_tensor_parallel_degree: int = 1\n")
    (root / "torchtitan/distributed/parallel_dims.py").write_text("class ParallelDims:\n    etp: int\n")
    assert versions.identify(str(root))[0] == "0.2.x"
    report = _check(root)
    assert report.spec.framework["version"] in REGISTRY
    assert "which has no registry configs" in report.spec.framework["decided_by"]
    assert os.path.basename(report.path).startswith("my_config.py")


def test_a_checkout_matching_no_version_says_so(tmp_path):
    root = tmp_path / "tt"
    for d in ("config", "models", "distributed"):
        (root / "torchtitan" / d).mkdir(parents=True)
    (root / "torchtitan/distributed/parallel_dims.py").write_text("class ParallelDims:\n    tp: int\n")
    assert versions.identify(str(root))[0] is None
    report = _check(root, ", expert_parallel_degree=2")
    fw = report.spec.framework
    assert fw["version"] == "main@b5bcd76c6" and "matches no modelled version" in fw["decided_by"]
    assert fw["decided_by"].endswith("read by the default")


def test_registry_era_is_told_by_the_config_package_even_when_configs_moves(tmp_path):
    root = tmp_path / "tt"
    for d in ("config", "models", "distributed"):
        (root / "torchtitan" / d).mkdir(parents=True)
    (root / "torchtitan/distributed/parallel_dims.py").write_text("class ParallelDims:\n    etp: int\n")
    (root / "torchtitan/config/parallelism.py").write_text("class ParallelismConfig:\n    tensor_parallel_degree: int = 1\n")
    assert versions.identify(str(root))[0] in REGISTRY  # ETP in a registry-era tree is not 0.2.x


@needs_b5
def test_an_etp_the_config_sets_is_one_finding(tmp_path):
    root = _tree(tmp_path)
    _edit(root / "torchtitan/distributed/parallel_dims.py", "    ep: int\n", "    ep: int\n    etp: int\n")
    _edit(root / "torchtitan/config/configs.py", "    expert_parallel_degree: int = 1\n",
          "    expert_parallel_degree: int = 1\n    expert_tensor_parallel_degree: int = 1\n")
    report = _check(root, ", expert_parallel_degree=2, expert_tensor_parallel_degree=2")
    found = [f for f in report.findings if f.severity != "info" and f.code != "ML502"]  # ML502: ep on a dense model
    assert [f.code for f in found] == ["ML115"], [f.message for f in found]
    assert "etp" in found[0].message and found[0].key == "parallelism.expert_tensor_parallel_degree"
    # written as 1: the key is still one this checkout has and the version lacks
    assert [f.code for f in _check(root, ", expert_tensor_parallel_degree=1").findings if f.severity != "info"] == \
        ["ML115"]


def _launch(root: Path, *overrides: str):
    """``meshlint check --torchtitan-root ROOT -- --module M --config run OVERRIDES`` on the user's config."""
    from meshlint.inputs.launch import parse_launch_args

    config = root / "user_registry" / "config_registry.py"
    config.parent.mkdir(exist_ok=True)
    config.write_text(CONFIG.format(extra="").replace("# meshlint: world_size=8\n", ""))
    launch = parse_launch_args(["--module", "user_registry", "--config", "run", *overrides])
    options = Options(rules=load_rules(), topology=CliTopology(world_size=8), torchtitan_root=str(root))
    from meshlint.engine.units import _launch_source

    return launch, options, (lambda: _launch_source(launch, options, str(root)))


@needs_b5
def test_a_launch_line_may_set_a_field_only_the_checkout_has(tmp_path):
    """Issue 19: on an ETP-era checkout, -- --parallelism.expert_tensor_parallel_degree 2 is torchtitan's own
    option; it was refused while the line was parsed, before the checkout was known."""
    from meshlint.errors import InputError

    root = _tree(tmp_path)
    _edit(root / "torchtitan/config/configs.py", "    expert_parallel_degree: int = 1\n",
          "    expert_parallel_degree: int = 1\n    expert_tensor_parallel_degree: int = 1\n")
    _, _, read = _launch(root, "--parallelism.expert_tensor_parallel_degree", "2")
    source = read()
    assert source.data["parallelism"]["expert_tensor_parallel_degree"] == 2   # typed by the checkout's annotation
    # a value tyro cannot parse for the annotation is refused as tyro refuses it
    _, _, read = _launch(root, "--parallelism.expert_tensor_parallel_degree", "two")
    with pytest.raises(InputError, match="not a whole number"):
        read()
    # a typo is still refused, with the checkout's own field as the did-you-mean
    _, _, read = _launch(root, "--parallelism.expert_tensor_paralel_degree", "2")
    with pytest.raises(InputError, match="Unrecognized options") as err:
        read()
    assert "expert_tensor_parallel_degree" in err.value.help
    # the same field on the modelled tree (no ETP) is the unknown option it is there
    _, _, read = _launch(_tree(tmp_path / "plain"), "--parallelism.expert_tensor_parallel_degree", "2")
    with pytest.raises(InputError, match="has no field 'expert_tensor_parallel_degree'"):
        read()


@pytest.mark.parametrize("filtered", [True, False])  # tarfile's "data" filter, or (before 3.11.4) the same by hand
def test_an_exported_commit_never_writes_outside_its_directory(tmp_path, monkeypatch, filtered):
    import io
    import tarfile

    if not filtered:
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    elif not hasattr(tarfile, "data_filter"):
        pytest.skip("this Python's tarfile has no filters")

    def archive(name: str, link: str | None = None) -> tarfile.TarFile:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as t:
            info = tarfile.TarInfo(name)
            if link is not None:
                info.type, info.linkname = tarfile.SYMTYPE, link
            t.addfile(info, io.BytesIO(b""))
        buf.seek(0)
        return tarfile.open(fileobj=buf)

    tt_history._extract(archive("torchtitan/ok.txt"), str(tmp_path / "a"))
    tt_history._extract(archive("torchtitan/link.txt", "ok.txt"), str(tmp_path / "a"))
    assert (tmp_path / "a" / "torchtitan" / "ok.txt").exists()
    for bad in (archive("../escape.txt"), archive("torchtitan/l", "../../outside")):
        with pytest.raises(tarfile.TarError):
            tt_history._extract(bad, str(tmp_path / "b"))
    try:  # an absolute name: refused by hand, or made relative by the filter: never written where it points
        tt_history._extract(archive(f"{tmp_path}/abs.txt"), str(tmp_path / "c"))
    except tarfile.TarError:
        pass
    assert not (tmp_path / "escape.txt").exists() and not (tmp_path / "abs.txt").exists()
