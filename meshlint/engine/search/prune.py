"""Cutting the layout search with the rules themselves: which degrees each error rule reads, and its verdict.

A rule's verdict depends only on the facts its ``check``, ``when`` and ``foreach``
read (and the ``let`` bindings those use): ``ML304`` reads ``tp`` and ``model``, so
``tp = 3`` fails it whatever the other degrees are. Each error rule is put in one class:

* **static**: it reads no degree (``ML108`` unknown keys, ``ML713`` async TP needs
  compile): one verdict for every layout. What it reports no degree can fix;
  ``suggest`` says so instead of finding nothing.
* **partial**: it reads only degrees themselves (``pp``, ``tp``, ...), ``pipeline``
  (a function of ``pp``) and static facts. Its verdict on the degrees it reads holds
  for every layout that shares them, so it is computed once per distinct value of
  those degrees (on the config's own facts with the degrees replaced) and cuts the
  whole subtree of the enumeration as soon as those degrees are assigned. These
  necessary conditions (heads and KV heads divisible by tp, experts by ep, layers
  and microbatches by the pipeline, tokens by tp·2cp, ...) are derived from the
  rules, never written by hand, so they cannot drift from them.
* **full**: it reads the resolution (``world_factors``, ``axes``, ``batch``,
  ``framework_error``, ...): run on every surviving layout by ``valid``.

Facts are classed by an explicit list (``STATIC``); a name not on it makes a rule
full, which is always exact, only slower.
"""

from __future__ import annotations

from typing import NamedTuple

from meshlint.engine import expr
from meshlint.frameworks.base import DEGREES

# Facts that do not depend on the degrees (for a fixed target world and node shape).
STATIC = frozenset({
    "dialect", "framework_version", "framework", "unreadable", "world_size", "world_known", "world_source",
    "gpus_per_node", "gpus_per_node_source", "nodes", "placement", "problems", "unknown_keys", "near_misses",
    "max_degree", "topology_conflicts", "srun_idle", "directive_problems", "model", "train", "training", "parallelism",
    "compile", "vlm", "memory", "keys", "params", "item", "trainer", "refusals", "kept_values", "unmodelled", "config", "launch", "video",
    "ignored_keys", "written_for",  # the keys the file writes, whatever the degrees
    "eval", "datasets",
    "accelerate",  # its launcher settings, sp and key paths: the search varies dp_replicate, dp_shard, cp and tp only
    "world_candidates",
    "choices",  # only help lines read it, and the search never runs help
})
DEGREE_FACTS = frozenset(DEGREES)
# Facts computed from one degree only, before any resolution can fail (pipeline_plan reads res.degrees["pp"]).
DERIVED = {"pipeline": frozenset({"pp"})}


_READS: dict = {}  # id(rule) -> (rule, its reads): a run's rules outlive every search of the run


def reads(rule) -> frozenset:
    """Root names a rule's verdict reads: its check, when and foreach, and the lets they use (worked out
    once per rule object: every config of a run searches with the same rules)."""
    hit = _READS.get(id(rule))
    if hit is not None and hit[0] is rule:
        return hit[1]
    if len(_READS) > 4096:  # a long-lived process loading many rule packs: stay bounded
        _READS.clear()
    out = _reads(rule)
    _READS[id(rule)] = (rule, out)
    return out


def _reads(rule) -> frozenset:
    todo = [e for e in (rule.check, rule.when, rule.foreach) if e is not None]
    seen: set = set()
    names: set = set()
    while todo:
        for name in todo.pop().free_names():
            if name in rule.lets:
                if name not in seen:
                    seen.add(name)
                    todo.append(rule.lets[name])
            else:
                names.add(name)
    return frozenset(names)


class Classified(NamedTuple):
    static: list    # rules
    partial: list   # (rule, frozenset of the degree facts it reads)
    full: list      # rules


def classify(rules: list, dialect: str) -> Classified:
    static, partial, full = [], [], []
    for rule in rules:
        names = reads(rule)
        if dialect != "native" and "native" in names:
            names = names - {"native"}  # a non-native config's native facts are empty: static
        if dialect != "megatron" and "megatron" in names:
            names = names - {"megatron"}  # the same for Megatron's (its own layouts are not searched yet)
        degrees = set()
        is_full = False
        for name in names:
            if name in STATIC:
                continue
            if name in DEGREE_FACTS:
                degrees.add(name)
            elif name in DERIVED:
                degrees |= DERIVED[name]
            else:
                is_full = True
        if is_full:
            full.append(rule)
        elif degrees:
            partial.append((rule, frozenset(degrees)))
        else:
            static.append(rule)
    return Classified(static, partial, full)


def fails(rule, facts: dict) -> bool:
    """Whether ``rule`` reports a finding on ``facts``: the engine's evaluation (meshlint/engine/run.py
    run_rules), without rendering messages. A rule that reads an unknown fact is skipped (passes);
    one that cannot be evaluated is reported as an error by the engine, so it fails here."""
    return failing_scope(rule, facts) is not None


def failing_scope(rule, facts: dict):
    """The evaluation scope of the first failing item (to render the finding's key), or None."""
    shared = expr.Env(facts, budget=0)
    env = expr.Env({"params": rule.params}, rule.lets, parent=shared)
    try:
        items = rule.foreach.evaluate(env) if rule.foreach else [None]
        if not isinstance(items, list):
            return env
        for item in items:
            scope = env.child({"item": item}) if rule.foreach else env
            try:
                if rule.when is not None and not _truth(rule.when.evaluate(scope)):
                    continue
                if not _truth(rule.check.evaluate(scope)):
                    return scope
            except expr.NeedFact:
                if not rule.foreach:
                    raise
    except expr.NeedFact:
        return None
    except expr.EvalError:
        return env
    return None


def _truth(value) -> bool:
    if isinstance(value, expr.Missing):
        raise expr.NeedFact(value.path)
    return bool(value)


# Partial rules' verdicts shared by the searches of one process (``meshlint check`` searches every config
# with an error): a rule is a pure function of the facts it reads, so the key is the rule, the values of
# the non-searched facts it reads, and the searched degrees' values.
_SHARED: dict = {}
_RULES_ALIVE: dict = {}
MAX_SHARED = 200_000


class Pruner:
    """The partial rules' verdicts on partial assignments, memoised per distinct value of the degrees
    each reads; ``rejected`` counts, per rule, the partial layouts it cut."""

    def __init__(self, partial: list, facts_for_pp, roles_of, searched: frozenset):
        self.partial = partial            # (rule, degrees)
        self.facts_for_pp = facts_for_pp  # pp value or None -> the config's facts with that pp (pipeline included)
        self.roles_of = roles_of          # assignment -> degree facts (identity except native meshes)
        self.searched = searched          # degree facts the search assigns (others keep the config's value)
        self.memo: dict = {}
        self.shared_keys: dict = {}       # rule index -> its key in _SHARED (None: not shared)
        self.rejected: dict = {}
        self.by_role: dict = {}
        self.assigned: dict = {}          # rule index -> the searched degrees it reads
        for index, (rule, degrees) in enumerate(partial):
            mine = tuple(sorted(degrees & searched))
            self.assigned[index] = mine
            for d in mine:
                self.by_role.setdefault(d, []).append(index)

    def verdict(self, index: int, degree_values: dict) -> bool:
        """True when partial rule ``index`` passes with these values of the searched degrees it reads."""
        mine = self.assigned[index]
        values = tuple(degree_values[d] for d in mine)
        key = (index, values)
        hit = self.memo.get(key)
        if hit is None:
            shared = self._shared_key(index)
            if shared is not None:
                hit = _SHARED.get((shared, values))
            if hit is None:
                rule = self.partial[index][0]
                base = self.facts_for_pp(degree_values["pp"] if "pp" in mine else None)
                facts = dict(base)
                for d in mine:
                    facts[d] = degree_values[d]
                hit = not fails(rule, facts)
                if shared is not None:
                    if len(_SHARED) > MAX_SHARED:
                        _SHARED.clear()
                        _RULES_ALIVE.clear()
                    _RULES_ALIVE[shared[0]] = rule  # an id stays that rule's while the memo holds it
                    _SHARED[(shared, values)] = hit
            self.memo[key] = hit
        return hit

    def _shared_key(self, index: int):
        """What, besides the searched degrees, rule ``index``'s verdict depends on: the rule itself and the
        values of the other facts it reads. Configs of one run that agree on them (the same model, the same
        token counts...) share its verdicts. None for a rule reading ``pipeline`` (a function of pp computed
        per config) or a fact that cannot be written out exactly."""
        keys = self.shared_keys
        if index not in keys:
            rule, _degrees = self.partial[index]
            names = reads(rule)
            key = None
            if not names & DERIVED.keys():
                base = self.facts_for_pp(None)
                mine = set(self.assigned[index])
                try:
                    key = (id(rule), repr(tuple((n, base.get(n)) for n in sorted(names) if n not in mine)))
                except Exception:  # noqa: BLE001 - a fact without a faithful text form: this config alone
                    key = None
            keys[index] = key
        return keys[index]

    def check(self, name: str, values: dict, role: str | None = None) -> bool:
        """Called after ``name`` is assigned: the partial rules that read its degree and whose searched
        degrees are now all assigned."""
        entries = self.by_role.get(role or name)
        if not entries:
            return True
        facts = self.roles_of(values)
        memo = self.memo
        for index in entries:
            mine = self.assigned[index]
            try:
                key = (index, tuple([facts[d] for d in mine]))
            except KeyError:
                continue  # not all assigned yet: checked when the last one is
            hit = memo.get(key)
            if hit is None:
                if None in key[1]:
                    continue
                hit = self.verdict(index, facts)
            if not hit:
                code = self.partial[index][0].code
                self.rejected[code] = self.rejected.get(code, 0) + 1
                return False
        return True

    def drop_single(self) -> None:
        """Stop checking rules that read one searched degree (their verdicts were applied to its values)."""
        for role, indices in self.by_role.items():
            self.by_role[role] = [i for i in indices if len(self.assigned[i]) > 1]

    def unchecked(self) -> list:
        """Partial rules that read none of the searched degrees' values (checked once, with the config's)."""
        return [i for i, mine in self.assigned.items() if not mine]

    def allowed_values(self, degree: str, values: list) -> tuple[list, dict]:
        """(values every single-degree rule on ``degree`` accepts, {rejected value: rule code})."""
        single = [i for i in self.by_role.get(degree, []) if self.assigned[i] == (degree,)]
        keep, why = [], {}
        for v in values:
            for i in single:
                if not self.verdict(i, {degree: v}):
                    why[v] = self.partial[i][0].code
                    break
            else:
                keep.append(v)
        return keep, why


MAX_ITEM_MEMO = 256  # longer foreach lists are judged whole (the step budget is per rule, not per item)


class Judge:
    """One rule's verdict, memoised on the values of the facts it reads.

    A rule is a pure function of the facts it reads, so two layouts that agree on them get
    the same verdict. A ``foreach`` rule whose per-item test reads only the item and static
    facts is memoised per item (``ML202`` sees the same dozen axis shapes over thousands of
    layouts); any other rule on the frozen values of its non-static facts.
    """

    __slots__ = ("rule", "dynamic", "per_item", "memo", "item_memo", "stable")

    def __init__(self, rule, stable: set | None = None):
        self.rule = rule
        self.stable = stable if stable is not None else set()  # ids of items kept alive by their producer
        self.dynamic = tuple(sorted(reads(rule) - STATIC))
        per_item_reads = _reads_of(rule, (rule.check, rule.when))
        self.per_item = rule.foreach is not None and not (per_item_reads - STATIC)
        self.memo: dict = {}
        self.item_memo: dict = {}

    def fails(self, facts: dict) -> bool:
        if self.per_item:
            return self._per_item(facts)
        stable = self.stable
        # a value its producer keeps alive is known by identity; any other by repr (plain values: exact, C-fast)
        key = tuple([id(v) if id(v) in stable else repr(v) for v in map(facts.get, self.dynamic)])
        hit = self.memo.get(key)
        if hit is None:
            hit = self.memo[key] = fails(self.rule, facts)
        return hit

    def _per_item(self, facts: dict) -> bool:
        rule = self.rule
        shared = expr.Env(facts, budget=0)
        env = expr.Env({"params": rule.params}, rule.lets, parent=shared)
        try:
            items = rule.foreach.evaluate(env)
        except expr.NeedFact:
            return False
        except expr.EvalError:
            return True
        if not isinstance(items, list):
            return True
        if len(items) > MAX_ITEM_MEMO:
            return fails(rule, facts)
        stable = self.stable
        for item in items:
            key = id(item) if id(item) in stable else repr(item)
            hit = self.item_memo.get(key)
            if hit is None:
                hit = self.item_memo[key] = self._item_fails(env, item)
            if hit:
                return True
        return False

    def _item_fails(self, env, item) -> bool:
        rule = self.rule
        scope = env.child({"item": item})
        try:
            if rule.when is not None and not _truth(rule.when.evaluate(scope)):
                return False
            return not _truth(rule.check.evaluate(scope))
        except expr.NeedFact:
            return False
        except expr.EvalError:
            return True


def _reads_of(rule, exprs) -> frozenset:
    """Root names the given expressions read, through the lets they use."""
    todo = [e for e in exprs if e is not None]
    seen: set = set()
    names: set = set()
    while todo:
        for name in todo.pop().free_names():
            if name in rule.lets:
                if name not in seen:
                    seen.add(name)
                    todo.append(rule.lets[name])
            else:
                names.add(name)
    return frozenset(names)
