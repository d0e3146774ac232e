"""The generated schemas' conditions and values as Python functions, one module per schema
(written by ``python -m meshlint.generate.schema_compiled``; see meshlint/generate/schema_compiled.py)."""
