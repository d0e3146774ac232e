"""The settings a run takes from the command line (``CliSettings``), importable without the pipeline.

A plain tuple type built by ``collections.namedtuple`` (already loaded by every run) rather than
``typing.NamedTuple``: a flagged ``meshlint check`` answered from the results cache builds one
without importing ``typing``, the settings resolution or the checker (meshlint/cli/check_args.py).
"""

from collections import namedtuple

_FIELDS = (  # (name, default)
    ("dialect", None),
    ("world_size", None),
    ("nodes", None),
    ("gpus_per_node", None),
    ("placement", None),
    ("rule_dirs", ()),
    ("gpu_memory_gib", None),
    ("select", None),             # --select: None keeps the configured select
    ("extend_select", ()),
    ("ignore", ()),
    ("fail_on", None),
    ("report_unused", False),
    ("config", None),             # --config: use this file instead of searching
    ("isolated", False),          # --isolated: ignore every configuration file
    ("torchtitan_version", None),  # --torchtitan-version
    ("torchtitan_root", None),     # --torchtitan-root
)

CliSettings = namedtuple("CliSettings", [name for name, _ in _FIELDS], defaults=[d for _, d in _FIELDS])
