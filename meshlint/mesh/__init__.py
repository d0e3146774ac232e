"""Pure arithmetic: device meshes, ranks, topology, pipeline stages, memory."""
