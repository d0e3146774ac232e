#!/usr/bin/env python3
"""Speed of ``meshlint suggest`` (and the solver's "every valid layout" API), measured as users run it.

    python bench/bench_suggest.py                # Markdown table on stdout
    python bench/bench_suggest.py --json
    python bench/bench_suggest.py --rounds 9

What it measures (whole processes, Python start-up included; interleaved rounds so a
slow spell of a shared machine hits every command alike; best and median of each):
  * ``python -c pass`` and ``meshlint check`` of the same config: the floor;
  * ``meshlint suggest`` of deepseek_v3 671B (the model table's) on 4,096 GPUs, 8 per
    node, torchtitan main@b5bcd76c6: the issue's target is under 2 s on this machine;
    the same on 512 GPUs and on 16,384; a KempnerForge 70B from 32 to 64 GPUs;
  * in-process: the phases of the 4,096-GPU search (setup, enumeration and pruning,
    ranking, verification), ``valid_layouts`` over every survivor, ``degree_choices``.

``--compare`` prints the cost model's ranking of layouts that were measured and
published (KempnerForge's benchmarks/mfu_scaling/mfu_scaling.md and torchtitan's
benchmarks/llama3_h100_202412_torchtitan.md) next to the measured ranking, with
Spearman and Kendall coefficients per table (docs/cost-model.md quotes its output).

A script, not a test: timings on shared machines are noisy (the best is the
reproducible number, the median says how noisy it was).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIG = str(ROOT / "fixtures" / "suggest" / "registry" / "torchtitan" / "models" / "deepseek_v3" / "config_registry.py") \
    + "::deepseek_v3_671b"
KF70 = str(ROOT / "fixtures" / "kempnerforge" / "70b_32gpu_tp4.toml")
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
# until meshlint/cli/commands.py registers the commands, run them through the same main group
RUNNER = ("import sys; from meshlint.cli.commands import main\n"
          "if 'suggest' not in main.commands:\n"
          "    from meshlint.cli.suggest import suggest_cmd, fix_cmd; main.add_command(suggest_cmd); "
          "main.add_command(fix_cmd)\n"
          "main(sys.argv[1:], prog_name='meshlint')")


def meshlint(*args: str) -> list[str]:
    return [sys.executable, "-c", RUNNER, *args]


def run_once(cmd: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=ENV)
    wall = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return wall


def measure(commands: dict, rounds: int) -> dict:
    for cmd in commands.values():
        subprocess.run(cmd, capture_output=True, env=ENV)  # warm-up: .pyc files, page cache, rule cache
    samples: dict = {name: [] for name in commands}
    for _ in range(rounds):
        for name, cmd in commands.items():
            samples[name].append(run_once(cmd))
    return {name: {"best_ms": round(min(v) * 1000, 1), "median_ms": round(statistics.median(v) * 1000, 1)}
            for name, v in samples.items()}


def phases(rounds: int) -> dict:
    """In-process: where the 4,096-GPU search spends its time (best of ``rounds``)."""
    sys.path.insert(0, str(ROOT))
    from meshlint.engine.check import analyse
    from meshlint.cli.settings import CliSettings, Planner
    from meshlint.estimate import cost
    from meshlint.engine.search.valid import Solver, degree_choices
    from meshlint.solve.suggest import search

    planner = Planner(CliSettings(world_size=4096, gpus_per_node=8, torchtitan_version="main@b5bcd76c6"))
    options = planner.options_for(BIG)
    best: dict = {}

    def keep(name, seconds):
        best[name] = min(best.get(name, seconds), seconds)

    for _ in range(rounds):
        t0 = time.perf_counter()
        report = analyse(BIG, options)
        t1 = time.perf_counter()
        solver = Solver(report, options)
        t2 = time.perf_counter()
        cands = list(solver.candidates())
        t3 = time.perf_counter()
        profile = cost.cluster(None, 8)
        model = cost.Model(cost.workload(report, options, profile), profile, 4096, 8, "block", 80)
        for values in cands:
            model.estimate(values)
        t4 = time.perf_counter()
        result = search(report, options, top=5)
        t5 = time.perf_counter()
        keep("analyse", t1 - t0)
        keep("solver setup", t2 - t1)
        keep(f"enumerate + prune ({len(cands):,} survivors)", t3 - t2)
        keep(f"cost model on every survivor", t4 - t3)
        keep(f"search top 5 (verified {result.stats['verified']})", t5 - t4)
    solver = Solver(analyse(BIG, options), options)
    t = time.perf_counter()
    n = sum(1 for _ in solver.layouts())
    best[f"valid_layouts: all {n:,} (every survivor verified)"] = time.perf_counter() - t
    t = time.perf_counter()
    degree_choices(analyse(BIG, options), options)
    best["degree_choices"] = time.perf_counter() - t
    return {k: round(v * 1000, 1) for k, v in best.items()}


# ----------------------------------------------------------------------------- the cost model vs measurements

KF_MODELS = {  # benchmarks/mfu_scaling/mfu_bench.sh M7B / M13B / M70B at KempnerForge 5666d0d
    "7B": "dim = 4096\nn_layers = 32\nn_heads = 32\nn_kv_heads = 8\nvocab_size = 128256\nffn_dim_multiplier = 1.3\n",
    "13B": "dim = 5120\nn_layers = 40\nn_heads = 40\nn_kv_heads = 8\nvocab_size = 128256\nffn_dim_multiplier = 1.3\n",
    "70B": "dim = 8192\nn_layers = 80\nn_heads = 64\nn_kv_heads = 8\nvocab_size = 128256\nffn_hidden_dim = 28672\n",
}
# mfu_scaling.md "Full Results Table" rows with mfu_bench.sh's flags for each experiment:
# (row, model, GPUs, dp_shard, tp, batch_size, grad_accum_steps, measured tok/s, MFU %, Mem/GPU GB)
KF_ROWS = [
    (1, "7B", 1, 1, 1, 2, 4, 10471, 57.8, 80.7), (2, "7B", 2, 2, 1, 2, 4, 18728, 51.7, 62.4),
    (3, "7B", 2, 1, 2, 4, 2, 13163, 36.4, 57.8), (4, "7B", 4, 4, 1, 4, 2, 38983, 53.8, 61.1),
    (5, "7B", 4, 1, 4, 4, 2, 25135, 34.7, 39.4), (6, "7B", 4, 2, 2, 4, 2, 25980, 35.9, 45.9),
    (7, "7B", 8, 2, 4, 4, 2, 44299, 30.6, 32.7), (8, "13B", 8, 8, 1, 4, 4, 35405, 44.4, 88.5),
    (9, "13B", 8, 2, 4, 4, 4, 27345, 34.3, 45.1), (10, "7B", 16, 4, 4, 4, 2, 82988, 28.6, 29.4),
    (11, "13B", 16, 4, 4, 4, 4, 53814, 33.7, 39.2), (12, "7B", 32, 8, 4, 4, 2, 155917, 26.9, 27.6),
    (13, "13B", 32, 8, 4, 4, 4, 104309, 32.7, 36.3), (14, "70B", 32, 8, 4, 2, 4, 17657, 25.4, 93.2),
]
# llama3_h100_202412_torchtitan.md: (table, label, flavor, GPUs, dp_shard, cp, tp, pp, schedule, local batch,
# seq_len, measured TPS/GPU, memory GiB)
TT_ROWS = [
    (2, "FSDP 8, CP 1", "8B", 8, 8, 1, 1, 1, "1F1B", 1, 32768, 3890, 83.9),
    (2, "FSDP 4, CP 2", "8B", 8, 4, 2, 1, 1, "1F1B", 1, 65536, 2540, 84.2),
    (2, "FSDP 2, CP 4", "8B", 8, 2, 4, 1, 1, "1F1B", 1, 131072, 1071, 84.0),
    (2, "FSDP 1, CP 8", "8B", 8, 1, 8, 1, 1, "1F1B", 1, 262144, 548, 84.5),
    (5, "1F1B", "405B", 512, 8, 1, 8, 8, "1F1B", 32, 8192, 100, 82.5),
    (5, "Interleaved 1F1B", "405B", 512, 8, 1, 8, 8, "Interleaved1F1B", 32, 8192, 128, 72.7),
    (6, "FSDP 8, CP 1", "405B", 512, 8, 1, 8, 8, "1F1B", 8, 32768, 76, 75.3),
    (6, "FSDP 4, CP 2", "405B", 512, 4, 2, 8, 8, "1F1B", 8, 65536, 47, 75.9),
    (6, "FSDP 2, CP 4", "405B", 512, 2, 4, 8, 8, "1F1B", 8, 131072, 31, 77.1),
    (6, "FSDP 1, CP 8", "405B", 512, 1, 8, 8, 8, "1F1B", 8, 262144, 16, 84.9),
]


def _ranks(values: list) -> list:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman(a: list, b: list) -> float:
    ra, rb = _ranks(a), _ranks(b)
    ma, mb = statistics.mean(ra), statistics.mean(rb)
    num = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    den = (sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb)) ** 0.5
    return num / den if den else float("nan")


def kendall(a: list, b: list) -> float:
    """Kendall's tau-b."""
    n, concordant, discordant, ta, tb = len(a), 0, 0, 0, 0
    for i in range(n):
        for j in range(i + 1, n):
            x, y = a[i] - a[j], b[i] - b[j]
            if x == 0 and y == 0:
                continue
            if x == 0:
                ta += 1
            elif y == 0:
                tb += 1
            elif (x > 0) == (y > 0):
                concordant += 1
            else:
                discordant += 1
    den = ((concordant + discordant + ta) * (concordant + discordant + tb)) ** 0.5
    return (concordant - discordant) / den if den else float("nan")


def _estimate(text: str, name: str, world: int, gpn: int, node: str, fabric: str, tmp: Path, degrees: dict):
    from meshlint.engine.check import analyse
    from meshlint.cli.settings import CliSettings, Planner
    from meshlint.estimate import cost

    path = tmp / name
    path.write_text(text)
    planner = Planner(CliSettings(world_size=world, gpus_per_node=gpn, isolated=True, gpu_memory_gib=141))
    options = planner.options_for(str(path))
    report = analyse(str(path), options)
    profile = cost.cluster({"node": node, "fabric": fabric}, gpn)
    model = cost.Model(cost.workload(report, options, profile), profile, world, gpn, "block", 141)
    return model.estimate(degrees)


def compare() -> dict:
    import tempfile

    out: dict = {"kempnerforge": [], "torchtitan": []}
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for row, size, gpus, ds, tp, batch, accum, tok_s, mfu, mem in KF_ROWS:
            text = (f"[model]\n{KF_MODELS[size]}max_seq_len = 4096\n[train]\nbatch_size = {batch}\nseq_len = 4096\n"
                    f"grad_accum_steps = {accum}\nactivation_checkpointing = \"full\"\n"
                    f"[distributed]\ndp_shard = {ds}\ntp = {tp}\n")
            degrees = {"pp": 1, "dp_replicate": 1, "dp_shard": ds, "cp": 1, "tp": tp, "ep": 1}
            est = _estimate(text, f"kf{row}.toml", gpus, min(4, gpus) if gpus < 4 else 4, "4xH200",
                            "infiniband-ndr", tmp, degrees)
            out["kempnerforge"].append({"row": row, "model": size, "gpus": gpus, "layout": f"dp_shard={ds} tp={tp}",
                                        "measured_tok_s": tok_s, "measured_mfu": mfu, "measured_mem_gb": mem,
                                        "model_tok_s": round(est.tokens / est.time), "model_mfu": round(est.mfu * 100, 1),
                                        "model_mem_gb": round(est.memory_gib * 2 ** 30 / 1e9, 1),
                                        "model_comm_exposed_s": round(sum(est.comm.values()), 3),
                                        "model_time_s": round(est.time, 3)})
        for table, label, flavor, gpus, ds, cp, tp, pp, schedule, local, seq, tps, mem in TT_ROWS:
            text = (f"[model]\nname = \"llama3\"\nflavor = \"{flavor}\"\n[training]\nlocal_batch_size = {local}\n"
                    f"seq_len = {seq}\n[activation_checkpoint]\nmode = \"full\"\n[parallelism]\n"
                    f"data_parallel_shard_degree = {ds}\ncontext_parallel_degree = {cp}\ntensor_parallel_degree = {tp}\n"
                    f"pipeline_parallel_degree = {pp}\npipeline_parallel_schedule = \"{schedule}\"\n")
            degrees = {"pp": pp, "dp_replicate": 1, "dp_shard": ds, "cp": cp, "tp": tp, "ep": 1, "etp": 1}
            est = _estimate(text, f"tt{table}_{ds}_{cp}_{schedule}.toml", gpus, 8, "8xH100", "roce-400", tmp, degrees)
            out["torchtitan"].append({"table": table, "layout": label, "flavor": flavor, "gpus": gpus,
                                      "measured_tps_gpu": tps, "measured_mem_gib": mem,
                                      "model_tps_gpu": round(est.tokens / est.time / gpus, 1),
                                      "model_mem_gib": round(est.memory_gib, 1), "model_time_s": round(est.time, 3)})
    groups = {}
    for r in out["kempnerforge"]:
        groups.setdefault(f"KempnerForge {r['model']} on {r['gpus']} GPUs", []).append(
            (r["measured_tok_s"], r["model_tok_s"], r["layout"]))
    groups["KempnerForge all 14 rows, by MFU"] = [(r["measured_mfu"], r["model_mfu"], f"row {r['row']}")
                                                  for r in out["kempnerforge"]]
    groups["KempnerForge all 14 rows, memory per GPU"] = [(r["measured_mem_gb"], r["model_mem_gb"], f"row {r['row']}")
                                                          for r in out["kempnerforge"]]
    for r in out["torchtitan"]:
        groups.setdefault(f"torchtitan Table {r['table']} ({r['flavor']}, {r['gpus']} GPUs)", []).append(
            (r["measured_tps_gpu"], r["model_tps_gpu"], r["layout"]))
    out["rankings"] = {}
    for name, rows in groups.items():
        if len(rows) < 2:
            continue
        measured, model = [r[0] for r in rows], [r[1] for r in rows]
        out["rankings"][name] = {"n": len(rows), "spearman": round(spearman(measured, model), 3),
                                 "kendall": round(kendall(measured, model), 3),
                                 "measured_order": [r[2] for r in sorted(rows, key=lambda r: -r[0])],
                                 "model_order": [r[2] for r in sorted(rows, key=lambda r: -r[1])]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--compare", action="store_true",
                        help="the cost model's ranking of published measurements, instead of timings")
    args = parser.parse_args()
    if args.compare:
        result = compare()
        if args.json:
            print(json.dumps(result, indent=2))
            return
        print("| row | model | GPUs | layout | measured tok/s | model tok/s | measured MFU | model MFU | "
              "measured GB | model GB |\n|---|---|---:|---|---:|---:|---:|---:|---:|---:|")
        for r in result["kempnerforge"]:
            print(f"| {r['row']} | {r['model']} | {r['gpus']} | {r['layout']} | {r['measured_tok_s']:,} | "
                  f"{r['model_tok_s']:,} | {r['measured_mfu']} | {r['model_mfu']} | {r['measured_mem_gb']} | "
                  f"{r['model_mem_gb']} |")
        print("\n| table | layout | GPUs | measured TPS/GPU | model TPS/GPU | measured GiB | model GiB |\n"
              "|---|---|---:|---:|---:|---:|---:|")
        for r in result["torchtitan"]:
            print(f"| {r['table']} | {r['layout']} | {r['gpus']} | {r['measured_tps_gpu']} | {r['model_tps_gpu']} | "
                  f"{r['measured_mem_gib']} | {r['model_mem_gib']} |")
        print("\n| comparison | n | Spearman | Kendall | measured order (best first) | model order |\n"
              "|---|---:|---:|---:|---|---|")
        for name, r in result["rankings"].items():
            print(f"| {name} | {r['n']} | {r['spearman']} | {r['kendall']} | {'; '.join(r['measured_order'])} | "
                  f"{'; '.join(r['model_order'])} |")
        return
    tt = ("--torchtitan-version", "main", "--gpus-per-node", "8")
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "check 671B @ 4,096": meshlint("check", BIG, "--world-size", "4096", *tt),
        "suggest 671B @ 512": meshlint("suggest", BIG, "--world-size", "512", *tt),
        "suggest 671B @ 4,096": meshlint("suggest", BIG, "--world-size", "4096", *tt),
        "suggest 671B @ 4,096 --format json": meshlint("suggest", BIG, "--world-size", "4096", *tt, "--format", "json"),
        "suggest 671B @ 16,384": meshlint("suggest", BIG, "--world-size", "16384", *tt),
        "suggest KF 70B 32 -> 64": meshlint("suggest", KF70, "--world-size", "64"),
    }
    results = measure(commands, args.rounds)
    inproc = phases(max(1, args.rounds // 2))
    if args.json:
        print(json.dumps({"processes": results, "in_process_ms": inproc, "rounds": args.rounds,
                          "cpus": os.cpu_count(), "load": os.getloadavg()}, indent=2))
        return
    print(f"rounds: {args.rounds} (interleaved), CPUs: {os.cpu_count()}, load average at the end: "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}\n")
    print("| command | best (ms) | median (ms) |\n|---|---:|---:|")
    for name, r in results.items():
        print(f"| {name} | {r['best_ms']} | {r['median_ms']} |")
    print("\n| in-process phase (4,096 GPUs) | best (ms) |\n|---|---:|")
    for name, ms in inproc.items():
        print(f"| {name} | {ms} |")


if __name__ == "__main__":
    main()
