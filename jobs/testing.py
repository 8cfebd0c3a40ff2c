"""Test fixtures that start real worker processes (filled in by the jobs tests)."""
