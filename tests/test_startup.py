"""What a plain ``meshlint check`` loads: start-up is most of its cost, so the modules it imports are pinned here.

Deterministic (module lists, never timings): one subprocess imports the check path's modules,
then runs the console entry point on a KempnerForge config, and reports what each step added to
``sys.modules``. Speed itself is measured by bench/bench_vs_kempnerforge.py, not asserted.
"""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest
from conftest import FIXTURES, ROOT

PROBE = r"""
import sys
before = set(sys.modules)
import meshlint.engine.check, meshlint.engine.run, meshlint.engine.expr, meshlint.cli.lint, meshlint.engine.rules, meshlint.inputs.source
imported = set(sys.modules) - before
sys.argv = ["meshlint", "check", *sys.argv[1:]]
from meshlint.cli.entry import main
try:
    main()
except SystemExit as exc:
    code = exc.code
print("\nPROBE", repr((sorted(imported), sorted(set(sys.modules) - before), code)))
"""

# Never on the check path: the CLI framework, schema validation of user rule packs, the
# report formats nobody asked for, the smoke runner, the solvers, torch.
NEVER = ("click", "jsonschema", "torch", "meshlint.cli.commands", "meshlint.report.json_report", "meshlint.report.sarif",
         "meshlint.report.github", "meshlint.report.explain", "meshlint.report.svg", "meshlint.smoke",
         "meshlint.report.diff", "meshlint.solve.fix", "meshlint.generate", "yaml",
         "meshlint.engine.expr.compiler",  # build time only: the check path runs what it wrote (rules_compiled)
         # every input but the TOML reader (its text, key positions and suppressions)
         *(f"meshlint.inputs.{p.stem}" for p in (ROOT / "meshlint" / "inputs").glob("*.py")
           if p.stem not in ("__init__", "source", "tomlpos", "suppress")),
         # the packages beside them, and what turns a registry, script or launch line into configs
         "meshlint.inputs.pyregistry", "meshlint.engine.units", "meshlint.engine.accelerate_units")
# Importing the library's check modules loads no rules, no cache and no schema: that is paid by a run.
NOT_AT_IMPORT = ("json", "meshlint.engine.rule_cache", "meshlint.frameworks.schema_data", "meshlint.report", "difflib",
                 "meshlint.inputs.suppress")


CONFIG = "70b_32gpu_tp4_pp4.toml"  # a config KempnerForge accepts and with no error (an error runs the
# layout search for its help lines), with no meshlint directive in it


@pytest.fixture(scope="module")
def probe():
    config = FIXTURES / "kempnerforge" / CONFIG
    proc = subprocess.run([sys.executable, "-c", PROBE, str(config)], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)
    assert "PROBE" in proc.stdout, proc.stderr[-2000:]
    at_import, after_run, code = ast.literal_eval(proc.stdout.rsplit("PROBE", 1)[1].strip())
    return set(at_import), set(after_run), code, proc


def _hits(modules: set, names: tuple) -> list:
    return sorted(m for m in modules if any(m == n or m.startswith(n + ".") for n in names))


def test_importing_the_check_path_loads_no_cache_schema_or_report(probe):
    at_import, _, _, _ = probe
    assert _hits(at_import, NEVER + NOT_AT_IMPORT) == []


def test_a_plain_check_never_loads_click_jsonschema_torch_or_other_formats(probe):
    _, after_run, code, proc = probe
    assert code in (0, 1), proc.stderr[-2000:]
    assert _hits(after_run, NEVER) == []
    assert "meshlint.report.text" in after_run  # the format that was asked for


def test_a_config_that_never_mentions_meshlint_skips_the_suppression_parser(probe):
    _, after_run, _, _ = probe
    assert "meshlint" not in (FIXTURES / "kempnerforge" / CONFIG).read_text()
    assert "meshlint.inputs.suppress" not in after_run


def test_a_kempnerforge_check_imports_neither_ast_nor_copy(probe):
    # ~3 ms and ~0.6 ms of a cold run: the schema check's membership steps parse with _ast alone, and
    # copy serves only a launch line's space override (a `for` condition of some schemas still needs ast)
    _, after_run, _, _ = probe
    assert {"ast", "copy"} & after_run == set()


def test_a_kempnerforge_check_imports_neither_tomllib_typing_nor_the_parser_s_nodes(probe):
    # a first run's imports: tomllib (with datetime) ~70 M instructions, typing ~17 M, _ast ~10 M; the
    # configs are read by meshlint/tomlfast.py, the tuple classes are Records, the schema's usual
    # conditions and for headers are read without the parser
    _, after_run, _, _ = probe
    assert {"tomllib", "typing", "datetime", "_ast", "fnmatch"} & after_run == set()


def test_a_kempnerforge_check_imports_neither_re_nor_what_re_imports(probe):
    # re with enum, functools and collections, and compiling the check path's patterns: ~33 M instructions of a
    # first run; the patterns come precompiled (meshlint/fastre.py), the tuple classes are Records
    _, after_run, _, _ = probe
    assert {"re", "enum", "functools", "collections", "collections.abc", "importlib", "json"} & after_run == set()


WARM_PROBE = r"""
import sys
sys.argv = ["meshlint", "check", *sys.argv[1:]]
from meshlint.cli.entry import main
try:
    main()
except SystemExit as exc:
    code = exc.code
print("\nPROBE", repr((sorted(sys.modules), code)))
"""
# A run answered from the results cache needs none of the pipeline: no settings or project
# configuration, no rules, no TOML parser, no dialect, no topology. (A pyproject.toml that mentions
# meshlint on the way up is parsed, to find the rule packs it names: not the case here.)
PIPELINE = ("meshlint.engine.check", "meshlint.engine.run", "meshlint.engine.expr", "meshlint.engine.rules", "meshlint.frameworks",
            "meshlint.engine.facts", "meshlint.inputs.source", "meshlint.cli.settings", "meshlint.cli.project_config", "meshlint.mesh.topology",
            "meshlint.frameworks.models", "meshlint.frameworks.schema_data", "tomllib", "hashlib")


def test_a_run_answered_from_the_results_cache_imports_no_pipeline(tmp_path):
    import os

    config = tmp_path / CONFIG  # outside this repository: no pyproject.toml above it that mentions meshlint
    config.write_bytes((FIXTURES / "kempnerforge" / CONFIG).read_bytes())
    env = {**os.environ, "MESHLINT_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("MESHLINT_NO_CACHE", None)
    runs = []
    for _ in range(2):  # the first fills the cache, the second is answered from it
        proc = subprocess.run([sys.executable, "-c", WARM_PROBE, str(config)], capture_output=True, text=True,
                              cwd=ROOT, timeout=60, env=env)
        assert "PROBE" in proc.stdout, proc.stderr[-2000:]
        runs.append((ast.literal_eval(proc.stdout.rsplit("PROBE", 1)[1].strip()), proc.stdout.rsplit("PROBE", 1)[0]))
    (cold_modules, cold_code), cold_out = runs[0]
    (warm_modules, warm_code), warm_out = runs[1]
    assert warm_out == cold_out and warm_code == cold_code
    assert "meshlint.engine.check" in cold_modules
    assert _hits(set(warm_modules), NEVER + PIPELINE) == []


GC_PROBE = r"""
import gc, sys
from meshlint.cli import entry, lint
real_freeze, real_run = gc.freeze, lint.run
def freeze():
    print("FREEZE", gc.get_threshold()[0], file=sys.stderr)
    real_freeze()
def run(*args, **kwargs):
    code = real_run(*args, **kwargs)
    print("AFTER", gc.get_threshold()[0], file=sys.stderr)
    return code
gc.freeze, lint.run = freeze, run
print("BEFORE", gc.get_threshold()[0], file=sys.stderr)
sys.argv = ["meshlint", *sys.argv[1:]]
entry.console()
"""


def test_check_collects_garbage_rarely_until_its_first_file_then_as_before(tmp_path):
    # the tables built at start-up move out of the collector's way once (gc.freeze), after the first file;
    # then the default thresholds collect each config's garbage (flat memory over 10,000 configs)
    configs = [str(FIXTURES / "kempnerforge" / name) for name in ("7b_32gpu_fsdp.toml", "cp2_8gpu.toml")]
    env = {"PYTHONPATH": str(ROOT), "MESHLINT_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", GC_PROBE, "check", *configs], capture_output=True, text=True,
                         env=env, cwd=tmp_path)
    assert out.returncode in (0, 1), out.stderr
    default = __import__("gc").get_threshold()[0]
    assert out.stderr.split() == ["BEFORE", str(default), "FREEZE", "50000", "AFTER", str(default)]
    again = subprocess.run([sys.executable, "-c", GC_PROBE, "check", *configs], capture_output=True, text=True,
                           env=env, cwd=tmp_path)  # every result cached: nothing checked, nothing to settle
    assert again.stderr.split() == ["BEFORE", str(default), "AFTER", "50000"]
    other = subprocess.run([sys.executable, "-c", GC_PROBE, "rules"], capture_output=True, text=True, env=env,
                           cwd=tmp_path)  # another command: the defaults throughout
    assert other.returncode == 0 and other.stderr.split() == ["BEFORE", str(default)]
