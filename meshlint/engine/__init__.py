"""The rule engine: the expression language, facts, rule loading and caching, one config through the rules."""
