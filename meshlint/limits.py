"""Every input limit of meshlint's static path, in one place (the README's "Limits" table is this).

A config, a rule pack or a command line that goes past one of these is refused
with a message naming the limit, the value and where it is (``ML007`` for a
config file, exit 2), or, where the value is a number the framework would
itself reject, reported as a finding. The limits are far above anything a real
training config needs; they exist so that every input costs bounded time and
memory: each is checked before the work it protects, never after.
"""

from __future__ import annotations

# ----------------------------------------------------------------------------- config files
MAX_FILE_BYTES = 1 << 20          # 1 MiB; real training configs are a few KiB (at most MAX_FILE_BYTES+1 is read)
MAX_LINE_CHARS = 32_768           # characters on one line
MAX_NESTING = 64                  # arrays / inline tables / dotted-key tables inside each other
MAX_INT_DIGITS = 1_000            # digits of one integer literal (TOML itself promises only 64-bit integers;
                                  # Python refuses to print integers over 4,300 digits)
MAX_KEYS = 10_000                 # keys and array items in one file (each unknown key costs a did-you-mean search)
MAX_TOML_INT = (1 << 63) - 1      # TOML's integer range: larger model sizes or batch sizes are invalid values

# ----------------------------------------------------------------------------- topology and meshes
MAX_WORLD = 1 << 24               # 16,777,216 ranks: world size, nodes, GPUs per node, any one degree
MAX_MESH_DIMS = 64                # dims of one (native) mesh
MAX_PIPELINE_STAGES = 4_096       # per-stage layer lists and memory peaks are computed for pipelines up to this many stages
MAX_EXAMPLE_MEMBERS = 16          # members shown of an example group (placement), whatever the group size

# ----------------------------------------------------------------------------- rule packs (meshlint/engine/expr/)
MAX_EXPR_CHARS = 4_000            # one expression
MAX_TEMPLATE_CHARS = 16_000       # one message, help or key template
MAX_EXPR_DEPTH = 50               # nesting of one expression's syntax (brackets, operators, postfix chains)
MAX_LET_DEPTH = 8                 # 'let' bindings that read other 'let' bindings, chained
MAX_RULE_STEPS = 50_000           # evaluation steps of one rule on one config (all its items, lets and messages);
                                  # the built-in rules use at most ~1,300, and 50,000 run in well under 100 ms
MAX_RULE_MEMORY = 1_000_000       # characters of strings plus items of lists one rule may build on one config
                                  # (the built-in rules: at most ~1,200)
MAX_EXPR_INT_BITS = 256           # integers an expression computes
MAX_EXPR_STR = 100_000            # characters of one string an expression builds
MAX_EXPR_LIST = 100_000           # items of one list an expression builds
MAX_VALUE_DEPTH = 32              # nesting of values an expression renders or compares (rule params)
MAX_ROUND_DIGITS = 64             # round(x, n) and percent(x, n): |n| at most this


def describe() -> list[tuple[str, str, str]]:
    """(name, value, what) for every limit, for the README's table."""
    rows = [
        ("file size", f"{MAX_FILE_BYTES:,} bytes", "a config file (ML007; a larger file is not read); only regular "
                                                   "files are read: FIFOs, devices and sockets are refused (ML001)"),
        ("line length", f"{MAX_LINE_CHARS:,} characters", "one line of a config (ML007)"),
        ("nesting depth", f"{MAX_NESTING}", "arrays, inline tables and dotted keys inside each other (ML007)"),
        ("integer digits", f"{MAX_INT_DIGITS:,}", "one number literal in a config (ML007)"),
        ("keys", f"{MAX_KEYS:,}", "keys and array items in one config (ML007)"),
        ("integer values", f"{MAX_TOML_INT:,}", "TOML's 64-bit range: a larger KempnerForge model or training "
                                                "size is an invalid value (ML101)"),
        ("world size", f"{MAX_WORLD:,}", "ranks, nodes, GPUs per node, any one degree"),
        ("mesh dims", f"{MAX_MESH_DIMS}", "dims of one native mesh"),
        ("pipeline stages", f"{MAX_PIPELINE_STAGES:,}", "stages whose layer counts and memory peaks are listed"),
        ("expression length", f"{MAX_EXPR_CHARS:,} characters", "one rule expression"),
        ("template length", f"{MAX_TEMPLATE_CHARS:,} characters", "one message, help or key template"),
        ("expression depth", f"{MAX_EXPR_DEPTH}", "nesting of one rule expression"),
        ("let chains", f"{MAX_LET_DEPTH}", "let bindings reading let bindings"),
        ("rule steps", f"{MAX_RULE_STEPS:,}", "evaluation steps of one rule on one config"),
        ("rule memory", f"{MAX_RULE_MEMORY:,}", "string characters plus list items one rule builds on one config"),
    ]
    return rows
