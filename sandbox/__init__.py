"""Sandboxed execution of untrusted code (checkers, agents). A plain library: it knows no Django."""
