"""The price of a resolved layout, as arithmetic on what the config and the framework say: the whole per-GPU peak
memory (``memory_check``, ``memory_accelerate``, on the models of ``meshlint.mesh``) and the communication and
compute cost that ranks layouts (``cost``).

It sits between the readers and the rule engine: the memory rules (ML504, ML505) read the estimate as a fact,
and ``suggest`` ranks layouts by the same model. Nothing here imports torch or evaluates a rule.
"""
