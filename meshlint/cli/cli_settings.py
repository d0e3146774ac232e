"""The settings a run takes from the command line (``CliSettings``), importable without the pipeline.

A ``Record`` (meshlint/record.py) rather than ``typing.NamedTuple`` or ``collections.namedtuple``: a flagged
``meshlint check`` answered from the results cache builds one without importing ``typing``, ``collections``,
the settings resolution or the checker (meshlint/cli/check_args.py).
"""

from __future__ import annotations

from meshlint.record import Record


class CliSettings(Record):
    dialect: str | None = None
    world_size: int | None = None
    nodes: int | None = None
    gpus_per_node: int | None = None
    placement: str | None = None
    rule_dirs: tuple = ()
    gpu_memory_gib: float | None = None
    select: tuple | None = None          # --select: None keeps the configured select
    extend_select: tuple = ()
    ignore: tuple = ()
    fail_on: str | None = None
    report_unused: bool = False
    config: str | None = None            # --config: use this file instead of searching
    isolated: bool = False               # --isolated: ignore every configuration file
    torchtitan_version: str | None = None  # --torchtitan-version
    torchtitan_root: str | None = None     # --torchtitan-root
