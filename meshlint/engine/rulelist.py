"""A run's rules as a set that builds each rule when the run first needs it (``RuleSet``).

Below the loaders (engine/ruleset.py, engine/prebuilt.py), which both hand their rules out as one: it imports
nothing of theirs.
"""

from __future__ import annotations


class RuleStore:
    """Rules in their order, each built on first need, shared by a RuleSet and its selections."""

    __slots__ = ("dialects", "build", "made")

    def __init__(self, dialects: list, build, made: list | None = None):
        self.dialects = dialects  # each rule's dialects (None: every dialect), known before the rule is built
        self.build = build        # index -> Rule
        self.made = made if made is not None else [None] * len(dialects)

    def rule(self, index: int):
        rule = self.made[index]
        if rule is None:
            rule = self.made[index] = self.build(index)
        return rule


class RuleSet:
    """The rules of a run, in their order, each built when the run first needs it.

    A check asks for the rules of its config's dialect (``for_dialect``): a run over KempnerForge configs builds
    the ~60 built-in rules that can apply to them, not all ~190 (~3.7 M instructions of a first run).
    Iterating, ``len`` and indexing give every rule (all built then): whatever walks the whole list sees a list.
    ``select`` is the same rules filtered (a project's select and ignore), as lazily.
    """

    __slots__ = ("_store", "_keep", "_all", "_by_dialect")

    def __init__(self, store: RuleStore, keep=None):
        self._store = store
        self._keep = keep          # a rule -> whether it is in this set (None: every rule)
        self._all: list | None = None
        self._by_dialect: dict = {}

    @classmethod
    def of(cls, rules: list) -> "RuleSet":
        """Rules already built."""
        return cls(RuleStore([r.dialects for r in rules], rules.__getitem__, list(rules)))

    def for_dialect(self, dialect: str) -> list:
        """The rules that apply to ``dialect`` (``Rule.applies_to``), in order; the same list each time."""
        hit = self._by_dialect.get(dialect)
        if hit is None:
            store, keep = self._store, self._keep
            hit = []
            for index, dialects in enumerate(store.dialects):
                if dialects is None or dialect in dialects:
                    rule = store.rule(index)
                    if keep is None or keep(rule):
                        hit.append(rule)
            self._by_dialect[dialect] = hit
        return hit

    def all(self) -> list:
        if self._all is None:
            store, keep = self._store, self._keep
            rules = [store.rule(index) for index in range(len(store.dialects))]
            self._all = rules if keep is None else [r for r in rules if keep(r)]
        return self._all

    def select(self, keep) -> "RuleSet":
        """These rules where ``keep(rule)`` holds."""
        if self._keep is not None:
            first = self._keep
            return RuleSet(self._store, lambda rule: first(rule) and keep(rule))
        return RuleSet(self._store, keep)

    def __iter__(self):
        return iter(self.all())

    def __len__(self) -> int:
        return len(self.all())

    def __getitem__(self, index):
        return self.all()[index]

    def __eq__(self, other) -> bool:
        return self.all() == (other.all() if isinstance(other, RuleSet) else other)

    __hash__ = None

    def __repr__(self) -> str:
        return f"RuleSet({self.all()!r})"


def rules_for(rules, dialect: str) -> list:
    """The rules of ``rules`` (a RuleSet, or a list of rules) that can apply to ``dialect``; a list is returned as
    it is (its users filter by dialect themselves)."""
    return rules.for_dialect(dialect) if isinstance(rules, RuleSet) else rules
