"""Runs Accelerate 1.15.0's own ``accelerate launch`` argument handling (launch_command_parser,
_validate_launch_command, and the launcher's environment: prepare_multi_gpu_env or
prepare_simple_launcher_cmd_env, as launch_command picks them) for the cases read as JSON lines on stdin;
prints, per case, the refusal or the PARALLELISM_CONFIG_* environment and the processes it would start
(tests/test_real_accelerate.py). Run with PYTHONPATH=.frameworks/accelerate-1.15.0 and HF_HOME set to an
empty folder (no default config). One stand-in: the launcher's check that its rendezvous port is free
answers "free" (it probes the machine, which a test must not depend on).
"""

import json
import os
import sys
import tempfile
import warnings

warnings.simplefilter("ignore")

import accelerate.utils.launch as launch_utils  # noqa: E402
from accelerate.commands.launch import _validate_launch_command, launch_command_parser  # noqa: E402

launch_utils.is_port_in_use = lambda port: False


def run(case, folder):
    argv = list(case["argv"])
    if case.get("config") is not None:
        path = os.path.join(folder, f"c{case['id']}.yaml")
        with open(path, "w") as f:
            f.write(case["config"])
        argv = ["--config_file", path] + argv
    parser = launch_command_parser()
    try:
        args = parser.parse_args(argv + ["train.py"])
        args, _defaults, _mp = _validate_launch_command(args)
    except (ValueError, SystemExit) as exc:
        return {"error": f"ValueError: {exc}" if isinstance(exc, ValueError) else "usage"}
    if args.use_fsdp or args.multi_gpu:
        env = launch_utils.prepare_multi_gpu_env(args)
        world = int(args.nproc_per_node) * int(getattr(args, "nnodes", 1) or 1)
    else:
        _cmd, env = launch_utils.prepare_simple_launcher_cmd_env(args)
        world = None
    keep = {k: v for k, v in env.items() if k.startswith("PARALLELISM_CONFIG_") and k.endswith("_SIZE")}
    return {"error": None, "use": env.get("ACCELERATE_USE_PARALLELISM_CONFIG"), "sizes": keep, "world": world}


def main():
    cases = [json.loads(line) for line in sys.stdin if line.strip()]
    with tempfile.TemporaryDirectory() as folder:
        for case in cases:
            for name in [k for k in os.environ if k.startswith("PARALLELISM_CONFIG_")]:
                del os.environ[name]
            print(json.dumps({"id": case["id"], **run(case, folder)}), flush=True)


if __name__ == "__main__":
    main()
