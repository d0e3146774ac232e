"""KempnerForge: one module per modelled version."""
