"""``meshlint smoke``: build the resolved DeviceMesh for real and prove it matches the static prediction.

Data flow (only the modules marked [torch] import torch):

    FileReport ──plan──▶ SmokePlan (JSON: how to build each mesh, and what every rank must see)
    launch: this process, no torch ──▶ supervisor [torch] ──elastic_launch──▶ ranks [torch]
    ranks ──progress files──▶ launch (watchdog, one report) ──report──▶ text | json

Under torchrun or srun the process is already a rank (``rankenv``) and runs
``worker`` itself; ``--fake`` builds the meshes of one rank in this process on
torch's fake process group (``fake``).
"""
