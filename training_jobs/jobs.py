"""Background entry points of training (registered with jobs.registry on start-up)."""
