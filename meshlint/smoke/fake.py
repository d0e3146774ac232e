"""``--fake``: build the meshes as chosen ranks of the full world in one process, no communication. [torch]

torch's fake process group (a private testing module, imported defensively)
lets DeviceMesh create every process group of a 4,096- or 65,536-rank world
without a single peer. Each sampled rank gets a fresh process group; its
coordinates and group members are checked against the prediction.
"""

from __future__ import annotations

import socket

from meshlint.smoke.progress import Progress


class FakeUnavailable(RuntimeError):
    pass


def run(plan: dict, ranks: list[int], device: str = "cpu") -> dict[int, dict]:
    import torch.distributed as dist

    try:
        from torch.testing._internal.distributed.fake_pg import FakeStore
    except Exception as exc:  # a torch build without its testing package
        raise FakeUnavailable(f"this torch has no fake process group ({exc}); run a real smoke instead") from None
    from meshlint.smoke.verify import build_and_verify

    states = {}
    world = plan["world_size"]
    for rank in ranks:
        prog = Progress(None, rank, {"host": socket.gethostname(), "node": None, "local_rank": None,
                                     "local_world_size": None, "launcher": "fake"})
        try:
            with prog.phase("rendezvous"):
                dist.init_process_group("fake", store=FakeStore(), rank=rank, world_size=world)
            build_and_verify(plan, rank, prog, device, collectives=False, world_groups=rank == ranks[0])
            states[rank] = prog.finish()
        except Exception:
            states[rank] = prog.state  # the error is recorded with its phase
            if prog.state["error"] and prog.state["error"]["phase"] == "mesh":
                break  # the same meshes fail on every rank: one is enough
        finally:
            if dist.is_initialized():
                dist.destroy_process_group()
    return states
