"""The Megatron-LM / Megatron-Core dialect: launch lines of Megatron-LM's entry scripts, one module per release.

- ``core_0_16``: the version module (Megatron-Core 0.16.1, Megatron-LM tag core_v0.16.1): read, resolve,
  the layer split, the facts rules read;
- ``ranks``: RankGenerator's groups as arithmetic; ``flags``: the argparse grammar, over the generated
  ``flags_core_0_16.json`` (``generate``); ``launch``: which commands start an entry script, and the
  config source one makes (reached from meshlint/inputs/launch.py's FRAMEWORK_LAUNCHES hook).

Registered in meshlint/frameworks/versions.py (VERSIONS) and meshlint/engine/rules.py (DIALECT_NAMES).
"""

NAME = "megatron"
