"""Running rules over the facts of one config.

The engine, not the rule, attaches code, name and severity; a rule only says
what to check, where to point and what to say. A rule whose condition reads
an unknown fact (``world_size`` when no world size is known) is skipped, and
the skip is recorded so a report can say which rules did not run and why.
Messages are rendered after every check has run, so a message can mention
the rules that were skipped.
"""

from __future__ import annotations

from meshlint.record import Record
from meshlint.engine import expr
from meshlint.engine.expr.errors import NET, evaluation_error
from meshlint.engine.expr.expression import compiled_for
from meshlint.engine.expr.values import _NO_LETS, DEFAULT_BUDGET, Budget, Env, _charge
from meshlint.limits import MAX_RULE_MEMORY
from meshlint.engine.findings import Finding
from meshlint.engine.rules import Rule

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs a first run ~17 M instructions
    from typing import Callable


class Skip(Record):
    code: str
    name: str
    needs: str


def run_rules(rules: list[Rule], facts: dict, locate: Callable[[str], tuple]) -> tuple[list[Finding], list[Skip]]:
    """Evaluate every applicable rule; returns findings (sorted by position) and skips."""
    failures: list[tuple[Rule, expr.Env]] = []
    errors: list[Finding] = []
    skips: list[Skip] = []
    shared = expr.Env(facts, budget=0)  # facts only; each rule scope below brings its own budget
    compiled_for(facts["dialect"])  # the built-in rules' functions for this dialect, imported on first use
    spare = None  # the last rule's scope, when no failure kept it: renewed for the next (a new one costs more)
    framework_id = (facts.get("framework") or {}).get("id")
    for rule, params, lets in _for_dialect(rules, facts["dialect"], framework_id):
        if spare is None:
            env = Env(params, lets, Budget(DEFAULT_BUDGET), shared)
        else:  # Env.renew, inline (once per rule and config): as Env(params, lets, Budget(...), shared) makes one
            env, spare = spare, None
            env.values, env.lets = params, lets
            env.let_cache = env.let_active = env.let_replay = None
            budget = env.budget
            budget.left, budget.mem, budget.lets = DEFAULT_BUDGET, MAX_RULE_MEMORY, 0
        kept = len(failures)
        foreach = rule.foreach
        try:
            if foreach is None:  # most rules: one scope, an unknown fact skips the rule
                if not _passes(rule.when, rule.check, env):
                    failures.append((rule, env))
            else:
                items = foreach.evaluate(env)
                if not isinstance(items, list):
                    raise expr.EvalError(f"'foreach' must give a list, got {expr.type_name(items)}")
                scope = None
                for item in items:
                    if scope is None:
                        scope = Env({"item": item}, None, env.budget, env)  # env.child, without the call
                    else:  # the last item's scope, which no failure kept: as a new one would be (it holds no lets)
                        scope.values["item"] = item
                        scope.let_cache = scope.let_active = None
                    try:
                        if not _passes(rule.when, rule.check, scope):
                            failures.append((rule, scope))
                            scope = None  # kept by the failure: the next item gets its own
                    except expr.NeedFact as need:  # an unknown fact skips this item
                        skips.append(Skip(rule.code, rule.name, need.path.split(".")[0].split("[")[0]))
        except expr.NeedFact as need:
            skips.append(Skip(rule.code, rule.name, need.path.split(".")[0].split("[")[0]))
        except expr.EvalError as exc:
            errors.append(Finding(rule.code, rule.name, "error", f"rule could not be evaluated: {exc}",
                                  f"fix the rule file {rule.path}", None, 1, 1))
        if len(failures) == kept:  # its scopes are referenced by nothing now
            spare = env
    if any(rule.fallback for rule, _ in failures):
        failures = _without_covered_fallbacks(failures)
    skips = _unique(skips)  # a foreach rule may skip once per item
    facts["skipped"] = [{"code": s.code, "name": s.name, "needs": s.needs} for s in skips]
    findings = [_finding(rule, scope, locate) for rule, scope in failures] + errors
    findings.sort(key=Finding.sort_key)
    return findings, skips


def _without_covered_fallbacks(failures: list) -> list:
    """Drop each failure of a ``fallback`` rule (ML112, the framework's own checks evaluated whole; ML101, ML114)
    whose keys (every ``|`` alternative) share one with an error of another rule: that rule models the key
    and says more about it (a fix, the numbers), and one refusal is reported once."""
    covered: set = set()
    for rule, scope in failures:
        if not rule.fallback and rule.severity == "error":
            covered |= _keys(rule, scope)
    return [(rule, scope) for rule, scope in failures if not rule.fallback or covered.isdisjoint(_keys(rule, scope))]


def _keys(rule: Rule, scope: expr.Env) -> set:
    if rule.key is None:
        return set()
    try:
        text = rule.key.render(scope)
    except (expr.NeedFact, expr.EvalError):
        return set()
    return {k.strip() for k in text.split("|")} - {"", "unknown"}


_BY_DIALECT: dict[tuple, tuple] = {}


def _for_dialect(rules: list[Rule], dialect: str, framework_id: str | None) -> list[tuple[Rule, dict, dict]]:
    """The rules that apply to a dialect and framework, each with its scope's own names (``params``) and its lets
    (never None: Env's own default), once per rule list: no evaluation changes a scope's names (loops and ``item``
    bind theirs in scopes of their own). A rule of another framework version is left out here, not skipped per
    config: its foreach may name fields this version's config lacks."""
    key = (id(rules), dialect, framework_id)
    hit = _BY_DIALECT.get(key)
    if hit is None or hit[0] is not rules:
        if len(_BY_DIALECT) >= 12:  # a long-lived process loads many rule lists: keep the cache bounded
            _BY_DIALECT.clear()
        hit = _BY_DIALECT[key] = (rules, [(r, {"params": r.params}, r.lets or _NO_LETS) for r in rules
                                          if r.applies_to(dialect)
                                          and (r.frameworks is None or framework_id in r.frameworks)])
    return hit[1]


def _passes(when, check, env) -> bool:
    """Whether a scope passes a rule: its ``when`` false, or its ``check`` true: ``_truth(e.evaluate(env))`` of
    each, with ``Expr.evaluate`` inline where the expression's function is built (its size charged up front, the
    same net): this runs for every rule of every config (and every item of a foreach rule), so the two are written
    out rather than looped over (no tuple, no loop: 1.2 M instructions less in a first run of 30 configs)."""
    budget = env.budget
    if when is not None:
        fn = when._fn
        if fn is None:
            verdict = when.evaluate(env)
        else:
            budget.left -= when.size
            if budget.left < 0:
                _charge(env, 0)  # raises
            try:
                verdict = fn(env)
            except NET as exc:
                raise evaluation_error(exc) from None
        if verdict is not True and (verdict is False or not _truth(verdict)):
            return True  # a false when passes
    fn = check._fn
    if fn is None:
        verdict = check.evaluate(env)
    else:
        budget.left -= check.size
        if budget.left < 0:
            _charge(env, 0)  # raises
        try:
            verdict = fn(env)
        except NET as exc:
            raise evaluation_error(exc) from None
    return verdict is True or (verdict is not False and _truth(verdict))


def _truth(value) -> bool:
    if value is True or value is False:
        return value
    if isinstance(value, expr.Missing):
        raise expr.NeedFact(value.path)
    return bool(value)


def _unique(skips: list[Skip]) -> list[Skip]:
    seen, out = set(), []
    for s in skips:
        if s.code not in seen:
            seen.add(s.code)
            out.append(s)
    return out


def _finding(rule: Rule, scope: expr.Env, locate: Callable[[str], tuple]) -> Finding:
    key = rule.key.render(scope) if rule.key else None
    if key in ("", "unknown"):
        key = None
    line, col = locate(key)
    if key and "|" in key:  # alternatives only steer the position; the key to edit is the first
        key = key.split("|", 1)[0].strip() or None
    helps = []
    for cond, template in rule.help:
        if cond is not None:
            try:
                if not _truth(cond.evaluate(scope)):
                    continue
            except (expr.NeedFact, expr.EvalError):
                continue
        helps.append(template.render(scope))
    return Finding(rule.code, rule.name, rule.severity, rule.message.render(scope),
                   "\n".join(helps) if helps else None, key, line, col, None, rule.skip_note)
