"""The torchtitan 0.3.0 / main rules (ML7xx and the reused ones) on registry fixtures, through meshlint's engine.

The fixtures are ``.py`` registry files under fixtures/rules/<CODE-name>/ (``bad_*`` with
``# expect: CODE`` on the line each finding must point at, ``good_*`` free of errors and
warnings with the rule actually run). A name with ``main_`` or ``v030_`` is checked as that
torchtitan version only; others as every version the rule is limited to. Until
test_rule_fixtures reads registry files, this test reads them with a small stand-in for the
registry reader (literal keyword arguments of the returned ``Trainer.Config(...)`` only), or
with ``meshlint.inputs.pyregistry`` when that exists; the fixtures themselves go through
``check_file`` with ``--torchtitan-version``, as a user's registry does.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest
from conftest import FIXTURES

from meshlint.frameworks import models
from meshlint.engine.check import _split_late
from meshlint.mesh.topology import topology_for
from meshlint.frameworks import versions
from meshlint.engine.run import run_rules
from meshlint.engine.facts import build_facts
from meshlint.engine.ruleset import load_rules
from meshlint.mesh.topology import CliTopology

RULES = load_rules()
FIRST = _split_late(RULES)[0]  # what check_file runs before the unused-suppression rule
BY_CODE = {r.code: r for r in RULES}
REGISTRY_RULES = [r for r in RULES if r.frameworks and any(f.startswith("torchtitan@") and not f.endswith("@0.2.x")
                                                              for f in r.frameworks)
                  and (FIXTURES / "rules" / f"{r.code}-{r.name}").is_dir()
                  and list((FIXTURES / "rules" / f"{r.code}-{r.name}").glob("*.py"))]
EXPECT = re.compile(r"#\s*expect:\s*([A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)")
TAGS = {"main": "main@b5bcd76c6", "v030": "0.3.0"}
SECTIONS = ("parallelism", "training", "compile")


class Unknown:
    def __init__(self, reason: str, line: int, col: int, file: str = ""):
        self.reason, self.line, self.col, self.file = reason, line, col, file


class StubSource:
    """A PySource look-alike: literal keyword arguments of the function's returned config call."""

    def __init__(self, path: Path, function: str | None = None, text: str | None = None):
        self.file = str(path)
        self.text = text if text is not None else path.read_text()
        self.name = path.name
        tree = ast.parse(self.text)
        funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
        fn = next(f for f in funcs if function is None or f.name == function)
        self.function = fn.name
        self.path = f"{path}::{fn.name}"
        self.def_line, self.def_col = fn.lineno, fn.col_offset + 1
        self.nested_under = None
        model = next((n.module.split(".")[-1] for n in tree.body if isinstance(n, ast.ImportFrom)
                      and n.module and n.module.startswith("torchtitan.models.")
                      and any(a.name == "model_registry" for a in n.names)), None)
        self.data: dict = {}
        self.unknown: dict = {}
        self.positions: dict = {}
        ret = next(n for n in ast.walk(fn) if isinstance(n, ast.Return))
        for kw in ret.value.keywords:
            if kw.arg in SECTIONS and isinstance(kw.value, ast.Call):
                section = self.data.setdefault(kw.arg, {})
                for inner in kw.value.keywords:
                    self._put(section, kw.arg, inner.arg, inner.value)
            elif kw.arg == "model_spec" and isinstance(kw.value, ast.Call):
                spec = self.data.setdefault("model", {"name": model})
                self.positions["model.name"] = (kw.value.lineno, kw.value.col_offset + 1)
                if kw.value.args:
                    self._put(spec, "model", "flavor", kw.value.args[0])
                for inner in kw.value.keywords:
                    self._put(spec, "model", inner.arg, inner.value)
        self.comments = [(tok.start[0], tok.start[1] + 1, tok.string[1:])
                         for tok in tokenize.generate_tokens(io.StringIO(self.text).readline)
                         if tok.type == tokenize.COMMENT]

    def _put(self, table: dict, section: str, leaf: str, node: ast.AST) -> None:
        path = f"{section}.{leaf}"
        self.positions[path] = (node.lineno, node.col_offset + 1)
        try:
            table[leaf] = _literal(node)
        except ValueError as exc:
            self.unknown[path] = Unknown(str(exc), node.lineno, node.col_offset + 1, self.file)

    def unknown_of(self, key: str):
        parts = key.split(".")
        for i in range(len(parts), 0, -1):
            hit = self.unknown.get(".".join(parts[:i]))
            if hit is not None:
                return hit
        return None

    def has_key(self, key: str) -> bool:
        return key in self.positions

    def locate(self, key):
        if not key:
            return (self.def_line, self.def_col)
        if key.startswith("#L") and key[2:].isdigit():
            return (int(key[2:]), 1)
        options = [k.strip() for k in key.split("|") if k.strip()]
        chosen = next((k for k in options if self.has_key(k)), None)
        return self.positions.get(chosen, (self.def_line, self.def_col)) if chosen else (self.def_line, self.def_col)


def _literal(node: ast.AST):
    """Literals and literal arithmetic (``8 * 8192``); anything else cannot be followed."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.Sub, ast.FloorDiv)):
        left, right = _literal(node.left), _literal(node.right)
        return {ast.Mult: lambda: left * right, ast.Add: lambda: left + right, ast.Sub: lambda: left - right,
                ast.FloorDiv: lambda: left // right}[type(node.op)]()
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise ValueError(f"not a literal: {ast.unparse(node)}") from None


def source_for(path: Path, function: str | None = None):
    try:  # the real registry reader, once it exists
        from meshlint.inputs.pyregistry import read_registry
    except ImportError:
        return StubSource(path, function)
    registry = read_registry(str(path))
    funcs = registry.functions
    return funcs[function] if function else next(iter(funcs.values()))


def check(source, version: str, table: dict | None = None):
    module = versions.module("torchtitan", version)
    spec = module.read(source)
    spec.framework["decided_by"] = "test"
    module.attach_model(spec, table if table is not None else models.builtin(version))
    topo = topology_for(source, spec, CliTopology())
    res = module.resolve(spec, topo.world_size)
    facts = build_facts(spec, topo, res)
    findings, skips = run_rules(FIRST, facts, source.locate)
    return spec, res, facts, findings, skips


def check_fixture(path: Path, version: str) -> tuple:
    """(findings, skips) of a fixture through meshlint's own pipeline (check_file), as ``version``."""
    from meshlint.engine.check import Options, check_file

    # GPUs large enough for any peak: a fixture is about its own rule, not the default 80 GiB (ML504 has its own)
    report = check_file(str(path), Options(rules=RULES, report_unused=True, torchtitan_version=version,
                                           gpu_memory_gib=1e9))
    assert report.status == "checked", report.error or report.note
    assert report.spec.framework["version"] == version
    return report.findings, report.skips


def expectations(path: Path) -> set:
    out = set()
    for lineno, line in enumerate(path.read_text().splitlines(), start=1):
        match = EXPECT.search(line)
        if match:
            out |= {(code.strip(), lineno) for code in match.group(1).split(",")}
    return out


def _versions_for(rule, path: Path) -> list:
    tag = next((TAGS[t] for t in TAGS if path.name.split("_")[1:2] == [t]), None)
    allowed = [f.split("@", 1)[1] for f in rule.frameworks]
    if tag is not None:
        assert tag in allowed, f"{path.name} is for {tag}, which {rule.code} does not apply to"
        return [tag]
    return [v for v in allowed if v != "0.2.x"]


def cases(kind: str):
    for rule in REGISTRY_RULES:
        for path in sorted((FIXTURES / "rules" / f"{rule.code}-{rule.name}").glob(f"{kind}*.py")):
            for version in _versions_for(rule, path):
                yield pytest.param(rule.code, path, version, id=f"{rule.code}/{path.name}@{version}")


def test_every_registry_rule_has_fixtures():
    codes = {r.code for r in REGISTRY_RULES}
    for rule in RULES:
        if rule.code.startswith("ML7"):
            assert rule.code in codes, f"{rule.code} has no .py fixtures"
            directory = FIXTURES / "rules" / f"{rule.code}-{rule.name}"
            for version in [f.split("@", 1)[1] for f in rule.frameworks]:
                for kind in ("bad", "good"):
                    assert any(version in _versions_for(rule, p) for p in directory.glob(f"{kind}*.py")), \
                        f"{rule.code}: no {kind} fixture checked as {version}"


@pytest.mark.parametrize("code, path, version", list(cases("bad")))
def test_bad_registry_fixture_reports_exactly_the_expected_findings(code, path, version):
    expected = expectations(path)
    assert any(c == code for c, _ in expected), f"{path} must expect {code}"
    findings, _skips = check_fixture(path, version)
    codes = {c for c, _ in expected}
    found = {(f.code, f.line) for f in findings if f.severity in ("error", "warning") or f.code in codes}
    assert found == expected, "\n".join(f"{f.line}: {f.code} {f.message}" for f in findings)
    for f in findings:
        assert f.message and "<error:" not in f.message and "<error:" not in (f.help or ""), f.message


@pytest.mark.parametrize("code, path, version", list(cases("good")))
def test_good_registry_fixture_is_clean_and_the_rule_ran(code, path, version):
    findings, skips = check_fixture(path, version)
    noisy = [f for f in findings if f.severity in ("error", "warning")]
    assert not noisy, "\n".join(f"{f.line}: {f.code} {f.message}" for f in noisy)
    skipped = [s for s in skips if s.code == code]
    assert not skipped, f"{code} was skipped (needs {skipped[0].needs}): the fixture does not exercise it"


@pytest.mark.parametrize("code", sorted(r.code for r in REGISTRY_RULES))
def test_documented_registry_examples_behave_as_documented(code, tmp_path):
    rule = BY_CODE[code]
    for field in ("what", "why", "bad", "good", "fix"):
        assert rule.doc.get(field), f"{code}: doc.{field} is missing"
    # the doc examples are registry functions: a rule that also covers 0.2.x has TOML fixtures for it
    for version in [f.split("@", 1)[1] for f in rule.frameworks if not f.endswith("@0.2.x")]:
        bad = tmp_path / "bad.py"
        bad.write_text(rule.doc["bad"])
        assert code in [f.code for f in check(source_for(bad), version)[3]], f"doc.bad does not trigger {code}"
        good = tmp_path / "good.py"
        good.write_text(rule.doc["good"])
        _s, _r, _f, findings, skips = check(source_for(good), version)
        assert code not in [f.code for f in findings], f"doc.good triggers {code} as {version}"
        assert code not in [s.code for s in skips], f"doc.good does not exercise {code} as {version}"


# --------------------------------------------------------------------------- versions and reuse

def _source(tmp_path, body: str, world: int = 8, name: str = "config_registry.py") -> StubSource:
    path = tmp_path / name
    path.write_text(f"# meshlint: world_size={world} gpus_per_node=8\n"
                    "from torchtitan.config import CompileConfig, ParallelismConfig, TrainingConfig\n"
                    f"from torchtitan.trainer import Trainer\n{body}")
    return source_for(path)


def test_etp_rules_do_not_run_on_registry_versions(tmp_path):
    src = _source(tmp_path, "def f():\n    return Trainer.Config(parallelism=ParallelismConfig("
                            "data_parallel_shard_degree=3, tensor_parallel_degree=2, expert_parallel_degree=4))\n", 6)
    for version in ("0.3.0", "main@b5bcd76c6"):
        _s, res, facts, findings, skips = check(src, version)
        codes = {f.code for f in findings}
        assert "ML701" in codes and not codes & {"ML401", "ML402", "ML403"}
        assert not {s.code for s in skips} & {"ML401", "ML402", "ML403"}, "version-limited rules are not 'skipped'"
        assert facts["framework_version"] == version and facts["etp"] is None
    main = check(src, "main@b5bcd76c6")[1]
    v030 = check(src, "0.3.0")[1]
    assert main.error_stage == "resolve" and "must divide dp_shard * cp * tp (6)" in main.framework_error
    assert v030.error_stage == "mesh" and "The product of mesh_sizes=(1, 1, 1, 4) is 4" in v030.framework_error


def test_reused_model_rules_fire_on_registry_configs(tmp_path):
    # qwen3 14B: 40 heads, 8 KV heads (ML304/ML305); 30B-A3B: 128 experts (ML309)
    heads = _source(tmp_path, "from torchtitan.models.qwen3 import model_registry\n\ndef f():\n"
                              "    return Trainer.Config(parallelism=ParallelismConfig(tensor_parallel_degree=16),\n"
                              "                          model_spec=model_registry(\"14B\"))\n", 16, "a.py")
    experts = _source(tmp_path, "from torchtitan.models.qwen3 import model_registry\n\ndef f():\n"
                                "    return Trainer.Config(parallelism=ParallelismConfig(expert_parallel_degree=3),\n"
                                "                          training=TrainingConfig(disable_cuda_graphs=True),\n"
                                "                          model_spec=model_registry(\"30B-A3B\"))\n", 6, "b.py")
    for version in ("0.3.0", "main@b5bcd76c6"):
        assert {"ML304", "ML305"} <= {f.code for f in check(heads, version)[3]}
        assert "ML309" in {f.code for f in check(experts, version)[3]}


def test_pipeline_rules_count_num_pp_microbatches_on_main(tmp_path):
    src = _source(tmp_path, "from torchtitan.models.llama3 import model_registry\n\ndef f():\n"
                            "    return Trainer.Config(\n"
                            "        parallelism=ParallelismConfig(pipeline_parallel_degree=4),\n"
                            "        training=TrainingConfig(disable_cuda_graphs=True),\n"
                            "        model_spec=model_registry(\"8B\"))\n")
    _s, _r, facts, findings, _k = check(src, "main@b5bcd76c6")
    assert facts["pipeline"]["n_microbatches"] == 1 and facts["pipeline"]["microbatches_key"] == \
        "parallelism.num_pp_microbatches"
    ml605 = [f for f in findings if f.code == "ML605"]
    assert ml605 and "num_pp_microbatches" in ml605[0].help and ml605[0].line == 8
    # 0.3.0: local_batch_size 8 / microbatch size 1 = 8 microbatches: fine
    assert "ML605" not in {f.code for f in check(src, "0.3.0")[3]}


def test_unreadable_values_are_unknown_never_defaults(tmp_path):
    src = _source(tmp_path, "def f():\n    return Trainer.Config(\n"
                            "        parallelism=ParallelismConfig(tensor_parallel_degree=pick_tp(),\n"
                            "            pipeline_parallel_degree=2, num_pp_microbatches=2),\n"
                            "        training=TrainingConfig(disable_cuda_graphs=True))\n")
    spec, res, facts, findings, skips = check(src, "main@b5bcd76c6")
    assert spec.degrees["tp"] is None and spec.degrees["pp"] == 2
    assert [(u["key"], u["line"]) for u in spec.unreadable] == [("parallelism.tensor_parallel_degree", 6)]
    assert "pick_tp" in spec.unreadable[0]["reason"] and spec.unreadable[0]["col"] >= 1
    assert facts["unreadable"] == spec.unreadable
    assert res.framework_error is None and not res.meshes and "could not be read statically" in res.notes[0]
    assert not [f for f in findings if f.severity == "error"]
    assert "ML713" not in {s.code for s in skips}  # reads no tp: runs
    assert {"ML704", "ML201"} <= {s.code for s in skips}  # read tp: skipped, never guessed
