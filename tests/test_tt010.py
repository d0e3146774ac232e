"""torchtitan v0.1.0 as a modelled TOML version: against its own code, its own configs, and how it is chosen.

* Its real ``ParallelDims`` (``.frameworks/torchtitan-0.1.0``, unpacked by ``.ci/frameworks.sh``) runs on the
  fake process group on seeded degrees, in a subprocess (tests/real_torchtitan_010_worker.py): meshlint's
  v0_1_0 module must give the same verdict (the constructor's message included), dp_shard, world mesh (dims,
  sizes, order) and every 1-D mesh ``world_mesh[name]`` gives.
* Its real ``ConfigManager`` reads seeded edits of its own train configs (typos, sections of other versions,
  keys in the wrong section, other degrees): it never refuses them, and the keys it drops are exactly those
  meshlint reports under ML116 (none under ML108), with the degrees it reads.
* Its own llama3 train configs (fixtures/torchtitan_v010/) check cleanly as 0.1.0; read as 0.2.x (the default)
  ML108 says the config looks written for 0.1.0 and how to select it.
* ``--torchtitan-version``, the project setting and ``identify()`` of a 0.1.0 tree choose it; configs from
  before 0.1.0 are skipped as an unmodelled version.

Where the 0.1.0 package or torch/tyro is absent the real comparisons skip, saying why.
"""

from __future__ import annotations

import importlib.util
import json
import random
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import FIXTURES

from meshlint.engine.check import Options, check_file
from meshlint.engine.ruleset import load_rules
from meshlint.frameworks import versions
from meshlint.frameworks.torchtitan import v0_1_0
from meshlint.mesh.topology import CliTopology

ROOT = Path(__file__).resolve().parent.parent
TT010 = ROOT / ".frameworks" / "torchtitan-0.1.0"
WORKER = Path(__file__).resolve().parent / "real_torchtitan_010_worker.py"
V010 = FIXTURES / "torchtitan_v010"
RULES = load_rules()
# the GPU counts the configs' own NOTE lines give (the debug model: one node)
WORLDS = {"debug_model.toml": 8, "llama3_8b.toml": 64, "llama3_70b.toml": 64, "llama3_405b.toml": 128}
NICE_WORLDS = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 128, 256, 512]
SMALL = [1, 2, 3, 4, 5, 6, 8, 16]


def _options(version: str | None = "0.1.0", world: int | None = None, **more) -> Options:
    return Options(rules=RULES, torchtitan_version=version,
                   topology=CliTopology(world_size=world, gpus_per_node=8 if world else None), **more)


# --------------------------------------------------------------------------- the real thing

def _why_absent() -> str | None:
    for package in ("torch", "tyro"):
        if importlib.util.find_spec(package) is None:
            return f"{package} is not installed: torchtitan 0.1.0's ParallelDims and ConfigManager import it"
    if not (TT010 / "torchtitan" / "config_manager.py").is_file():
        failed = TT010.parent / "torchtitan-0.1.0.failed"
        why = f" (last attempt: {failed.read_text().strip()})" if failed.is_file() else ""
        return f"torchtitan 0.1.0 is not in .frameworks/: run .ci/frameworks.sh{why}"
    return None


def _run_real(cases: dict) -> dict:
    proc = subprocess.run([sys.executable, str(WORKER), str(TT010)], input=json.dumps(cases), capture_output=True,
                          text=True, timeout=300, cwd=str(ROOT))
    assert proc.returncode == 0, f"the torchtitan 0.1.0 worker exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout)


def _degree(rng: random.Random, room: int) -> int:
    r = rng.random()
    if r < 0.85:
        return rng.choice([1, 1] + [d for d in range(1, min(room, 16) + 1) if room % d == 0])
    if r < 0.97:
        return rng.choice(SMALL)
    return rng.choice([0, -1, -2])


def dims_cases(n: int = 150, seed: int = 10) -> list:
    rng = random.Random(seed)
    cases = []
    for i in range(n):
        world = rng.choice(NICE_WORLDS) if rng.random() < 0.75 else rng.randint(1, 300)
        room, d = world, {}
        for name in rng.sample(["tp", "pp", "cp", "dp_replicate"], 4):
            d[name] = _degree(rng, room)
            if d[name] >= 1 and room % d[name] == 0:
                room //= d[name]
        r = rng.random()
        d["dp_shard"] = -1 if r < 0.45 else room if r < 0.8 else rng.choice(SMALL) if r < 0.95 else rng.choice([0, -2])
        cases.append({"id": i, "world": world, "degrees": d})
    return cases


def _meshlint_dims(case: dict) -> dict:
    res = v0_1_0.resolve(v0_1_0.spec_from_degrees(dict(case["degrees"])), case["world"])
    error = res.framework_error
    out = {"verdict": "ok" if error is None else "error", "error": error, "dp_shard": res.degrees.get("dp_shard")}
    if error is None:
        mesh = res.meshes["world"]
        out["mesh"] = [list(mesh.dims), list(mesh.sizes)]
        out["axes"] = {name: axis.size for name, axis in res.axes.items()}
    else:
        out["stage"] = {"load": "constructor", "resolve": "constructor"}.get(res.error_stage, res.error_stage)
    return out


def _differences(real: dict, ml: dict) -> list:
    if real["verdict"] != ml["verdict"]:
        return [f"verdict: real {real['verdict']} ({real.get('error_type')}: {real.get('error')}), meshlint "
                f"{ml['verdict']} ({ml['error']})"]
    diffs = []
    if real["verdict"] == "error":
        if real["stage"] != ml["stage"]:
            diffs.append(f"stage: real {real['stage']}, meshlint {ml['stage']}")
        if not ml["error"].startswith(real["error_type"] + ":") or real["error"].strip() not in ml["error"]:
            diffs.append(f"error: real {real['error_type']}: {real['error']!r}, meshlint {ml['error']!r}")
        return diffs
    for field in ("dp_shard", "mesh", "axes"):
        if real[field] != ml[field]:
            diffs.append(f"{field}: real {real[field]}, meshlint {ml[field]}")
    return diffs


# seeded edits of 0.1.0's own configs: what ConfigManager does with each, and what meshlint says
OTHER_VERSION_KEYS = [("compile", "enable", True), ("training", "dtype", "bfloat16"),
                      ("parallelism", "expert_parallel_degree", 2), ("checkpoint", "enable", True),
                      ("quantize", "linear", {"float8": {"recipe_name": "rowwise"}}), ("validation", "enable", True)]


def _typo(rng: random.Random, name: str) -> str:
    i = rng.randrange(len(name))
    kind = rng.choice(("drop", "double", "swap"))
    if kind == "drop" and len(name) > 3:
        return name[:i] + name[i + 1:]
    if kind == "swap" and i < len(name) - 1 and name[i] != name[i + 1]:
        return name[:i] + name[i + 1] + name[i] + name[i + 2:]
    return name[:i] + name[i] + name[i:]


def config_cases(n: int = 40, seed: int = 11) -> list:
    rng = random.Random(seed)
    bases = sorted(V010.glob("*.toml"))
    out = []
    for i in range(n):
        base = rng.choice(bases)
        data = tomllib.loads(base.read_text())
        for _ in range(rng.randint(1, 3)):
            kind = rng.random()
            section = rng.choice([s for s in data if isinstance(data[s], dict) and data[s]])
            if kind < 0.4:  # a typo in a key that is there
                key = rng.choice(list(data[section]))
                data[section][_typo(rng, key)] = data[section].pop(key)
            elif kind < 0.65:  # a key (or section) of another version
                sec, key, value = rng.choice(OTHER_VERSION_KEYS)
                data.setdefault(sec, {})[key] = value
            elif kind < 0.8:  # a key in the wrong section
                key = rng.choice(list(data[section]))
                other = rng.choice([s for s in data if isinstance(data[s], dict) and s != section])
                if key not in data[other]:
                    data[other][key] = data[section].pop(key)
            else:  # other degrees
                data.setdefault("parallelism", {})["tensor_parallel_degree"] = rng.choice([1, 2, 4, 8])
                data["parallelism"]["data_parallel_shard_degree"] = rng.choice([-1, 1, 2, 4])
        out.append({"id": i, "base": base.name, "data": data})
    return out


def _toml(data: dict) -> str:
    def value(v) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, list):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return repr(v)

    lines = []
    for section, table in data.items():
        if not isinstance(table, dict):
            lines.insert(0, f"{section} = {value(table)}")
            continue
        lines.append(f"[{section}]")
        nested = {k: v for k, v in table.items() if isinstance(v, dict)}
        lines += [f"{k} = {value(v)}" for k, v in table.items() if not isinstance(v, dict)]
        for k, sub in nested.items():
            lines.append(f"[{section}.{k}]")
            lines += [f"{kk} = {value(vv)}" if not isinstance(vv, dict) else
                      f"{kk} = {{{', '.join(f'{a} = {value(b)}' for a, b in vv.items())}}}" for kk, vv in sub.items()]
    return "\n".join(lines) + "\n"


def _dropped(data: dict, built: dict) -> set:
    """The keys of the file that the JobConfig ConfigManager built does not hold (a whole section: its name)."""
    out = set()
    for section, table in data.items():
        if section not in built:
            out.add(section)
        elif isinstance(table, dict):
            out |= {f"{section}.{k}" for k in table if k not in built[section]}
    return out


@pytest.fixture(scope="module")
def real_run(tmp_path_factory):
    why = _why_absent()
    if why:
        pytest.skip(why)
    folder = tmp_path_factory.mktemp("tt010")
    configs = []
    for case in config_cases():
        path = folder / f"c{case['id']}.toml"
        path.write_text(_toml(case["data"]))
        assert tomllib.loads(path.read_text()) == case["data"]
        configs.append({"id": case["id"], "path": str(path)})
    run = _run_real({"dims": dims_cases(), "configs": configs})
    assert run["parallel_dims"].startswith(str(TT010.resolve())), run["parallel_dims"]
    return run, {c["id"]: c["path"] for c in configs}


def test_meshlint_agrees_with_real_parallel_dims_010(real_run):
    run, _ = real_run
    cases = {c["id"]: c for c in dims_cases()}
    disagreements, outcomes = [], {}
    for real in run["dims"]:
        case = cases[real["id"]]
        diffs = _differences(real, _meshlint_dims(case))
        key = real["verdict"] if real["verdict"] == "ok" else real["stage"]
        outcomes[key] = outcomes.get(key, 0) + 1
        if diffs:
            disagreements.append(f"- world {case['world']} {case['degrees']}: " + "; ".join(diffs))
    print(f"torchtitan 0.1.0: {len(cases)} configs, {len(cases) - len(disagreements)} agree; outcomes {outcomes}")
    assert not disagreements, (f"meshlint disagrees with torchtitan 0.1.0's ParallelDims on {len(disagreements)} of "
                               f"{len(cases)} configs:\n" + "\n".join(disagreements[:25]))
    # the seeded configs reach every outcome there is: meshes built, and the constructor's refusals
    assert outcomes.get("ok", 0) >= len(cases) // 4 and outcomes.get("constructor", 0) >= len(cases) // 10, outcomes
    assert any(len(r.get("mesh", [[]])[0]) >= 3 for r in run["dims"])  # several dims kept, in order


def test_config_manager_drops_exactly_what_ml116_reports(real_run):
    run, paths = real_run
    cases = {c["id"]: c for c in config_cases()}
    problems, dropped_total = [], 0
    for real in run["configs"]:
        case = cases[real["id"]]
        assert real["verdict"] == "ok", f"ConfigManager refused {case['data']}: {real}"  # it never refuses a key
        dropped = _dropped(case["data"], real["config"])
        dropped_total += len(dropped)
        report = check_file(paths[real["id"]], _options())
        assert report.spec.framework["version"] == "0.1.0"
        said = {f.key for f in report.findings if f.code == "ML116"}
        facts = {item["key"] for item in report.spec.extra.get("ignored_keys", [])}
        if said != dropped or facts != dropped:
            problems.append(f"- {case['base']} edited: real drops {sorted(dropped)}, ML116 {sorted(said)}")
        if any(f.code == "ML108" for f in report.findings):
            problems.append(f"- {case['base']} edited: ML108 on a 0.1.0 config")
        par = real["config"]["parallelism"]
        read = {"tp": par["tensor_parallel_degree"], "dp_shard": par["data_parallel_shard_degree"],
                "dp_replicate": par["data_parallel_replicate_degree"], "pp": par["pipeline_parallel_degree"],
                "cp": par["context_parallel_degree"]}
        if {n: report.spec.degrees[n] for n in read} != read:
            problems.append(f"- {case['base']} edited: real degrees {read}, meshlint {report.spec.degrees}")
        if report.spec.values["compile.enable"] != real["config"]["training"]["compile"]:
            problems.append(f"- {case['base']} edited: training.compile real {real['config']['training']['compile']}")
    assert not problems, "\n".join(problems)
    assert dropped_total >= 20  # the edits exercise the silent drop


# --------------------------------------------------------------------------- its own configs

@pytest.mark.parametrize("name", sorted(WORLDS))
def test_own_train_configs_check_cleanly_as_010(name):
    report = check_file(str(V010 / name), _options(world=WORLDS[name]))
    assert report.status == "checked" and report.spec.framework["version"] == "0.1.0"
    noisy = [f"{f.code} {f.message}" for f in report.findings if f.severity in ("error", "warning")]
    assert not noisy, noisy
    assert report.resolution.framework_error is None and report.resolution.meshes["world"].size == WORLDS[name]


def test_read_as_the_default_it_says_which_version_it_looks_written_for():
    report = check_file(str(V010 / "llama3_8b.toml"), _options(version=None, world=64))
    assert report.spec.framework["version"] == "0.2.x"
    ml108 = [f for f in report.findings if f.code == "ML108"]
    assert {f.key for f in ml108} == {"training.compile", "checkpoint.enable_checkpoint",
                                      "checkpoint.last_save_model_weights_only", "float8"}
    # the first (in the file's order) says it and how to select 0.1.0; each other points at it, once per file
    first, *others = sorted(ml108, key=lambda f: (f.line, f.col))
    assert "the config looks written for torchtitan 0.1.0" in first.message, first.message
    assert "--torchtitan-version 0.1.0" in first.help and 'torchtitan-version = "0.1.0"' in first.help
    for f in others:
        assert "looks written for" not in f.message and "a key of torchtitan 0.1.0" in f.message, f.message
        assert f"see {first.key})" in f.message and f.help == f"check the config as torchtitan 0.1.0 (see {first.key}'s help)"


def test_a_typo_is_a_warning_not_a_refusal(write):
    path = write('[model]\nname = "llama3"\nflavor = "8B"\n[parallelism]\ndata_parallel_shard_degree = -1\n'
                 "tensor_parallel_degre = 2\n")
    report = check_file(str(path), _options(world=8, gpu_memory_gib=1e9))
    [f] = [f for f in report.findings if f.severity in ("error", "warning")]
    assert f.code == "ML116" and f.severity == "warning" and f.key == "parallelism.tensor_parallel_degre"
    assert "did you mean tensor_parallel_degree?" in f.message and "no effect" in f.message
    assert report.spec.degrees["tp"] == 1 and report.resolution.degrees["dp_shard"] == 8  # what 0.1.0 runs
    # the custom JobConfig of experimental.custom_args_module may define it: said, still a warning
    path = write('[experimental]\ncustom_args_module = "my.ext"\n[parallelism]\nmy_degree = 2\n', "ext.toml")
    [f] = [f for f in check_file(str(path), _options(world=8)).findings if f.code == "ML116"]
    assert "my.ext" in f.message and f.severity == "warning"


# --------------------------------------------------------------------------- choosing it

def test_version_ids_and_aliases():
    for alias in ("0.1.0", "v0.1.0", "0.1", "f7084fc78"):
        assert versions.canonical("torchtitan", alias, strict=False) == "0.1.0"
    assert versions.module("torchtitan", "0.1.0") is v0_1_0


def test_identify_knows_a_010_tree():
    why = _why_absent()
    if why and not (TT010 / "torchtitan").is_dir():
        pytest.skip(why)
    version, evidence = versions.identify(str(TT010))
    assert version == "0.1.0", evidence
    assert "config_manager.py" in evidence and "no ep" in evidence


def test_torchtitan_root_and_a_checkout_above_the_file_choose_010(tmp_path):
    stand_in = FIXTURES / "rules" / "ML116-ignored-key" / "torchtitan"  # a 0.1.0 tree's markers
    assert versions.identify(str(stand_in.parent))[0] == "0.1.0"
    config = tmp_path / "llama3_8b.toml"
    config.write_text((V010 / "llama3_8b.toml").read_text())
    report = check_file(str(config), _options(version=None, world=64, torchtitan_root=str(stand_in.parent)))
    assert report.spec.framework["version"] == "0.1.0" and "identified from the code" in \
        report.spec.framework["decided_by"]
    assert not [f for f in report.findings if f.severity == "error"]
    inside = FIXTURES / "rules" / "ML116-ignored-key" / "good.toml"  # the checkout is found upward
    assert check_file(str(inside), _options(version=None)).spec.framework["version"] == "0.1.0"


def test_the_project_setting_chooses_010(tmp_path):
    from conftest import run_cli

    (tmp_path / "pyproject.toml").write_text('[tool.meshlint]\ntorchtitan-version = "0.1.0"\n')
    config = tmp_path / "llama3_8b.toml"
    config.write_text((V010 / "llama3_8b.toml").read_text())
    code, out = run_cli("check", str(config), "--world-size", "64", "--gpus-per-node", "8",
                        "--config", str(tmp_path / "pyproject.toml"))
    assert code == 0 and "ML108" not in out, out
    code, out = run_cli("check", str(config), "--world-size", "64", "--gpus-per-node", "8",
                        "--torchtitan-version", "0.1.0")
    assert code == 0 and "no findings" in out, out


def test_a_registry_is_not_read_as_010():
    from meshlint.engine.units import DEFAULT_TORCHTITAN_VERSION, choose_version

    class _Source:
        path = str(FIXTURES / "x.py")
        data: dict = {}

    version, how = choose_version(_Source(), _options())
    assert version != "0.1.0" and version in versions._SIGNATURES or version == DEFAULT_TORCHTITAN_VERSION


def test_configs_from_before_010_are_an_unmodelled_version(write):
    path = write('[job]\ndump_folder = "./outputs"\n[model]\nname = "llama3"\nflavor = "8B"\n[training]\n'
                 "batch_size = 1\ndata_parallel_degree = -1\ntensor_parallel_degree = 2\n"
                 "[experimental]\npipeline_parallel_degree = 2\n")
    report = check_file(str(path), _options(version=None))
    assert report.status == "skipped" and report.dialect == "torchtitan"
    assert "from before v0.1.0" in report.note and "not modelled" in report.note
    assert re.search(r"training\.data_parallel_degree, training\.tensor_parallel_degree, "
                     r"experimental\.pipeline_parallel_degree", report.note), report.note
    assert "not a training config" not in report.note
    other = write('[job]\nx = 1\n[model]\nname = "m"\n[training]\nsteps = 3\n', "plain.toml")
    assert "not a training config" in check_file(str(other), _options(version=None)).note


# --------------------------------------------------------------------------- the refusals of train.py and parallelize

HEAD = '[model]\nname = "llama3"\nflavor = "debugmodel"\n'
REFUSALS = {  # rule -> (bad, good): 0.1.0 configs, 8 GPUs
    "ML604": ("[training]\nlocal_batch_size = 6\n[parallelism]\npipeline_parallel_degree = 2\n"
              "pipeline_parallel_microbatch_size = 4\n",
              "[training]\nlocal_batch_size = 8\n[parallelism]\npipeline_parallel_degree = 2\n"
              "pipeline_parallel_microbatch_size = 4\n"),
    "ML608": ("[training]\nlocal_batch_size = 2\nglobal_batch_size = 20\n[parallelism]\n",
              "[training]\nlocal_batch_size = 2\nglobal_batch_size = 32\n[parallelism]\n"),
    "ML610": ("[parallelism]\nenable_async_tensor_parallel = true\n",
              "[training]\ncompile = true\n[parallelism]\ntensor_parallel_degree = 2\nenable_async_tensor_parallel = true\n"),
    "ML611": ("[parallelism]\ntensor_parallel_degree = 2\nenable_async_tensor_parallel = true\n",
              "[training]\ncompile = true\n[parallelism]\ntensor_parallel_degree = 2\nenable_async_tensor_parallel = true\n"),
}


@pytest.mark.parametrize("code", sorted(REFUSALS))
def test_the_refusals_010_shares_with_02x(code, write):
    bad, good = REFUSALS[code]
    report = check_file(str(write(HEAD + bad, "bad.toml")), _options(world=8, gpu_memory_gib=1e9))
    assert [f.code for f in report.findings if f.severity in ("error", "warning")] == [code], \
        [f"{f.code} {f.message}" for f in report.findings]
    if code == "ML611":
        [f] = [f for f in report.findings if f.code == code]
        assert "[training] compile = true" in f.message and "[compile]" not in f.message
    report = check_file(str(write(HEAD + good, "good.toml")), _options(world=8, gpu_memory_gib=1e9))
    assert not [f for f in report.findings if f.severity in ("error", "warning")], \
        [f"{f.code} {f.message}" for f in report.findings]
