"""Named sandbox backends: bwrap (default), docker, process. Pick one with sandbox.get_backend(name)."""
