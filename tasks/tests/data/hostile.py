"""Hostile parser input for the import tests: YAML alias bombs and loops, JSON nested thousands deep, and a ceiling on
this process's memory so that a parser that would build a bomb fails at once instead of taking the machine's memory.

    with memory_ceiling():            # at most 512 MiB more address space than the process has now
        call_command("import_tasks", folder)
"""

import contextlib
import os
import resource

LOOP = "loop: &x [*x]\n"  # a list that holds itself
DEEP_JSON = "[" * 100_000 + "]" * 100_000  # json.loads: RecursionError


def alias_bomb(levels: int = 8, width: int = 9) -> str:
    """YAML of a few hundred bytes whose values, aliases expanded, number width ** levels (9 ** 8: 43 million)."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for i in range(1, levels + 1):
        lines.append(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def _address_space() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


@contextlib.contextmanager
def memory_ceiling(extra: int = 512 * 1024 * 1024):
    """Within the block this process may map at most `extra` bytes more than it has mapped now (RLIMIT_AS): building
    a bomb raises MemoryError within seconds. Only for blocks that start no thread (a thread's stack counts too)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    ceiling = _address_space() + extra
    if hard != resource.RLIM_INFINITY:
        ceiling = min(ceiling, hard)
    resource.setrlimit(resource.RLIMIT_AS, (ceiling, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
