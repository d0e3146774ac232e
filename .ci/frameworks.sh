#!/usr/bin/env bash
# Sets up what tests/test_real_torchtitan.py, test_real_accelerate.py and test_real_megatron.py run:
# torchtitan 0.1.0, 0.2.2 and 0.3.0, accelerate 1.15.0 and megatron-core 0.16.1 from the package index, each
# unpacked (--no-deps) into its own folder under .frameworks/ (gitignored; torchtitan's the same package
# name, so one folder each, loaded by separate processes), plus spmd_types==0.2.3, tyro and numpy in the
# environment. torchtitan main comes from ../shared/frameworks/ (no setup).
#
# Idempotent and quick: what is already there is not fetched again. Never installs or upgrades
# torch: torchtitan is installed --no-deps, spmd_types --no-deps, and every pip run is constrained
# to the torch already installed. Without network (or torch) it says why and exits 0: the tests
# then skip, quoting the reason left in .frameworks/<piece>.failed.
set -uo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python}
DEST=.frameworks
TT_VERSIONS=(0.1.0 0.2.2 0.3.0)
mkdir -p "$DEST"

say() { echo "frameworks.sh: $*"; }
failed() {  # piece, reason: leave the reason where the tests will quote it, and carry on
  printf '%s\n' "$2" > "$DEST/$1.failed"
  say "$1 not set up: $2 (tests that need it will skip)"
}
pip_quiet() {  # a missing network must cost seconds, not pip's default 180 s x 5 retries
  "$PY" -m pip --disable-pip-version-check --retries 1 --timeout 20 "$@" 2>&1 | tail -n 5
}
why_pip() {  # pip's own words: its ERROR lines, else its last line; on one line
  local errors
  errors=$(grep '^ERROR' <<< "$1" | tr '\n' ' ')
  [ -n "$errors" ] || errors=$(tail -n 1 <<< "$1")
  echo "${errors:0:300}"
}

# torch's version from its metadata (importing torch takes seconds; this must stay quick)
torch_version() {
  "$PY" -c 'from importlib.metadata import version; print(version("torch").split("+")[0])' 2>/dev/null
}
TORCH=$(torch_version)
if [ -z "$TORCH" ]; then
  say "torch is not installed for $PY: nothing to compare with (the tests skip)"
  exit 0
fi
CONSTRAINTS="$DEST/constraints.txt"
echo "torch==$TORCH" > "$CONSTRAINTS"  # anything that asks for another torch fails instead of pulling it

# A release unpacked with pip install --no-deps --target into its own folder (never on the path of the
# environment), through a temporary folder moved into place only when complete, so an interrupted run
# never leaves a half folder that looks done. name, version, a file inside the package that proves it whole.
install_isolated() {  # name, version, marker[, the dist-info's name when it is not the package's: megatron_core]
  local name=$1 v=$2 marker=$3 dir="$DEST/$1-$2" dist=${4:-$1} tmp out
  if [ -f "$dir/$marker" ] && [ -d "$dir/$dist-$v.dist-info" ]; then
    return
  fi
  tmp=$(mktemp -d "$DEST/.tmp-$name-$v.XXXXXX")
  out=$(pip_quiet install --quiet --no-deps --target "$tmp" -c "$CONSTRAINTS" "$name==$v")
  if [ -f "$tmp/$marker" ] && [ -d "$tmp/$dist-$v.dist-info" ]; then
    rm -rf "$dir" && mv "$tmp" "$dir" && rm -f "$DEST/$name-$v.failed"
    say "$name $v -> $dir"
  else
    rm -rf "$tmp"
    failed "$name-$v" "pip install --no-deps --target $dir $name==$v failed: $(why_pip "$out") (no network?)"
  fi
}

# torchtitan releases, each in its own folder (the same package name, loaded by separate processes)
for v in "${TT_VERSIONS[@]}"; do
  install_isolated torchtitan "$v" torchtitan/distributed/parallel_dims.py
done

# torchao 0.18.0 (NVFP4's NVFP4Linear, which torchtitan's NVFP4Linear subclasses; tests/test_schema_generated.py
# runs torchtitan's own NVFP4 converter on CPU with it), in its own folder as the torchtitan releases above.
install_isolated torchao 0.18.0 torchao/__init__.py

# Accelerate 1.15.0 (tests/test_real_accelerate.py builds its ParallelismConfig and mesh on the fake process
# group), in its own folder as the releases above, with the pure-Python packages its import needs that are
# not in the environment (huggingface_hub, safetensors, psutil and theirs) beside it, never torch: accelerate
# itself is installed --no-deps and the rest is constrained to the installed torch.
install_isolated accelerate 1.15.0 accelerate/parallelism_config.py
ACC="$DEST/accelerate-1.15.0"
if [ -d "$ACC/accelerate" ] && [ ! -f "$ACC/.deps-done" ]; then
  out=$(pip_quiet install --quiet --target "$ACC" -c "$CONSTRAINTS" huggingface_hub safetensors psutil pyyaml) || true
  if PYTHONPATH="$ACC" "$PY" -c 'import accelerate.parallelism_config' 2>/dev/null; then
    touch "$ACC/.deps-done" && rm -f "$DEST/accelerate-deps.failed"
  else
    failed "accelerate-deps" "accelerate 1.15.0 does not import: $(why_pip "$out") (no network?)"
  fi
fi

# megatron-core 0.16.1 (tests/test_real_megatron.py: initialize_model_parallel on the fake process group, its
# RankGenerators, TransformerConfig and get_num_layers_to_build), in its own folder like the releases above.
# Its imports on that path are torch, numpy and packaging. validate_args is in Megatron-LM's megatron/training,
# which the wheel does not ship: see that test's MEGATRON_LM_ROOT.
install_isolated megatron-core 0.16.1 megatron/core/parallel_state.py megatron_core

# spmd_types (ParallelDims of 0.3.0 and main imports it), tyro (torchtitan.config imports it),
# numpy: into the environment, only when missing. None of them depends on torch (spmd_types has
# no dependencies; tyro needs torch only for its "dev-nn" extra); still, spmd_types is installed
# --no-deps and the whole run is constrained to the installed torch.
missing=$("$PY" - <<'EOF'
from importlib.metadata import PackageNotFoundError, version
want = {"spmd_types": "0.2.3", "tyro": None, "numpy": None}
out = []
for name, pinned in want.items():
    try:
        have = version(name)
    except PackageNotFoundError:
        have = None
    if have is None or (pinned and have != pinned):
        out.append(name)
print(" ".join(out))
EOF
)
if [ -n "$missing" ]; then
  ok=1
  if [[ " $missing " == *" spmd_types "* ]]; then
    out=$(pip_quiet install --quiet --no-deps -c "$CONSTRAINTS" "spmd_types==0.2.3") || true
    "$PY" -c 'from importlib.metadata import version; assert version("spmd_types") == "0.2.3"' 2>/dev/null \
      || { ok=0; failed "spmd_types" \
             "pip install --no-deps spmd_types==0.2.3 failed: $(why_pip "$out") (no network?)"; }
  fi
  rest=()
  for p in tyro numpy; do [[ " $missing " == *" $p "* ]] && rest+=("$p"); done
  if [ ${#rest[@]} -gt 0 ]; then
    out=$(pip_quiet install --quiet -c "$CONSTRAINTS" "${rest[@]}") || true
    "$PY" -c 'import tyro, numpy' 2>/dev/null \
      || { ok=0; failed "tyro-numpy" "pip install ${rest[*]} failed: $(why_pip "$out") (no network?)"; }
  fi
  [ "$ok" = 1 ] && rm -f "$DEST/spmd_types.failed" "$DEST/tyro-numpy.failed" && say "installed: $missing"
fi

AFTER=$(torch_version)
if [ "$AFTER" != "$TORCH" ]; then  # cannot happen with the constraints above; never let it pass silently
  say "torch changed from $TORCH to ${AFTER:-nothing}: this script must never do that"
  exit 1
fi
exit 0
