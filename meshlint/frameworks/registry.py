"""Every framework and framework version meshlint models, registered in one place: the rest of meshlint reads this.

A framework is a package under meshlint/frameworks/ whose dialect module (NAME, SECTION, read, resolve, ...)
is a row of ``FRAMEWORKS``; a version is a module beside its siblings and a row of ``VERSIONS``
(docs/architecture.md). This module imports nothing, so any layer may read it; the modules it names are
imported by meshlint/frameworks/dialects.py (the dialects) and versions.module() (a version, on first use).
"""

from __future__ import annotations

from meshlint.record import Record



class Framework(Record):
    name: str               # the dialect name: --dialect, a rule's ``dialects = [...]``, the JSON report
    module: str | None      # its dialect module, which detects its files by their section (None: read from
                            # launch lines only, by its version module: Megatron-LM)
    cli_choice: bool        # offered by ``--dialect`` (Accelerate files are YAML, told apart by their keys)
    section: str | None = None  # the table that tells its TOML files apart (its module's SECTION; None: never
                                # detected in a TOML file), so detection imports no dialect module


# in detection order
FRAMEWORKS = (
    Framework("kempnerforge", "meshlint.frameworks.kempnerforge.v5666d0d", True, "distributed"),
    Framework("torchtitan", "meshlint.frameworks.torchtitan.v0_2", True, "parallelism"),
    Framework("native", "meshlint.frameworks.native.dialect", True, "mesh"),
    Framework("accelerate", "meshlint.frameworks.accelerate", False),
    Framework("megatron", None, False),
)


class Entry(Record):
    framework: str
    version: str            # the id: "0.2.x", "0.3.0", "main@b5bcd76c6"
    module: str             # the dialect module that models it
    description: str
    commit: str             # what it models: a commit, or a release
    date: str
    aliases: tuple = ()     # other spellings users type (--torchtitan-version b5bcd76c6)


VERSIONS = (
    Entry("torchtitan", "0.1.0", "meshlint.frameworks.torchtitan.v0_1_0",
          "torchtitan v0.1.0 (tag v0.1.0 and the 0.1.0 wheel): [parallelism] TOML configs read by "
          "torchtitan/config_manager.py, which ignores unknown keys; no expert parallelism; one world mesh "
          "(pp, dp_replicate, dp_shard, cp, tp) of the degrees > 1 with flattened dp, dp_shard_cp, dp_cp",
          "f7084fc78", "2025-06-17", ("v0.1.0", "0.1", "v0.1")),
    Entry("torchtitan", "0.2.x", "meshlint.frameworks.torchtitan.v0_2",
          "torchtitan v0.2.1-v0.2.2 and the TOML era up to 9810191bb^: [parallelism] TOML configs, expert tensor "
          "parallelism (etp), ParallelDims after the unflatten rewrite 183a0d2e7",
          "9810191bb^", "2026-02-23", ("0.2", "0.2.1", "0.2.2", "v0.2", "v0.2.x", "v0.2.1", "v0.2.2", "toml")),
    Entry("torchtitan", "0.3.0", "meshlint.frameworks.torchtitan.v0_3_0",
          "torchtitan 0.3.0 from the package index: Python registry configs with local_batch_size/"
          "global_batch_size/seq_len, spmd_backend spmd_types | full_dtensor | partial_dtensor, no ETP, "
          "no ep check in ParallelDims",
          "0.3.0", "2026-09-03", ("v0.3.0", "0.3")),
    Entry("torchtitan", "main@b5bcd76c6", "meshlint.frameworks.torchtitan.main_b5bcd76c6",
          "torchtitan main at b5bcd76c6: Python registry configs with token budgets "
          "(num_tokens_per_microbatch_per_dp_rank, num_tokens_per_train_step, max_context_length, "
          "num_pp_microbatches), spmd_backend spmd_types | partial_dtensor, ep must divide dp_shard·cp·tp",
          "b5bcd76c6", "2026-08-21", ("main", "b5bcd76c6", "b5bcd76")),
    Entry("accelerate", "1.15.0", "meshlint.frameworks.accelerate.v1_15",
          "Hugging Face Accelerate 1.15.0 from the package index: accelerate config YAML (parallelism_config), "
          "accelerate launch flags and PARALLELISM_CONFIG_* variables, ParallelismConfig and its DeviceMesh",
          "1.15.0", "2026-09-09", ("v1.15.0", "1.15")),
    Entry("kempnerforge", "5666d0d", "meshlint.frameworks.kempnerforge.v5666d0d",
          "KempnerForge at 5666d0d: [distributed] TOML configs", "5666d0d", "2026-06-30", ()),
    Entry("megatron", "0.16.1", "meshlint.frameworks.megatron.core_0_16",
          "Megatron-Core 0.16.1 (Megatron-LM tag core_v0.16.1): launch lines of pretrain_gpt.py & co, "
          "RankGenerator order tp-cp-ep-dp-pp (tp-cp-ep-pp-dp with --use-tp-pp-dp-mapping), a separate expert grid",
          "55ac7082517c3878ae653c07c09c534b8aed49f6", "2026-03-16", ("core_v0.16.1", "v0.16.1", "0.16", "core_r0.16.1")),
)


class InputForm(Record):
    """Another framework's configs read as one version's (resolved by that version's module)."""
    framework: str
    name: str               # spec.framework["input"]
    version: str            # the VERSIONS row whose rules and resolution apply
    reader: str             # the file that reads it (a path: the layers import it, not the registry)
    description: str
    commit: str             # what it models
    date: str


INPUT_FORMS = (
    InputForm("megatron", "bridge", "0.16.1", "meshlint/inputs/bridge_recipe.py",
              "Megatron-Bridge v0.3.1 recipe functions (ConfigContainer), read statically; its 3rdparty/Megatron-LM "
              "is core_v0.16.1, so they resolve as Megatron-Core 0.16.1", "9c9dd848966322fc3ed7706747ec13219ef49dda",
              "2026-03-20"),
)
# frameworks whose spec is read with its recorded version's module (versions.version_module); each other dialect has
# one module, its VERSIONS row's
VERSIONED = ("torchtitan", "megatron")
# what a TOML torchtitan config is read as by default (registries choose with identify/from_keys)
TOML_VERSION = {"torchtitan": "0.2.x", "kempnerforge": "5666d0d"}
# the versions whose configs are TOML files: --torchtitan-version, the project setting or the code of the
# torchtitan checkout (versions.identify) choose among them for a TOML config
TOML_ERA = {"torchtitan": ("0.1.0", "0.2.x")}
