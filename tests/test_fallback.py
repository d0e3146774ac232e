"""``fallback`` rules (ML112, ML101): reported only where no other rule reports an error on one of their keys."""

from __future__ import annotations

from meshlint.engine import rule_cache
from meshlint.engine.check import Options, check_file
from meshlint.engine.run import run_rules
from meshlint.engine.rules import build_rule
from meshlint.engine.ruleset import load_rules
from meshlint.mesh.topology import CliTopology

CATCH_ALL = {"code": "ML990", "name": "catch-all", "severity": "error", "summary": "s", "fallback": True,
             "foreach": "refusals", "check": "false", "key": "{item.keys}", "message": "{item.message}"}
SPECIFIC = {"code": "ML991", "name": "specific", "severity": "error", "summary": "s", "check": "tp != 3",
            "key": "distributed.tp", "message": "tp is 3"}


def _run(rules, refusals, tp=3):
    facts = {"dialect": "kempnerforge", "refusals": refusals, "tp": tp}
    findings, _ = run_rules(rules, facts, lambda key: (1, 1))
    return sorted((f.code, f.key) for f in findings)


def _refusal(keys: str) -> dict:
    return {"key": keys.split("|")[0], "keys": keys, "message": f"refused: {keys}", "framework": "", "source": ""}


def test_a_fallback_yields_to_another_rules_error_on_any_of_its_keys():
    rules = [build_rule(CATCH_ALL, "a.toml", "user"), build_rule(SPECIFIC, "b.toml", "user")]
    assert rules[0].fallback and not rules[1].fallback
    refusals = [_refusal("distributed.tp"), _refusal("distributed.pp|distributed.tp"), _refusal("model.dim")]
    # the two refusals that read tp yield to ML991's error on tp; the one on model.dim stands
    assert _run(rules, refusals) == [("ML990", "model.dim"), ("ML991", "distributed.tp")]
    # no error on tp: every refusal is reported
    assert _run(rules, refusals, tp=4) == [("ML990", "distributed.pp"), ("ML990", "distributed.tp"),
                                           ("ML990", "model.dim")]


def test_only_an_error_covers_a_fallback():
    warning = build_rule({**SPECIFIC, "severity": "warning"}, "b.toml", "user")
    assert _run([build_rule(CATCH_ALL, "a.toml", "user"), warning], [_refusal("distributed.tp")]) == [
        ("ML990", "distributed.tp"), ("ML991", "distributed.tp")]


def test_the_rule_cache_keeps_the_flag():
    rule = build_rule(CATCH_ALL, "a.toml", "user")
    kind, encoded = rule_cache._encode_value([rule])
    assert rule_cache._decode_value(kind, encoded)[0].fallback is True


def _codes(tmp_path, text: str, world: int = 8) -> list:
    path = tmp_path / "c.toml"
    path.write_text(text)
    # GPUs large enough for any peak: these cases are about which rule reports a refusal, not memory (ML504/ML505)
    report = check_file(str(path), Options(rules=load_rules(), topology=CliTopology(world_size=world),
                                           gpu_memory_gib=1e9))
    return sorted((f.code, f.line) for f in report.findings if f.severity != "info")


def test_a_framework_check_no_rule_models_is_reported(tmp_path):
    # KempnerForge's ModelConfig: dim % n_heads, and positive sizes (pointing at the operand that fails)
    assert _codes(tmp_path, "[model]\ndim = 4100\nn_heads = 32\nn_kv_heads = 8\n[distributed]\ntp = 2\n") == [
        ("ML112", 2)]
    assert _codes(tmp_path, "[model]\ndim = 4096\nn_layers = 0\nn_heads = 32\nn_kv_heads = 8\n"
                            "[distributed]\n") == [("ML112", 3)]
    assert _codes(tmp_path, "[train]\ngrad_accum_steps = -1\n[distributed]\n") == [("ML112", 2)]


def test_a_framework_check_a_rule_models_is_reported_once(tmp_path):
    # DistributedConfig refuses dp_shard = 0 too; ML102 says it with the fix
    assert _codes(tmp_path, "[distributed]\ndp_shard = 0\n") == [("ML102", 2)]


def test_a_value_kempnerforge_converts_is_a_warning_not_an_error(tmp_path):
    assert _codes(tmp_path, '[distributed]\ntp = "2"\n') == [("ML114", 2)]
    assert _codes(tmp_path, '[distributed]\ntp = "two"\n') == [("ML101", 2)]
