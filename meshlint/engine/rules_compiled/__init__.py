"""The built-in rules' expressions compiled to Python (generated from rules/*.toml by
python -m meshlint.generate.rules_prebuilt with meshlint/engine/expr/compiler.py; do not edit).
Installed by meshlint/engine/prebuilt.py only while FINGERPRINT matches the files: a run on a dialect
imports ``common`` and that dialect's module (each carries the FINGERPRINT too)."""

FINGERPRINT = ('0.1.0', 18, 487099121, 207, 461626060)
DIALECTS = ('accelerate', 'kempnerforge', 'megatron', 'native', 'torchtitan')  # the parts besides common, one per dialect
