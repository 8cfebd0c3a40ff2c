"""Plain helpers shared by the ops tests."""

from prometheus_client.parser import text_string_to_metric_families


def samples(text: str) -> dict:
    """{(name, ((label, value), …)): value} of a Prometheus text page."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found
