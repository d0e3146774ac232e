"""torchtitan: one module per modelled version, and what its versions share."""
