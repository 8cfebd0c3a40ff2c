"""The ONNX Runtime encoder (synthesis.minilm_onnx) against the numpy reference (synthesis.novelty.MiniLMEncoder):
the same vectors to float32 rounding, so the same nearest task for every near-duplicate, and the encoder that
settings name. (Its speed is the synthesis bench's: a ratio measured side by side, bench/synthesis_bench.py.)"""

import numpy as np
import pytest
from django.test import override_settings

from synthesis import novelty
from synthesis.minilm_onnx import OnnxMiniLMEncoder
from synthesis.tests.test_novelty import SENTENCES

# Near-duplicates (rewordings of one request) and their originals, among unrelated tasks.
ORIGINALS = [
    "Sum the amounts in sales.csv and write the total to totals.md.",
    "Rename every photo in photos/ to its capture date, like 2024-05-01-001.jpg.",
    "Read server.log and list the ten IP addresses with the most failed logins.",
    "Merge contacts_a.csv and contacts_b.csv, dropping duplicate email addresses.",
]
REWORDED = [
    "Add up the sales figures from sales.csv and put the total in totals.md.",
    "Give each picture under photos/ a name from the date it was taken, e.g. 2024-05-01-001.jpg.",
    "From server.log, find the 10 IPs with the largest number of failed login attempts.",
    "Combine contacts_a.csv with contacts_b.csv and remove contacts whose email appears twice.",
]
# Longer tasks, as the synthesis bench writes them (60-140 words).
TASKS = [
    "I run a small bakery with two shops, and I need help with the invoices in `data/invoices_2024.csv`. Please "
    "compute the total amount per supplier, then flag every row whose price is missing or negative, then sort the "
    "invoices by date, newest first. Write a markdown report to `reports/invoices-summary.md` with a table and a "
    "two-sentence summary. Round money to two decimals. Keep the original files untouched.",
    "As the treasurer of a chess club, I keep the donations in `records/donations.json`. Please merge it with "
    "`shared/members.tsv` on the owner column, then group the donations by team and give the average amount. Save "
    "the result as JSON in `out/donations-overview.json`, one object per team. Do not invent values that are not "
    "in the files. Mention any rows you had to skip and why.",
    "Our lab tracks freezer samples in `raw/lab_samples_2022.yaml`. Please list the lab samples that are overdue "
    "by more than 14 days, then split the lab samples into one file per room under `raw/by-room/`, then run "
    "`scripts/check_lab_samples.py` and fix what it reports. Put the figures in `summary/lab-samples-check.csv` "
    "with a header row. Use ISO dates (YYYY-MM-DD).",
    "I coach a youth football team, and I need help with the match results in `notes/match_results.md`. Please "
    "work out the month-over-month change in score, then draft a short reply for each match result marked urgent. "
    "Write a plain-text summary to `results/match-results-review.txt` that a non-technical colleague can read. "
    "Write everything in British English.",
    "I maintain a small open-source library, and I need help with the server logs in `archive/server_logs.log`. "
    "Please extract every email address and phone number, then count the server logs per status and per week, "
    "then spot the server logs whose duration differs from last month's by over 10%. Produce "
    "`out/server-logs-report.md` with one section per status. Ignore rows marked as cancelled. "
    + "Do not use any network access; everything you need is in the workspace. "
    * 20,  # past 256 tokens
    "Our HR team onboards new hires; the job applications are in `inbox/job_applications.jsonl`. Please remove "
    "exact duplicates and count how many there were, then check that each category appears in "
    "`input/categories.csv`. Store the cleaned data in `reports/job-applications.csv` and the problems you found "
    "in `reports/job-applications-issues.md`. Treat empty cells as zero.",
]


TEXTS = [*SENTENCES, *ORIGINALS, *REWORDED, *TASKS]


@pytest.fixture(scope="module")
def vectors():
    """TEXTS embedded by the numpy reference and by the ONNX encoder: (reference, fast, the ONNX encoder)."""
    fast = novelty.encoder()
    assert isinstance(fast, OnnxMiniLMEncoder)  # the default
    return novelty.MiniLMEncoder().encode(TEXTS, batch_size=4), fast.encode(TEXTS, batch_size=4), fast


def test_onnx_vectors_are_the_numpy_ones(vectors):
    expected, got, fast = vectors
    assert got.shape == expected.shape and got.dtype == np.float32
    assert float(np.min(np.sum(expected * got, axis=1))) >= 0.99999
    np.testing.assert_allclose(got, expected, atol=1e-5)
    # Batching and padding do not change a vector on this path either.
    np.testing.assert_allclose(np.stack([fast.encode([t])[0] for t in TEXTS[:5]]), got[:5], atol=1e-5)


def test_every_near_duplicate_has_the_same_nearest_task(vectors):
    pool = [*ORIGINALS, *SENTENCES[2:], *TASKS]
    ids = [f"t{i}" for i in range(len(pool))]
    rows = [TEXTS.index(t) for t in pool]
    queries = [TEXTS.index(t) for t in REWORDED]
    reference, fast = (
        novelty.NoveltyIndex(ids, v[rows], [None] * len(pool)).nearest_many(v[queries]) for v in vectors[:2]
    )
    assert [n for n, _ in fast] == [n for n, _ in reference] == ids[: len(ORIGINALS)]
    np.testing.assert_allclose([s for _, s in fast], [s for _, s in reference], atol=1e-5)


def test_the_encoder_is_the_one_settings_name(monkeypatch):
    monkeypatch.setattr(novelty, "_encoder", None)
    with override_settings(CLAWGYM_NOVELTY_ENCODER="numpy"):
        assert type(novelty.encoder()) is novelty.MiniLMEncoder
    monkeypatch.setattr(novelty, "_encoder", None)
    with override_settings(CLAWGYM_NOVELTY_ENCODER="torch"), pytest.raises(ValueError, match="no encoder named"):
        novelty.encoder()
