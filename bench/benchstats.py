"""Figures the benches share: the nearest-rank percentile of a list of timings."""


def percentile(values: list[float], q: float) -> float:
    """The value at rank q (0..1) of the sorted values, nearest rank below (the 95th of 40 values is the 39th)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]
