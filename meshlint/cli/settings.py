"""Effective settings per checked file: command-line flags over the project configuration.

Precedence, highest first: the command line; then, for the world size and
node shape, the file's own directives, the per-file configuration, what the
file declares or its name says, its comments, and last the project's cluster
profile (see topology.py); for rule selection, ``--select`` replaces the
configured ``select``, while ``--extend-select`` and ``--ignore`` add to theirs.
"""

from __future__ import annotations

import os

from meshlint.cli import project_config as project
from meshlint.engine.check import Options
from meshlint.cli.cli_settings import CliSettings  # noqa: F401 - re-exported: its home before cli_settings.py
from meshlint.errors import MeshlintError
from meshlint.mesh.topology import CliTopology, Hint


class Planner:
    def __init__(self, cli: CliSettings):
        self.cli = cli
        self.finder = None if cli.isolated else project.Finder(cli.config)
        self._rules: dict[tuple, list] = {}
        self._models: dict[tuple, dict] = {}
        self._checked_selectors: set = set()
        self._selected: dict[tuple, list] = {}
        self._plain: dict = {}  # id(project config) -> (it, the Options of every file under it): see options_for

    def config_for(self, path: str) -> project.ProjectConfig:
        return self.finder.for_path(path) if self.finder else project.NO_CONFIG

    def options_for(self, path: str) -> Options:
        path = path.split("::", 1)[0]  # a registry config (file.py::function) is governed by its file
        cli, cfg = self.cli, self.config_for(path)
        # no configuration file and no rule directory: nothing below depends on the file, and Options is immutable
        plain = not cfg.path and not cfg.rules and not cli.rule_dirs
        if plain:
            hit = self._plain.get(id(cfg))
            if hit is not None and hit[0] is cfg:
                return hit[1]
        options = self._options(path, cli, cfg)
        if plain:
            self._plain[id(cfg)] = (cfg, options)
        return options

    def _options(self, path: str, cli: CliSettings, cfg) -> Options:
        per_file = cfg.for_file(path) if cfg.path else {}
        rule_dirs = cfg.rules + tuple(cli.rule_dirs)
        all_rules = self._load(rule_dirs)
        select = cli.select if cli.select is not None else cfg.select
        ignore = cfg.ignore + tuple(per_file.get("ignore", ())) + tuple(cli.ignore)
        extend = cfg.extend_select + tuple(cli.extend_select)
        self._check_selectors(all_rules, (*select, *extend, *ignore), cfg)
        key = (rule_dirs, select, extend, ignore)
        rules = self._selected.get(key)
        if rules is None:  # once per distinct selection, not once per file (each rule judged when it is built)
            if select == ("ALL",) and not ignore:
                rules = all_rules  # the default: every rule
            else:
                rules = all_rules.select(lambda r: project.selected(r, select, extend, ignore))
            self._selected[key] = rules
        placement = cli.placement or per_file.get("placement") or cfg.topology.get("placement") or "block"
        topology = CliTopology(cli.world_size, cli.nodes, cli.gpus_per_node, placement)
        return Options(
            rules=rules,
            dialect=cli.dialect or per_file.get("dialect") or cfg.topology.get("dialect"),
            topology=topology,
            file_hint=_hint(per_file, f"{cfg.path} per-file settings"),
            profile_hint=_hint(cfg.topology, f"{cfg.path} cluster profile"),
            severity={**cfg.severity, **per_file.get("severity", {})},
            fail_on=cli.fail_on or cfg.fail_on or "error",
            report_unused=cli.report_unused or cfg.report_unused_suppressions,
            models=self._model_table(rule_dirs, cfg),
            **_gpu_memory(cli, cfg),
            torchtitan_version=cli.torchtitan_version or cfg.torchtitan_version,
            torchtitan_root=cli.torchtitan_root or cfg.torchtitan_root,
        )

    def _model_table(self, rule_dirs: tuple, cfg) -> dict | None:
        """None (the built-in table, loaded only if a torchtitan file needs it) unless extended."""
        if not cfg.models and not any(os.path.isfile(os.path.join(d, "models.toml")) for d in rule_dirs):
            return None
        key = (rule_dirs, cfg.path)
        if key not in self._models:
            from meshlint.frameworks.models import table_for
            from meshlint.inputs.source import load_toml_file

            self._models[key] = table_for(rule_dirs, cfg.models, read_toml=load_toml_file)
        return self._models[key]

    def all_rules(self) -> list:
        """Every rule loaded so far (for SARIF's rule table)."""
        return [r for rules in self._rules.values() for r in rules]

    def _load(self, dirs: tuple) -> list:
        if dirs not in self._rules:
            from meshlint.engine.ruleset import load_rules

            self._rules[dirs] = load_rules(dirs)
        return self._rules[dirs]

    def _check_selectors(self, rules: list, selectors: tuple, cfg) -> None:
        key = (id(rules), selectors)
        if key in self._checked_selectors:
            return
        self._checked_selectors.add(key)
        bad = project.unknown_selectors(rules, selectors)
        if bad:
            where = f" (in {cfg.path} or on the command line)" if cfg.path else ""
            raise MeshlintError(f"unknown rule code or name {bad[0]!r}{where}; see `meshlint rules`")


def _gpu_memory(cli: CliSettings, cfg) -> dict:
    """The GPU memory the whole-peak estimate is compared with, and where it came from: --gpu-memory-gib, the
    project's gpu_memory_gib, its cluster profile (gpu_memory_gib or the node preset's), else 80 GiB."""
    if cli.gpu_memory_gib:
        return {"gpu_memory_gib": cli.gpu_memory_gib, "gpu_memory_source": "--gpu-memory-gib"}
    if cfg.gpu_memory_gib:
        return {"gpu_memory_gib": cfg.gpu_memory_gib, "gpu_memory_source": f"{cfg.path}: gpu_memory_gib"}
    cluster = cfg.cluster or {}
    if cluster.get("gpu_memory_gib"):
        return {"gpu_memory_gib": float(cluster["gpu_memory_gib"]),
                "gpu_memory_source": f"{cfg.path}: [cluster] gpu_memory_gib"}
    if cluster.get("node"):
        from meshlint.estimate.cost import NODES

        preset = NODES.get(cluster["node"])
        if preset:
            return {"gpu_memory_gib": round(preset["gpu_memory_gib"], 2),
                    "gpu_memory_source": f"{cfg.path}: [cluster] node = {cluster['node']}"}
    return {"gpu_memory_gib": 80.0, "gpu_memory_source": "the default; set --gpu-memory-gib"}


def _hint(settings: dict, source: str) -> Hint | None:
    world, nodes, gpn = settings.get("world_size"), settings.get("nodes"), settings.get("gpus_per_node")
    if world is None and nodes is not None and gpn is not None:
        world = nodes * gpn
    if world is None and gpn is None:
        return None
    return Hint(source, world, gpn, nodes)
