"""meshlint fix / check --fix: only the changed values, read back before writing, atomic, refusing unsafe edits."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from meshlint.engine.check import analyse, check_all
from meshlint.cli.commands import main
from meshlint.cli.suggest import fix_cmd, suggest_cmd
from meshlint.solve.fix import FixError, apply_plan, fix_report, parse_set, plan, unambiguous, write_atomic
from meshlint.cli.settings import CliSettings, Planner
from meshlint.engine.search.valid import Solver

ROOT = Path(__file__).resolve().parent.parent
SUGGEST = ROOT / "fixtures" / "suggest"
TT_MAIN = ROOT.parent / "shared" / "frameworks" / "torchtitan-b5bcd76c6"
needs_tt = pytest.mark.skipif(not (TT_MAIN / "torchtitan").is_dir(), reason=f"{TT_MAIN} is absent")

if "fix" not in main.commands:  # cli.py registers them (the integrator's patch); until then, here
    main.add_command(suggest_cmd)
    main.add_command(fix_cmd)


def run(*args):
    result = CliRunner().invoke(main, list(args), catch_exceptions=False)
    return result


def _setup(path, version=None, **topo):
    planner = Planner(CliSettings(torchtitan_version=version, **topo))
    options = planner.options_for(str(path))
    return analyse(str(path), options), options


def errors_after(path, *flags, version=None, **topo):
    # the layouts' validity: the whole-peak memory rule (ML504) is suggest's ranking's business, not the edit's
    planner = Planner(CliSettings(torchtitan_version=version, gpu_memory_gib=10_000, **topo))
    options = planner.options_for(str(path))
    return [f for r in check_all(str(path), options) for f in r.findings if f.severity == "error"]


KF = """\
# A 70B on 32 GPUs.   Comments, spacing and order must survive the fix.
# meshlint: world_size=32 gpus_per_node=4

[model]
dim = 8192          # hidden
n_layers = 80
n_heads = 64
n_kv_heads = 8
vocab_size = 128256
ffn_hidden_dim = 28672
max_seq_len = 4096

[train]
batch_size = 1
seq_len = 4096
grad_accum_steps = 8

[distributed]
dp_shard   =   -1   # inferred
tp = 4      # NVLink
pp=1
"""


def test_toml_fix_changes_only_the_values(tmp_path):
    path = tmp_path / "70b.toml"
    path.write_text(KF)
    report, options = _setup(path)
    solver = Solver(report, options)
    target = {**solver.current, "tp": 2, "pp": 2}
    p = plan(solver, target, options)
    assert sorted(e.what for e in p.edits) == ["distributed.pp 1 -> 2", "distributed.tp 4 -> 2"]
    expected = KF.replace("tp = 4      # NVLink", "tp = 2      # NVLink").replace("pp=1", "pp=2")
    assert p.new == expected
    apply_plan(p)
    assert path.read_text() == expected
    assert not errors_after(path)


def test_toml_fix_inserts_a_missing_degree_under_its_header(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(KF.replace("pp=1\n", ""))
    report, options = _setup(path)
    solver = Solver(report, options)
    p = plan(solver, {**solver.current, "tp": 2, "pp": 2}, options)
    assert "[distributed]\npp = 2\ndp_shard   =   -1" in p.new
    assert sorted(e.what for e in p.edits) == ["distributed.pp (default 1) -> 2", "distributed.tp 4 -> 2"]


def test_crlf_and_mode_are_kept(tmp_path):
    path = tmp_path / "crlf.toml"
    path.write_bytes(KF.replace("\n", "\r\n").encode())
    os.chmod(path, 0o640)
    report, options = _setup(path)
    solver = Solver(report, options)
    apply_plan(plan(solver, {**solver.current, "tp": 2, "pp": 2}, options))
    data = path.read_bytes()
    assert data == KF.replace("tp = 4 ", "tp = 2 ").replace("pp=1", "pp=2").replace("\n", "\r\n").encode()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640


def test_directive_follows_the_target_world(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(KF)
    result = run("fix", str(path), "--world-size", "64", "--gpus-per-node", "4", "--set", "tp=4,pp=2")
    assert result.exit_code == 0, result.output
    text = path.read_text()
    assert "# meshlint: world_size=64 gpus_per_node=4" in text
    assert not errors_after(path)  # checked with the file's own (updated) world
    assert text.replace("world_size=64", "world_size=32").replace("pp=2", "pp=1") == KF


def test_interrupted_write_leaves_the_original(tmp_path, monkeypatch):
    path = tmp_path / "c.toml"
    path.write_text(KF)
    report, options = _setup(path)
    solver = Solver(report, options)
    p = plan(solver, {**solver.current, "tp": 2, "pp": 2}, options)

    def crash(src, dst):
        raise KeyboardInterrupt  # killed between the write and the rename

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        apply_plan(p)
    assert path.read_text() == KF
    assert sorted(os.listdir(tmp_path)) == ["c.toml"]  # the temporary file is gone too


def test_write_errors_are_fix_errors(tmp_path, monkeypatch):
    path = tmp_path / "c.toml"
    path.write_text(KF)

    def fail(src, dst):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(FixError, match="cannot write"):
        write_atomic(str(path), "x")
    assert path.read_text() == KF
    assert sorted(os.listdir(tmp_path)) == ["c.toml"]


def test_refuses_when_the_edit_would_read_back_differently(tmp_path, monkeypatch):
    path = tmp_path / "c.toml"
    path.write_text(KF)
    report, options = _setup(path)
    solver = Solver(report, options)
    import meshlint.solve.fix as fix

    real = fix._apply
    monkeypatch.setattr(fix, "_apply", lambda text, edits: real(text, edits).replace("n_layers = 80", "n_layers = 81"))
    with pytest.raises(FixError, match="read back differently.*model.n_layers"):
        plan(solver, {**solver.current, "tp": 2, "pp": 2}, options)
    result = run("fix", str(path), "--set", "tp=2,pp=2")
    assert result.exit_code == 2
    assert path.read_text() == KF


def test_refuses_a_file_changed_meanwhile(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(KF)
    report, options = _setup(path)
    solver = Solver(report, options)
    p = plan(solver, {**solver.current, "tp": 2, "pp": 2}, options)
    path.write_text(KF + "\n")
    with pytest.raises(FixError, match="changed while"):
        apply_plan(p)


def test_diff_writes_nothing(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(KF)
    result = run("fix", str(path), "--set", "tp=2,pp=2", "--diff")
    assert result.exit_code == 0
    assert "-tp = 4      # NVLink\n-pp=1\n+tp = 2      # NVLink\n+pp=2" in result.output
    assert path.read_text() == KF


def test_set_parsing():
    names = ("pp", "tp")
    assert parse_set("tp=4, pp=2", names) == {"tp": 4, "pp": 2}
    for bad in ("tp", "tp=x", "zz=2", "tp=0", ""):
        with pytest.raises(FixError):
            parse_set(bad, names)


def _changed_lines(old: str, new: str) -> list:
    import difflib

    return [line[2:] for line in difflib.ndiff(old.splitlines(), new.splitlines()) if line[:2] in ("- ", "+ ")]


def _registry_copy(tmp_path: Path, model: str) -> Path:
    """A copy of a real torchtitan registry in a package of the same shape (made here, never committed)."""
    pkg = tmp_path / "torchtitan" / "models" / model
    pkg.mkdir(parents=True)
    (tmp_path / "torchtitan" / "__init__.py").write_text("")
    (tmp_path / "torchtitan" / "models" / "__init__.py").write_text("")
    src = TT_MAIN / "torchtitan" / "models" / model
    shutil.copy(src / "__init__.py", pkg / "__init__.py")
    shutil.copy(src / "config_registry.py", pkg / "config_registry.py")
    return pkg / "config_registry.py"


@needs_tt
def test_registry_fix_on_a_real_torchtitan_file(tmp_path):
    path = _registry_copy(tmp_path, "deepseek_v3")
    original = path.read_text()
    target = f"{path}::deepseek_v3_671b"
    # keeping the global batch needs num_tokens_per_microbatch_per_dp_rank, computed in this function: refused
    result = run("fix", target, "--world-size", "512", "--gpus-per-node", "8", "--torchtitan-version", "main")
    assert result.exit_code == 2 and "num_tokens_per_microbatch_per_dp_rank is not set by a literal" in result.output
    assert path.read_text() == original
    result = run("fix", target, "--world-size", "512", "--gpus-per-node", "8", "--torchtitan-version", "main",
                 "--allow-batch-change", "--diff")
    assert result.exit_code == 0, result.output
    assert "-            expert_parallel_degree=2," in result.output
    result = run("fix", target, "--world-size", "512", "--gpus-per-node", "8", "--torchtitan-version", "main",
                 "--allow-batch-change")
    assert result.exit_code == 0, result.output
    new = path.read_text()
    assert _changed_lines(original, new) and all("_degree=" in line for line in _changed_lines(original, new))
    assert not errors_after(f"{path}::deepseek_v3_671b", version="main@b5bcd76c6", world_size=512, gpus_per_node=8)


@needs_tt
def test_registry_literal_edit_keeps_the_rest(tmp_path):
    path = _registry_copy(tmp_path, "llama3")
    original = path.read_text()
    report, options = _setup(f"{path}::llama3_70b", "main@b5bcd76c6", world_size=64, gpus_per_node=8)
    solver = Solver(report, options)
    cur = dict(solver.current)
    target = {**cur, "tp": 4, "dp_shard": cur["dp_shard"] * cur["tp"] // 4} if cur["tp"] != 4 else \
        {**cur, "tp": 2, "dp_shard": cur["dp_shard"] * 2}
    p = plan(solver, target, options)
    assert p.edits
    apply_plan(p)
    new = path.read_text()
    assert _changed_lines(original, new) and all("_degree=" in line for line in _changed_lines(original, new))


def test_registry_edit_names_the_functions_deriving_from_it(tmp_path):
    dst = tmp_path / "tree"
    shutil.copytree(ROOT / "fixtures" / "torchtitan_registry", dst)
    path = dst / "torchtitan" / "models" / "tiny" / "config_registry.py"
    result = run("fix", f"{path}::tiny_debug", "--torchtitan-version", "main", "--world-size", "16",
                 "--gpus-per-node", "8", "--set", "tp=4", "--allow-batch-change")
    assert result.exit_code == 0, result.output
    assert "tiny_loop, tiny_replaced in the same file change too: they derive from tiny_debug" in result.output
    assert "tensor_parallel_degree=4,  # meshlint: ignore[ML201]" in path.read_text()


def test_registry_refuses_a_computed_value(tmp_path):
    src = ROOT / "fixtures" / "torchtitan_registry"
    dst = tmp_path / "tree"
    shutil.copytree(src, dst)
    path = dst / "torchtitan" / "models" / "tiny" / "config_registry.py"
    report, options = _setup(f"{path}::tiny_big", "main@b5bcd76c6", world_size=64, gpus_per_node=8)
    solver = Solver(report, options)
    cur = dict(solver.current)
    values = {**cur, "tp": 2 if cur["tp"] != 2 else 4}
    values["dp_shard"] = 64 // (values["tp"] * values["pp"] * values["cp"] * values["dp_replicate"])
    with pytest.raises(FixError, match="not set by a literal|by hand"):
        plan(solver, values, options)


def test_registry_insert_keyword(tmp_path):
    src = SUGGEST / "registry"
    dst = tmp_path / "reg"
    shutil.copytree(src, dst)
    path = dst / "torchtitan" / "models" / "llama3" / "config_registry.py"
    original = path.read_text()
    result = run("fix", f"{path}::llama3_8b_defaults", "--torchtitan-version", "main", "--set", "tp=2",
                 "--allow-batch-change")
    assert result.exit_code == 0, result.output
    new = path.read_text()
    assert "parallelism=ParallelismConfig(tensor_parallel_degree=2)," in new
    assert new.replace("ParallelismConfig(tensor_parallel_degree=2)", "ParallelismConfig()") == original


def test_every_suggestion_fixes_into_a_clean_file(tmp_path):
    """Every alternative of `suggest`, written by `fix --pick K`, passes `meshlint check` with no error."""
    cases = [(SUGGEST / "kf_dense_tp.toml", [], None), (SUGGEST / "kf_moe.toml", ["--world-size", "64"], None),
             (SUGGEST / "tt02_llama8b.toml", ["--world-size", "32", "--gpus-per-node", "8"], None),
             (SUGGEST / "native_pp_tp.toml", ["--world-size", "32"], None)]
    for src, flags, version in cases:
        for k in range(1, 6):
            path = tmp_path / f"{k}_{src.name}"
            shutil.copy(src, path)
            result = run("fix", str(path), "--pick", str(k), *flags)
            assert result.exit_code == 0, (src, k, result.output)
            topo = {}
            if "--world-size" in flags:
                topo["world_size"] = int(flags[flags.index("--world-size") + 1])
            if "--gpus-per-node" in flags:
                topo["gpus_per_node"] = int(flags[flags.index("--gpus-per-node") + 1])
            assert not errors_after(path, **topo), (src, k, path.read_text())


def test_check_fix_applies_only_unambiguous_fixes(tmp_path):
    good = tmp_path / "product.toml"
    shutil.copy(SUGGEST / "kf_bad_product.toml", good)
    report, options = _setup(good)
    values, found = unambiguous(report, options)
    assert values is not None and values["dp_shard"] == 4 and len(found) == 1
    result = fix_report(report, options)
    assert result.applied and "distributed.dp_shard 2 -> 4" in result.message
    assert "dp_shard = 4   # 2 × 4 = 8, but the world is 16" in good.read_text()
    assert not errors_after(good)

    ambiguous = tmp_path / "tp.toml"
    shutil.copy(SUGGEST / "kf_bad_tp.toml", ambiguous)
    report, options = _setup(ambiguous)
    result = fix_report(report, options)
    assert not result.applied and "tp=1; tp=2; tp=4; tp=8" in result.message
    assert ambiguous.read_text() == (SUGGEST / "kf_bad_tp.toml").read_text()


def test_check_fix_leaves_clean_and_non_degree_errors_alone(tmp_path):
    clean = tmp_path / "clean.toml"
    shutil.copy(SUGGEST / "kf_dense_tp.toml", clean)
    report, options = _setup(clean)
    assert fix_report(report, options).message == "no errors"
    micro = tmp_path / "micro.toml"  # ML605 points at grad_accum_steps: not a degree
    micro.write_text(KF.replace("grad_accum_steps = 8", "grad_accum_steps = 1").replace("pp=1", "pp=2")
                     .replace("tp = 4 ", "tp = 2 "))
    report, options = _setup(micro)
    result = fix_report(report, options)
    assert not result.applied
