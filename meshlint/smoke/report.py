"""One smoke report from every rank's progress, whichever rank found what: JSON (versioned) and text. No torch.

Version 1, documented in the README and docs/smoke-report-v1.schema.json;
fields may be added, none removed or changed in meaning without a new version.
"""

from __future__ import annotations

import json

from meshlint.mesh.devmesh import compact_ranks

VERSION = 1
PHASES = ("launch", "rendezvous", "mesh", "verify", "placement", "probe", "step")


def assemble(plan: dict, states: dict[int, dict], *, mode: str, launcher: str, device: str | None,
             backend: str | None, ended: str = "done", seconds: float = 0.0, timeout: float | None = None,
             supervisor: dict | None = None, leftover: list | None = None, log_tail: list | None = None,
             notes: list | None = None, ranks_expected: list | None = None, step: dict | None = None,
             signal: str | None = None, reported_by: int | None = None, endpoint: str | None = None) -> dict:
    """The report of one smoke run; ``states`` maps rank -> that rank's progress state.

    ``reported_by``: the rank whose own view this is, when the ranks could not
    gather one report (a launched rank that failed, timed out or was stopped);
    ``endpoint``: the rendezvous it used (MASTER_ADDR:MASTER_PORT).
    """
    supervisor = supervisor or {}
    expected = ranks_expected if ranks_expected is not None else list(range(plan["world_size"]))
    world = plan["world_size"]
    failures = _exceptions(states) + _merged(states, "failures", world) + _agent_failures(supervisor, states)
    if ended == "timeout" and reported_by is not None:
        failures.append(_alone_timeout(states.get(reported_by) or {}, reported_by, world, timeout, endpoint))
    elif ended == "timeout":
        failures.append(_timeout(states, expected, timeout))
    elif ended == "interrupted":
        who = "every rank was stopped" if reported_by is None else f"rank {reported_by} stopped"
        how = "interrupted (Ctrl-C)" if signal in (None, "SIGINT") else f"interrupted by {signal}"
        failures.append({"phase": _furthest(states), "check": "interrupted", "ranks": [] if reported_by is None
                         else [reported_by], "message": f"{how}: {who}", "signal": signal or "SIGINT"})
    elif ended == "error":
        failures.append({"phase": "launch", "check": "launch", "ranks": [],
                         "message": supervisor.get("error") or "the launcher failed: " + " | ".join(log_tail or [])})
    missing = [r for r in expected if r not in states]
    if missing and ended == "done":
        failures.append({"phase": "launch", "check": "launch", "ranks": missing,
                         "message": f"ranks {compact_ranks(missing)} never reported"})
    if leftover:
        failures.append({"phase": "cleanup", "check": "cleanup", "ranks": [],
                         "message": f"{len(leftover)} processes could not be stopped: pids {leftover}"})
    lists = [set(st.get("built") or ()) for st in states.values()]
    built = set.intersection(*lists) if lists else set()  # built on every rank that reported
    step_report = _step(plan, states, step or {"requested": False, "reason": "not requested"})
    if step_report.get("blocked"):
        failures.append({"phase": "step", "check": "step", "ranks": [], "message": step_report["reason"]})
    report = {
        "version": VERSION,
        "ok": not failures and ended == "done" and step_report.get("ok") is not False,
        "config": plan["config"],
        "dialect": plan["dialect"],
        "framework": plan.get("framework"),  # the version whose ParallelDims was built (registry era)
        "world_size": plan["world_size"],
        "backend": backend,
        "device": device,
        "mode": mode,
        "launcher": launcher,
        "ended": ended,
        "seconds": round(seconds, 3),
        "timeout": timeout,
        "ranks_checked": sorted(states),
        "phases": _phases(states, supervisor, seconds),
        "meshes": {name: (dict(m, built=name in built) if m else None) for name, m in plan["meshes"].items()},
        "expected_error": plan.get("expected_error"),
        "checks": _checks(states),
        "failures": failures,
        "warnings": _merged(states, "warnings", world),
        "placement": _placement(states),
        "step": step_report,
        "probe": _probe(states),
        "leftover_processes": None if leftover is None else len(leftover),
        "notes": ([plan["no_mesh"] + ("; the training step ran unsharded in one process"
                                      if step_report.get("ran") else "")] if plan.get("no_mesh") else [])
        + list(notes or [])
        + ([supervisor["note"]] if supervisor.get("note") else []) + _hints(states, endpoint),
        "signal": signal if ended == "interrupted" else None,
        "reported_by": reported_by,
    }
    return report


ADDRESS_IN_USE = ("EADDRINUSE", "address already in use", "Address already in use")


def _hints(states: dict, endpoint: str | None) -> list:
    """What to do about a rendezvous port that another program holds."""
    for st in states.values():
        err = st.get("error") or {}
        if err.get("phase") == "rendezvous" and any(p in err.get("message", "") for p in ADDRESS_IN_USE):
            where = f" ({endpoint})" if endpoint else ""
            return [f"the rendezvous port{where} is taken by another program: set MASTER_PORT to a free port, "
                    "the same on every rank"]
    return []


def _alone_timeout(st: dict, rank: int, world: int, timeout, endpoint: str | None) -> dict:
    """One launched rank's own view of a timeout: where it waited, and what that usually means."""
    phase, step = st.get("phase"), st.get("step")
    where = f" in phase {phase}" + (f" ({step!r})" if step else "") if phase else " before its first phase"
    if phase == "rendezvous":
        at = f" at {endpoint}" if endpoint else ""
        why = (f"the rendezvous{at} never completed: the other {world - 1} rank{'s' if world > 2 else ''} never "
               "joined, or the address does not answer as a rendezvous (a port another program holds, a wrong "
               "MASTER_ADDR)")
    elif phase is None:
        why = "it was still starting (importing torch): give --timeout more room on a loaded machine"
    else:
        why = "a peer stopped answering: see the other ranks' reports"
    return {"phase": phase, "check": "timeout", "ranks": [rank],
            "message": f"rank {rank} timed out after {timeout:g} s{where}: {why}"}


def parallelisms(plan: dict) -> dict:
    """Which parallelisms the step exercises: true where active with degree > 1."""
    d = plan["degrees"]
    tt = plan["dialect"] == "torchtitan"
    return {"fsdp": (d["dp_shard"] * (d["cp"] if tt else 1)) > 1, "dp_replicate": d["dp_replicate"] > 1,
            "tp": d["tp"] > 1, "pp": d["pp"] > 1, "ep": d["ep"] > 1,
            "etp": tt and d["ep"] > 1 and (d.get("etp") or 1) > 1,  # torchtitan 0.3.0/main: no etp (None)
            "cp": tt and d["cp"] > 1}


def _step(plan: dict, states: dict, info: dict) -> dict:
    active = parallelisms(plan)
    out = {"ran": False, "ok": None, "parallelisms": active, "trivial": sorted(k for k, v in active.items() if not v)}
    if plan["dialect"] == "kempnerforge" and plan["degrees"]["cp"] > 1:
        out["not_applied"] = ["cp (KempnerForge declares it but never applies it)"]
    if info.get("blocked"):
        return dict(out, ok=False, blocked=True, reason=info["reason"])
    results = {r: st["training"] for r, st in states.items() if st.get("training")}
    if not info.get("requested") or not results:
        failed = any(st.get("error") and st["error"]["phase"] in ("probe", "step") for st in states.values())
        reason = info.get("reason") or ("the step did not finish" if info.get("requested") else "not requested")
        return dict(out, ok=False if failed or info.get("requested") else None, reason=reason)
    any_result = next(iter(results.values()))
    with_loss = [res for res in results.values() if res["loss"] is not None]
    loss_res = with_loss[0] if with_loss else any_result
    failed = any(f.get("check") == "step" for st in states.values() for f in st["failures"])
    errors = [loss_res["loss_rel_error"] or 0.0] + [res["grad_norm_rel_error"] for res in results.values()] + \
             [res["max_grad_rel_error"] for res in results.values()]
    memory = {r: res["peak_memory_mb"] for r, res in sorted(results.items())}
    seconds = {k: round(max(res["seconds"][k] for res in results.values()), 4) for k in any_result["seconds"]}
    return dict(out, ran=True, ok=not failed and len(results) == len(states),
                loss=loss_res["loss"], reference_loss=loss_res["reference_loss"],
                loss_rel_error=loss_res["loss_rel_error"], grad_norm=any_result["grad_norm"],
                reference_grad_norm=any_result["reference_grad_norm"],
                grad_norm_rel_error=max(res["grad_norm_rel_error"] for res in results.values()),
                max_rel_error=max(errors), max_param_rel_error=max(res["max_param_rel_error"] for res in results.values()),
                tolerance=any_result["tolerance"],
                params_checked=len({n for res in results.values() for n in res["params_checked"]}),
                schedule=any_result["schedule"] if plan["degrees"]["pp"] > 1 else None,
                microbatches=any_result["microbatches"], model=any_result["model"], seconds=seconds,
                peak_memory_mb={"max": max(memory.values()), "per_rank": memory},
                **({"scaled": info["scaled"]} if info.get("scaled") else {}))


def _probe(states: dict) -> dict | None:
    """Per 1-D mesh: the slowest rank's latency and bandwidth."""
    out: dict = {}
    for st in states.values():
        for axis, m in (st.get("probe") or {}).items():
            row = out.setdefault(axis, dict(m))
            row["latency_us"] = max(row["latency_us"], m["latency_us"])
            row["bus_bandwidth_gbps"] = min(row["bus_bandwidth_gbps"], m["bus_bandwidth_gbps"])
    return out or None


def _phases(states: dict, supervisor: dict, seconds: float) -> list:
    out = []
    starts = [st.get("started") for st in states.values() if st.get("started")]
    if supervisor.get("started") and starts:
        out.append({"name": "launch", "seconds": round(max(0.0, min(starts) - supervisor["started"]), 3),
                    "ok": True})
    for name in PHASES[1:]:
        seen = [ph for st in states.values() for ph in st["phases"] if ph["name"] == name]
        if seen:
            out.append({"name": name, "seconds": round(max(p["seconds"] for p in seen), 4),
                        "ok": all(p["ok"] for p in seen) and len(seen) == len(states)})
    return out


def _checks(states: dict) -> list:
    """Checks summed over ranks: one row per (check, axis or mesh)."""
    rows: dict = {}
    for st in states.values():
        for c in st["checks"]:
            key = (c["name"], c.get("axis"), c.get("mesh"))
            row = rows.setdefault(key, {"name": c["name"], **({"axis": c["axis"]} if c.get("axis") else {}),
                                        **({"mesh": c["mesh"]} if c.get("mesh") else {}),
                                        "ok": True, "ranks": 0, "failed": 0})
            row["ranks"] += 1
            if not c["ok"]:
                row["ok"] = False
                row["failed"] += 1
            for extra in ("severity", "groups", "crossing", "skipped"):
                if extra in c:
                    row[extra] = c[extra]
    return list(rows.values())


def _merged(states: dict, field: str, world: int) -> list:
    """Identical findings on several ranks become one, with the ranks listed."""
    groups: dict = {}
    for rank in sorted(states):
        for item in states[rank][field]:
            body = {k: v for k, v in item.items() if k != "rank"}
            if body.get("check") in ("coordinate", "coverage"):
                body.pop("expected", None)
                body.pop("actual", None)
                body.pop("message", None)
                body["per_rank"] = True
            key = json.dumps(body, sort_keys=True, default=str)
            entry = groups.setdefault(key, dict(body, ranks=[]))
            entry["ranks"].append(rank)
            if body.get("per_rank"):
                entry.setdefault("detail", []).append({"rank": rank, "expected": item.get("expected"),
                                                       "actual": item.get("actual")})
    out = _merge_gradients(groups)
    for entry in groups.values():
        if entry.get("quantity") == "gradients":
            continue
        if entry.pop("per_rank", False):
            ranks = entry["ranks"]
            if entry["check"] == "coverage":
                entry["message"] = (f"{_ranks(ranks)} ({len(ranks)} of {world}) "
                                    f"{'is' if len(ranks) == 1 else 'are'} outside mesh {entry.get('mesh')!r}: "
                                    "no coordinate and no group on any of its dims")
            else:
                first = entry["detail"][0]
                entry["message"] = (f"mesh {entry.get('mesh')!r}: coordinates differ on ranks {compact_ranks(ranks)}"
                                    f" (rank {first['rank']}: expected {first['expected']}, got {first['actual']})")
        elif "message" not in entry:
            entry["message"] = (f"{entry.get('check')} of {entry.get('axis') or entry.get('mesh')}: expected "
                                f"{entry.get('expected')}, got {entry.get('actual')} on ranks "
                                f"{compact_ranks(entry['ranks'])}")
        out.append(entry)
    return out


def _merge_gradients(groups: dict) -> list:
    """Every rank's gradient mismatches (each stage sees its own parameters) as one finding."""
    items = [e for e in groups.values() if e.get("quantity") == "gradients"]
    if not items:
        return []
    errors: dict = {}
    checked: set = set()
    for e in items:
        checked.update(e["checked"])
        for name, err in e["errors"].items():
            errors[name] = max(err, errors.get(name, 0.0))
    suspects = [s for s in items[0]["suspects"] if all(s in e["suspects"] for e in items)] or \
        sorted({s for e in items for s in e["suspects"]})
    worst = sorted(errors, key=lambda n: -errors[n])
    ranks = sorted({r for e in items for r in e["ranks"]})
    tolerance = items[0]["message"].rsplit("> ", 1)[-1].split(")")[0]
    return [{"phase": "step", "check": "step", "quantity": "gradients", "ranks": ranks, "params": worst,
             "suspects": suspects, "errors": errors,
             "message": f"{len(errors)} of {len(checked)} parameter gradients differ from the unsharded model's "
                        f"(worst: {worst[0]}, relative error {errors[worst[0]]:.1e} > {tolerance}); suspect "
                        f"{', '.join(suspects) or 'the combination'}"}]


PEER_LOST = ("Connection closed by peer", "Connection reset by peer", "Broken pipe")


def _exceptions(states: dict) -> list:
    """Errors the ranks raised, identical ones merged; ranks that only lost a crashed peer come last, as one."""
    groups: dict = {}
    lost: list = []
    for rank in sorted(states):
        err = states[rank].get("error")
        if not err:
            continue
        if any(p in err["message"] for p in PEER_LOST):
            lost.append((rank, err))
            continue
        key = (err["phase"], err["type"], err["message"])
        groups.setdefault(key, {"phase": err["phase"], "check": "exception", "step": err.get("step"),
                                "ranks": [], "message": f"{err['type']}: {err['message']}"})["ranks"].append(rank)
    out = list(groups.values())
    for entry in out:
        entry["message"] = f"{_ranks(entry['ranks'])} failed in phase {entry['phase']}: {entry['message']}"
    if lost:
        ranks = [r for r, _ in lost]
        out.append({"phase": lost[0][1]["phase"], "check": "peer-lost", "ranks": ranks,
                    "message": f"{_ranks(ranks)} then stopped: a peer of theirs went away in the middle of a "
                               f"collective ({lost[0][1]['type']}: connection closed by peer)"})
    return out


def _agent_failures(supervisor: dict, states: dict) -> list:
    """Ranks torch's agent saw die that left no error of their own (a hard exit or a signal)."""
    out = []
    for f in supervisor.get("failures") or []:
        st = states.get(f["rank"])
        if st is not None and st.get("error"):
            continue
        how = f"signal {f['signal']}" if f.get("signal") else f"exit code {f['exitcode']}"
        where = f" in phase {st['phase']}" if st and st.get("phase") else ""
        said = f.get("message") or ""
        said = "" if "To enable traceback" in said else said  # the agent's boilerplate, not the rank's words
        out.append({"phase": st.get("phase") if st else None, "check": "crash", "ranks": [f["rank"]],
                    "message": f"rank {f['rank']} died{where} with {how}" + (f": {said}" if said else "")})
    return out


def _furthest(states: dict) -> str | None:
    order = {p: i for i, p in enumerate(PHASES)}
    live = [st["phase"] for st in states.values() if st.get("phase")]
    return max(live, key=lambda p: order.get(p, 0)) if live else None


def _timeout(states: dict, expected: list, timeout) -> dict:
    """Who is furthest behind (the rank the others wait for), and where everyone else waits."""
    order = {p: i for i, p in enumerate(PHASES)}
    live = {r: st for r, st in states.items() if not st.get("done")}
    never = [r for r in expected if r not in states]
    if not live and not never:
        return {"phase": None, "check": "timeout", "ranks": [], "message": f"timed out after {timeout:g} s"}

    def key(st):
        return (order.get(st.get("phase") or "", -1), st.get("steps", 0))

    parts = []
    behind = list(never)
    if live:
        slowest = min(key(st) for st in live.values())
        behind += sorted(r for r, st in live.items() if key(st) == slowest)
        lagging = [r for r in behind if r in live]
        st = live[lagging[0]] if lagging else None
        phase = max((st.get("phase") for st in live.values()), key=lambda p: order.get(p or "", -1))
        parts.append(f"timed out after {timeout:g} s in phase {phase}")
        if lagging:
            where = f"in {st['phase']}" + (f", last in {st['step']!r}" if st.get("step") else
                                          ", before its first collective")
            parts.append(f"{_ranks(lagging)} did not arrive ({where})")
        waits: dict = {}
        for r, other in sorted(live.items()):
            if r not in behind:
                waits.setdefault(other.get("step") or other.get("phase"), []).append(r)
        if waits:
            parts.append("the others wait: " + "; ".join(f"{_ranks(rs)} in {w!r}" for w, rs in waits.items()))
    else:
        phase = None
        parts.append(f"timed out after {timeout:g} s")
    if never:
        parts.append(f"{_ranks(never)} never started")
    return {"phase": phase, "check": "timeout", "ranks": sorted(behind), "message": ": ".join(parts[:2]) +
            ("; " + "; ".join(parts[2:]) if len(parts) > 2 else "")}


def _ranks(ranks: list) -> str:
    return f"rank {ranks[0]}" if len(ranks) == 1 else f"ranks {compact_ranks(ranks)}"


def _placement(states: dict) -> list | None:
    for st in states.values():
        if st.get("placement"):
            return [{k: r[k] for k in ("rank", "host", "node", "local_rank", "local_world_size")}
                    for r in st["placement"]]
    return None


# ----------------------------------------------------------------------------- rendering

def render_json(report: dict) -> str:
    return json.dumps(report, indent=2)


def render_text(report: dict) -> str:
    status = "OK" if report["ok"] else "FAILED"
    n = report["world_size"]
    where = (f"{report['mode']}, {n} rank{'s' if n != 1 else ''}"
             + (f" ({len(report['ranks_checked'])} checked)" if report["mode"] == "fake" else "")
             + (f", {report['backend']} on {report['device']}" if report["backend"] else "")
             + f", {report['seconds']:.1f} s")
    out = [f"meshlint smoke {report['config']}: {status} ({where})"]

    def row(label: str, text: str) -> None:
        out.append(f"  {label:<10} {text}")

    fw = report.get("framework") or {}
    if fw.get("version"):
        row("framework", f"{fw.get('name') or report['dialect']} {fw['version']}")
    if report.get("reported_by") is not None:
        row("view", f"rank {report['reported_by']} alone: the ranks could not gather one report, "
                    "so each prints its own")

    if report["phases"]:
        row("phases", ", ".join(f"{p['name']} {p['seconds']:.2f} s" + ("" if p["ok"] else " (failed)")
                                for p in report["phases"]))
    for name, mesh in report["meshes"].items():
        if mesh:
            row("mesh", f"{name} ({', '.join(mesh['dims'])}) ({', '.join(map(str, mesh['sizes']))})"
                        + ("" if mesh["built"] else ": not built"))
        else:
            row("mesh", f"{name}: cannot be built, as the static check predicted")
    if report["checks"]:
        row("checks", _checks_line(report["checks"]))
    if report.get("placement"):
        nodes: dict = {}
        for r in report["placement"]:
            nodes.setdefault(r["node"], []).append(r["rank"])
        count = len(report["placement"])
        hosts = len(nodes)
        row("placement", f"{count} rank{'s' if count != 1 else ''} on {hosts} node{'s' if hosts != 1 else ''}: "
                         + ", ".join(f"{node} ranks {compact_ranks(rs)}" for node, rs in nodes.items()))
    step = report.get("step") or {}
    if step.get("ran"):
        on = [k for k, v in step["parallelisms"].items() if v]
        row("step", f"{'OK' if step['ok'] else 'MISMATCH'}: {' + '.join(on) or 'no parallelism'} on a "
                    f"{step['model']['n_layers']}-layer decoder{' (MoE)' if step['model']['n_experts'] else ''}"
                    + (f", {step['schedule']} × {step['microbatches']} microbatches" if step.get("schedule") else "")
                    + f"; loss {step['loss']:.6f} vs {step['reference_loss']:.6f} unsharded, grad norm "
                      f"{step['grad_norm']:.6f} vs {step['reference_grad_norm']:.6f}; max relative error "
                      f"{step['max_rel_error']:.1e} (tolerance {step['tolerance']:g}) over {step['params_checked']} "
                      f"parameters; peak {step['peak_memory_mb']['max']:.0f} MB per rank")
    elif step.get("reason") and not step.get("blocked"):
        row("step", f"not run: {step['reason']}")
    for axis, m in (report.get("probe") or {}).items():
        row("probe", f"{axis} ({m['size']} ranks): all_reduce {m['latency_us']:.0f} µs, "
                     f"{m['bus_bandwidth_gbps']:.2f} GB/s bus bandwidth")
    if report.get("memory"):
        from meshlint.smoke.memory import text_rows

        for label, text in text_rows(report["memory"]):
            out.append(f"  {label:<10} {text}" if label else f"  {'':<10} {text}")
    for f in report.get("static_findings") or []:
        if f["severity"] == "error":
            row("static", f"{f['rule']} line {f['line']}: {f['message']}")
    for f in report["failures"]:
        row("FAILURE", f"[{f.get('phase') or '-'}] {f['message']}")
    for w in report["warnings"]:
        row("warning", f"[{w.get('phase') or '-'}] {w['message']}")
    for note in report["notes"]:
        row("note", note)
    if report.get("leftover_processes"):
        row("cleanup", f"{report['leftover_processes']} processes left behind")
    return "\n".join(out)


def _checks_line(checks: list) -> str:
    totals: dict = {}
    for c in checks:
        if c["name"] == "placement":
            continue
        t = totals.setdefault(c["name"], [0, 0])
        t[0] += c["ranks"] - c["failed"]
        t[1] += c["ranks"]
    parts = [f"{name} {ok}/{n}" if name != "collectives" else f"{n} fake-backend groups (members only)"
             for name, (ok, n) in totals.items()]
    for c in checks:
        if c["name"] == "placement":
            parts.append(f"{c['axis']} groups on one node " + ("yes" if c["ok"] else f"no ({c['crossing']} cross)"))
    return ", ".join(parts)
