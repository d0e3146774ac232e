"""The memory model (meshlint.mesh.memory) held to fake-tensor measurements of torchtitan v0.2's own training step.

bench/memory_fake_torchtitan.json holds one rank's measured peak, by category and phase, for a sweep of layouts
(flavors, FSDP, TP with and without loss parallel, every activation-checkpointing mode, batch and sequence), made
by tests/memory_fake_worker.py (meshlint.smoke.memory_torchtitan) through ``bench/memory_vs_fake_tt.py --measure``. The first tests compare the
formula with those numbers without torch; the last runs the worker on the debug model for one layout and checks
that it still measures what the file says (skipped where torch or the v0.2 tree is absent)."""

from __future__ import annotations

import importlib
import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAVED = ROOT / "bench" / "memory_fake_torchtitan.json"


def _bench():
    """bench/memory_vs_fake_tt.py, imported once (the saved numbers' layouts, the worker's runner, compare)."""
    if str(ROOT / "bench") not in sys.path:
        sys.path.append(str(ROOT / "bench"))
    return importlib.import_module("memory_vs_fake_tt")


@pytest.fixture(scope="module")
def saved() -> dict:
    return json.loads(SAVED.read_text())


@pytest.fixture(scope="module")
def rows(saved) -> list:
    return _bench().compare(saved)


def test_the_measurements_say_how_they_were_made(saved):
    assert saved["torch"] and saved["torchtitan_commit"] and saved["command"].startswith("PYTHONPATH=.")
    bench = _bench()
    assert set(saved["runs"]) == {layout[0] for layout in bench.LAYOUTS}  # every layout measured, no stale one
    for run_id, run in saved["runs"].items():
        layout = next(lay for lay in bench.LAYOUTS if lay[0] == run_id)
        assert run["config"] == bench.toml_of(layout), f"{run_id}: re-measure (--measure --only {run_id})"
        assert "peak_bytes" in run["result"], f"{run_id}: {run['result'].get('error')}"


def test_every_layout_within_10_percent_of_the_fake_run(rows):
    worst = max(rows, key=lambda r: abs(r["error_pct"]))
    assert abs(worst["error_pct"]) <= 10, worst
    flavors = {r["run"].split("-")[0] for r in rows}
    assert {"debug", "8B"} <= flavors


def test_model_states_are_exact(rows):
    # parameters, gradients and AdamW moments are arithmetic on the parameter count: within 1 %
    for r in rows:
        measured, predicted = r["groups"]["states"]
        assert predicted == pytest.approx(measured, rel=0.01, abs=0.002), r["run"]


def test_the_peak_falls_in_the_measured_phase(rows):
    # where two phases are within 3 % of each other either may hold the peak
    for r in rows:
        measured = r["phases_measured"]
        close = {p for p, v in measured.items() if v >= 0.97 * measured[r["measured_phase"]]}
        phase = {"layer_backward": "layers_backward", "first_layer_backward": "layers_backward"}.get(
            r["predicted_phase"], r["predicted_phase"])
        assert phase in close, (r["run"], r["predicted_phase"], measured)


def _why_absent() -> str | None:
    bench = _bench()
    if importlib.util.find_spec("torch") is None:
        return "torch is not installed"
    if not bench.TREE.is_dir():
        return f"{bench.TREE} is not here"
    return None


@pytest.mark.skipif(_why_absent() is not None, reason=str(_why_absent()))
def test_the_worker_still_measures_the_saved_numbers(saved, tmp_path):
    """One layout on torchtitan's debug model (TP with loss parallel, op-level SAC, FSDP: every correction the
    worker makes): the same peak, phase and categories as the saved file, to the byte on the same torch."""
    bench = _bench()
    layout = next(lay for lay in bench.LAYOUTS if lay[0] == "debug-tp2-op")
    got = bench.run_worker([layout], tmp_path)[layout[0]]
    want = saved["runs"][layout[0]]["result"]
    assert "peak_bytes" in got, got
    import torch

    tolerance = 0 if torch.__version__ == saved["torch"] else 0.02
    assert got["peak_phase"] == want["peak_phase"]
    assert got["peak_bytes"] == pytest.approx(want["peak_bytes"], rel=tolerance)
    for category, value in want["by_category"].items():
        assert got["by_category"][category] == pytest.approx(value, rel=tolerance, abs=2 ** 20 * tolerance)

