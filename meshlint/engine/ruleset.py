"""The rules of a run: the built-in rules (parsed ahead of time, if still current), then each rule pack, through
the rule cache; codes and names unique across them.

Above both caches (engine/prebuilt.py, engine/rule_cache.py), which depend on what they cache (engine/rules.py,
the parsing of one rule file), never the other way round.
"""

from __future__ import annotations

import os

from meshlint.engine.rules import Rule, _load_dir, builtin_rules_dir
from meshlint.engine.rulelist import RuleSet
from meshlint.errors import RuleFileError


def load_rules(extra_dirs: tuple = (), include_builtin: bool = True) -> RuleSet:
    dirs: list[tuple[str, str]] = [(builtin_rules_dir(), "builtin")] if include_builtin else []
    for directory in extra_dirs:
        d = os.fspath(directory)
        if not os.path.isdir(d):
            what = "is a file: --rules takes a directory of rule files" if os.path.isfile(d) else "rule directory not found"
            raise RuleFileError(d, None, what)
        dirs.append((d, "user"))
    if include_builtin and not extra_dirs:  # the built-in rules alone: parsed ahead of time, if still current
        from meshlint.engine import prebuilt

        built = prebuilt.load(dirs[0][0])
        if built is not None:
            return built
    from meshlint.engine import rule_cache

    key = rule_cache.key_for(dirs)
    cached = rule_cache.load(key)
    if cached is not None:
        return RuleSet.of(cached)
    rules: list[Rule] = []
    for d, origin in dirs:
        rules += _load_dir(d, origin, validate=origin == "user")
    seen_code: dict[str, Rule] = {}
    seen_name: dict[str, Rule] = {}
    for rule in rules:
        for seen, value, what in ((seen_code, rule.code, "code"), (seen_name, rule.name, "name")):
            if value in seen:
                raise RuleFileError(rule.path, what, f"{what} {value!r} is already used by {seen[value].path}")
            seen[value] = rule
    rule_cache.store(key, rules)
    return RuleSet.of(rules)
