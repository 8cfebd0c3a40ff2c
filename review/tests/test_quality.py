"""Quality sampling: drawing, rating and the statistics (services), its pages, its API and its command."""

import json
import math
import random
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction
from django.urls import reverse

from review import quality
from review.models import BenchmarkCandidate, QualityRating, QualitySample
from review.services import NotAllowed, ReviewError, propose_candidates
from tasks.models import BenchmarkCategory, Task
from tasks.services import revise_task
from tasks.testing import make_task

SCORES = {"reasonableness": 4, "feasibility": 3, "resource_consistency": 5, "verification": 2}


def task(external_id, **fields):
    """A task with a revision; `fields` (status, source, benchmark_category) are set on the Task row."""
    made = make_task(external_id, instruction=f"Instruction of {external_id}.")
    if fields:
        Task.objects.filter(pk=made.pk).update(**fields)
        made.refresh_from_db()
    return made


def tasks(n, prefix="t"):
    return [task(f"{prefix}-{i:02d}") for i in range(n)]


def drawn(sample) -> list[str]:
    return list(sample.items.order_by("position").values_list("revision__task__external_id", flat=True))


def draw(user, size=3, pool=None, seed=11, name="study"):
    return quality.draw_sample(name=name, size=size, pool=pool or {}, seed=seed, user=user)


def rate_url(sample, item):
    return reverse("review:quality_rate", args=[sample.pk, item.pk])


def sample_url(sample):
    return reverse("review:quality_sample", args=[sample.pk])


# --- drawing ---------------------------------------------------------------------------------------------------


def test_draw_is_uniform_without_replacement_and_reproducible_from_the_seed(admin_user):
    made = tasks(10)
    first = draw(admin_user, size=4, seed=2024)
    again = draw(admin_user, size=4, seed=2024, name="again")
    ordered = sorted(made, key=lambda t: t.pk)
    expected = [t.external_id for t in random.Random(2024).sample(ordered, 4)]
    assert drawn(first) == drawn(again) == expected
    assert len(set(expected)) == 4
    assert list(first.items.values_list("position", flat=True)) == [1, 2, 3, 4]
    assert (first.seed, first.pool_size, first.requested_size, first.pool, first.whole_pool) == (2024, 10, 4, {}, False)
    assert first.pool_description == "All tasks" and first.created_by == admin_user


def test_a_draw_without_seed_makes_one_up_and_keeps_it(admin_user):
    tasks(5)
    sample = quality.draw_sample(name="no seed", size=2, pool={}, user=admin_user)
    assert 0 <= sample.seed < quality.DRAWN_SEED_BELOW
    repeat = draw(admin_user, size=2, seed=sample.seed, name="repeat")
    assert drawn(repeat) == drawn(sample)


def test_asking_for_more_than_the_pool_takes_the_whole_pool(admin_user):
    made = tasks(3)
    sample = draw(admin_user, size=10)
    assert sorted(drawn(sample)) == sorted(t.external_id for t in made)
    assert sample.whole_pool and sample.pool_size == 3 and sample.requested_size == 10
    assert quality.size_note(sample) == (
        "10 tasks were asked for but the pool held only 3: the sample is the whole pool"
    )


def test_an_empty_pool_is_an_error_and_draws_nothing(admin_user):
    Task.objects.create(external_id="no-revision-yet")  # nothing to rate: never in a pool
    with pytest.raises(quality.EmptyPool, match=r"the pool is empty: no task with a revision matches it \(All tasks\)"):
        draw(admin_user)
    task("drafty", status=Task.Status.DRAFT)
    with pytest.raises(quality.EmptyPool, match="Status Ready"):
        draw(admin_user, pool={"task_status": "ready"})
    assert not QualitySample.objects.exists()


def test_pool_filters_and_their_description(admin_user, benchmark):
    analysis = BenchmarkCategory.objects.get(slug="analysis-reasoning")
    accepted = task("accepted", benchmark_category=analysis)
    waiting = task("waiting", benchmark_category=analysis, source=Task.Source.PERSONA)
    task("not-a-candidate", benchmark_category=analysis)
    task("draft-one", status=Task.Status.DRAFT)
    propose_candidates(benchmark, [accepted, waiting], user=admin_user)
    BenchmarkCandidate.objects.filter(task=accepted).update(status=BenchmarkCandidate.Status.ACCEPTED)

    def pool_of(**pool):
        return sorted(quality.pool_tasks(quality.clean_pool(pool)).values_list("external_id", flat=True))

    assert pool_of(benchmark="claw-bench") == ["accepted", "waiting"]
    assert pool_of(benchmark="claw-bench", candidate_status="accepted") == ["accepted"]
    assert pool_of(category="analysis-reasoning") == ["accepted", "not-a-candidate", "waiting"]
    assert pool_of(task_status="draft") == ["draft-one"]
    assert pool_of(source="persona", category="analysis-reasoning") == ["waiting"]
    assert pool_of(benchmark="", source=None) == pool_of()  # empty filters are no filters

    sample = draw(
        admin_user,
        pool={
            "benchmark": "claw-bench",
            "candidate_status": "accepted",
            "task_status": "ready",
            "category": "analysis-reasoning",
            "source": "imported",
        },
    )
    assert drawn(sample) == ["accepted"]
    assert sample.pool_description == (
        "Candidates of claw-bench (accepted); status Ready; category Analysis & Reasoning; source Imported"
    )


@pytest.mark.parametrize(
    "pool, message",
    [
        ({"benchmark": "nope"}, "no benchmark is named 'nope'"),
        ({"candidate_status": "accepted"}, "a candidate status filter needs a benchmark"),
        ({"benchmark": "claw-bench", "candidate_status": "great"}, "'great' is not a candidate status"),
        ({"task_status": "shiny"}, "'shiny' is not a task status"),
        ({"source": "moon"}, "'moon' is not a source"),
        ({"category": "cooking"}, "no benchmark category has the slug 'cooking'"),
        ({"colour": "red"}, "unknown pool filter"),
    ],
)
def test_bad_pool_filters_are_refused(admin_user, benchmark, pool, message):
    task("t-1")
    with pytest.raises(ReviewError, match=message):
        draw(admin_user, pool=pool)


def test_drawing_needs_an_admin_and_sane_numbers(admin_user, reviewer):
    task("t-1")
    with pytest.raises(NotAllowed, match="needs the admin role"):
        draw(reviewer)
    with pytest.raises(ReviewError, match="from 1 to"):
        draw(admin_user, size=0)
    with pytest.raises(ReviewError, match="the seed must be"):
        draw(admin_user, seed=-1)
    with pytest.raises(ReviewError, match="needs a name"):
        draw(admin_user, name="  ")
    assert not QualitySample.objects.exists()


def test_items_pin_the_revision_current_at_drawing_time(admin_user, reviewer, reviewer_client):
    made = task("t-1")
    drawn_revision = made.current_revision
    sample = draw(admin_user)
    revise_task(made, user=admin_user, message="later", instruction="A changed instruction.")
    item = sample.items.get()
    assert item.revision == drawn_revision and made.revisions.count() == 2
    page = reviewer_client.get(rate_url(sample, item)).content.decode()
    assert "Instruction of t-1." in page and "A changed instruction." not in page
    assert 'data-testid="newer-revision"' in page and "it is now at r2" in page


# --- rating ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, 6, "3", None, 3.5, True])
def test_scores_must_be_whole_numbers_from_1_to_5(admin_user, reviewer, bad):
    task("t-1")
    item = draw(admin_user).items.get()
    with pytest.raises(ReviewError, match=r"Execution feasibility needs a whole-number score from 1 to 5"):
        quality.rate_item(item, SCORES | {"feasibility": bad}, user=reviewer)
    assert not QualityRating.objects.exists()


def test_every_dimension_is_needed_and_no_other(admin_user, reviewer):
    task("t-1")
    item = draw(admin_user).items.get()
    without = {k: v for k, v in SCORES.items() if k != "verification"}
    with pytest.raises(ReviewError, match="Verification quality needs"):
        quality.rate_item(item, without, user=reviewer)
    with pytest.raises(ReviewError, match="unknown dimension"):
        quality.rate_item(item, SCORES | {"beauty": 5}, user=reviewer)


def test_the_database_refuses_scores_out_of_range_and_a_second_rating(admin_user, reviewer):
    task("t-1")
    item = draw(admin_user).items.get()
    with pytest.raises(IntegrityError), transaction.atomic():
        QualityRating.objects.create(item=item, reviewer=reviewer, **(SCORES | {"verification": 6}))
    QualityRating.objects.create(item=item, reviewer=reviewer, **SCORES)
    with pytest.raises(IntegrityError), transaction.atomic():
        QualityRating.objects.create(item=item, reviewer=reviewer, **SCORES)


def test_rating_again_updates_the_reviewers_one_rating(admin_user, reviewer):
    task("t-1")
    item = draw(admin_user).items.get()
    first, created = quality.rate_item(item, SCORES, user=reviewer, comment=" unclear output name ")
    assert created and first.comment == "unclear output name"
    second, created = quality.rate_item(item, SCORES | {"reasonableness": 1}, user=reviewer)
    assert not created and second.pk == first.pk
    stored = QualityRating.objects.get()
    assert stored.reasonableness == 1 and stored.comment == "" and stored.updated_at >= stored.created_at


def test_rating_needs_the_reviewer_role(admin_user, viewer):
    task("t-1")
    item = draw(admin_user).items.get()
    with pytest.raises(NotAllowed):
        quality.rate_item(item, SCORES, user=viewer)


def test_next_unrated_item_goes_forward_and_wraps_round(admin_user, reviewer):
    tasks(4)
    sample = draw(admin_user, size=4)
    items = list(sample.items.order_by("position"))
    quality.rate_item(items[1], SCORES, user=reviewer)
    assert quality.next_unrated_item(sample, reviewer) == items[0]
    assert quality.next_unrated_item(sample, reviewer, after=1) == items[2]
    assert quality.next_unrated_item(sample, reviewer, after=4) == items[0]
    for item in items:
        quality.rate_item(item, SCORES, user=reviewer)
    assert quality.next_unrated_item(sample, reviewer) is None


# --- statistics ------------------------------------------------------------------------------------------------


def scores(r, f, c, v) -> dict:
    return {"reasonableness": r, "feasibility": f, "resource_consistency": c, "verification": v}


def test_stats_match_hand_computed_numbers(admin_user, reviewer, second_reviewer):
    tasks(3)
    sample = draw(admin_user)
    one, two, _three = sample.items.order_by("position")
    quality.rate_item(one, scores(5, 4, 3, 2), user=reviewer)
    quality.rate_item(one, scores(4, 4, 1, 2), user=second_reviewer)
    quality.rate_item(two, scores(3, 1, 5, 2), user=reviewer)

    stats = quality.sample_stats(sample)
    by_field = {d.field: d for d in stats.dimensions}
    # reasonableness 5, 4, 3: mean 4; deviations 1, 0, -1 -> variance 2 / (3 - 1) = 1
    assert (by_field["reasonableness"].n, by_field["reasonableness"].mean) == (3, 4.0)
    assert by_field["reasonableness"].std == pytest.approx(1.0)
    # feasibility 4, 4, 1: mean 3; deviations 1, 1, -2 -> variance 6 / 2 = 3
    assert by_field["feasibility"].mean == 3.0 and by_field["feasibility"].std == pytest.approx(math.sqrt(3))
    # resource consistency 3, 1, 5: mean 3; deviations 0, -2, 2 -> variance 8 / 2 = 4
    assert by_field["resource_consistency"].mean == 3.0 and by_field["resource_consistency"].std == pytest.approx(2.0)
    assert by_field["verification"].mean == 2.0 and by_field["verification"].std == 0.0
    assert by_field["feasibility"].counts == {1: 1, 2: 0, 3: 0, 4: 2, 5: 0}
    assert [d.label for d in stats.dimensions] == [
        "Task reasonableness",
        "Execution feasibility",
        "Resource consistency",
        "Verification quality",
    ]
    assert (stats.items, stats.items_rated, stats.ratings) == (3, 2, 3)
    assert stats.raters == [("rita_reviewer", 2), ("rob_reviewer", 1)]
    as_json = stats.as_dict()
    assert as_json["dimensions"][2] == {
        "dimension": "resource_consistency",
        "label": "Resource consistency",
        "n": 3,
        "mean": 3.0,
        "std": pytest.approx(2.0),
        "counts": {"1": 1, "2": 0, "3": 1, "4": 0, "5": 1},
    }


def test_stats_with_one_rating_have_no_std_and_without_ratings_no_mean(admin_user, reviewer):
    task("t-1")
    sample = draw(admin_user)
    empty = quality.sample_stats(sample).dimensions[0]
    assert (empty.n, empty.mean, empty.std) == (0, None, None)
    quality.rate_item(sample.items.get(), SCORES, user=reviewer)
    single = {d.field: d for d in quality.sample_stats(sample).dimensions}
    assert (single["resource_consistency"].n, single["resource_consistency"].mean) == (1, 5.0)
    assert all(d.std is None for d in single.values())


def test_a_deleted_reviewers_ratings_still_count(admin_user, reviewer):
    task("t-1")
    sample = draw(admin_user)
    quality.rate_item(sample.items.get(), SCORES, user=reviewer)
    reviewer.delete()
    stats = quality.sample_stats(sample)
    assert stats.ratings == 1 and stats.raters == [("(deleted user)", 1)]


# --- pages -----------------------------------------------------------------------------------------------------


@pytest.fixture
def sample(admin_user):
    tasks(3)
    return draw(admin_user, name="first study")


def test_page_roles(client, outsider_client, viewer_client, reviewer_client, sample):
    item = sample.items.first()
    urls = [reverse("review:quality_list"), sample_url(sample), rate_url(sample, item)]
    for url in urls:
        response = client.get(url)
        assert response.status_code == 302 and "/login/" in response["Location"]
        assert outsider_client.get(url).status_code == 403
    assert viewer_client.get(urls[0]).status_code == 200
    assert viewer_client.get(urls[1]).status_code == 200
    assert viewer_client.get(urls[2]).status_code == 403
    assert viewer_client.post(urls[2], SCORES).status_code == 403
    assert reviewer_client.get(urls[2]).status_code == 200
    for who in (viewer_client, reviewer_client):
        assert who.post(reverse("review:quality_create"), {"name": "x", "size": 1}).status_code == 403
    assert QualitySample.objects.count() == 1 and not QualityRating.objects.exists()


def test_list_shows_samples_progress_and_the_draw_form_to_admins_only(admin_client, viewer_client, reviewer, sample):
    quality.rate_item(sample.items.first(), SCORES, user=reviewer)
    page = viewer_client.get(reverse("review:quality_list")).content.decode()
    assert "first study" in page and "All tasks" in page and 'href="/review/quality/"' in page
    assert "Draw a sample" not in page and "Rated by you" not in page
    page = admin_client.get(reverse("review:quality_list")).content.decode()
    assert "Draw a sample" in page and "0 / 3" in page and "Task reasonableness" in page


def test_admin_draws_a_sample_from_the_page(admin_client, benchmark):
    made = tasks(4)
    propose_candidates(benchmark, made[:2], user=None)
    response = admin_client.post(
        reverse("review:quality_create"),
        {"name": "bench study", "size": "5", "seed": "99", "benchmark": "claw-bench", "task_status": "ready"},
    )
    sample = QualitySample.objects.get()
    assert response.status_code == 302 and response["Location"] == sample_url(sample)
    assert sample.pool == {"benchmark": "claw-bench", "task_status": "ready"} and sample.seed == 99
    assert sorted(drawn(sample)) == ["t-00", "t-01"]
    page = admin_client.get(response["Location"]).content.decode()
    assert "5 tasks were asked for but the pool held only 2: the sample is the whole pool" in page
    assert "<code>random.Random(99).sample(pool ids in id order, 2)</code>" in page  # what was drawn, as it was
    assert "Candidates of claw-bench; status Ready" in page and 'data-testid="seed">99<' in page


def test_bad_draw_input_shows_errors_in_place_and_draws_nothing(admin_client, benchmark):
    url = reverse("review:quality_create")
    response = admin_client.post(url, {"name": "", "size": "0", "candidate_status": "accepted"})
    page = response.content.decode()
    assert response.status_code == 400
    assert "This field is required." in page and "greater than or equal to 1" in page
    assert "Pick the benchmark whose candidates to draw from." in page
    assert '<details class="card draw-card" id="draw" open>' in page  # the form stays open with the errors
    response = admin_client.post(url, {"name": "empty", "size": "3", "benchmark": "claw-bench"})
    assert response.status_code == 400
    assert "Nothing was drawn: the pool is empty" in response.content.decode()
    assert 'value="empty"' in response.content.decode()  # what was typed is kept
    assert not QualitySample.objects.exists()


def test_sample_page_shows_the_stats_table_and_my_ratings(viewer_client, reviewer_client, reviewer, sample):
    first, second, _ = sample.items.order_by("position")
    quality.rate_item(first, SCORES, user=reviewer)
    quality.rate_item(second, SCORES | {"reasonableness": 2}, user=reviewer)
    page = reviewer_client.get(sample_url(sample)).content.decode()
    assert 'data-testid="my-progress">You have rated 2 of 3 items.' in page
    assert 'data-stat="mean">3.00<' in page and 'data-stat="std">1.41<' in page  # reasonableness 4, 2
    assert "4 · 3 · 5 · 2" in page and "not rated" in page
    assert rate_url(sample, sample.items.get(position=3)) in page  # "continue rating" goes to the unrated one
    viewer_page = viewer_client.get(sample_url(sample)).content.decode()
    assert 'data-testid="stats-table"' in viewer_page and "Continue rating" not in viewer_page
    partial = reviewer_client.get(sample_url(sample), headers={"HX-Request": "true"}).content.decode()
    assert partial.lstrip().startswith("<section") and "<html" not in partial and 'id="stats"' in partial


def test_rate_page_shows_the_task_at_its_revision_and_the_four_dimensions(reviewer_client, sample):
    item = sample.items.get(position=1)
    revision = item.revision
    page = reviewer_client.get(rate_url(sample, item)).content.decode()
    assert f"Instruction of {revision.task.external_id}." in page
    assert reverse("tasks:file", args=[revision.task.external_id, revision.number, "input", "sales.csv"]) in page
    assert f"?rev={revision.number}" in page and "reward/check.py" in page
    for label in ("Task reasonableness", "Execution feasibility", "Resource consistency", "Verification quality"):
        assert label in page
    assert page.count('type="radio"') == 20 and "Item 1 of 3" in page


def test_saving_moves_to_the_next_unrated_item_then_back_to_the_sample(reviewer_client, reviewer, sample):
    one, two, three = sample.items.order_by("position")
    quality.rate_item(two, SCORES, user=reviewer)
    response = reviewer_client.post(rate_url(sample, one), SCORES | {"comment": "fine"})
    assert response.status_code == 302 and response["Location"] == rate_url(sample, three)  # skips rated #2
    response = reviewer_client.post(rate_url(sample, three), SCORES)
    assert response.status_code == 302 and response["Location"] == sample_url(sample)
    assert "You have rated every item" in reviewer_client.get(response["Location"]).content.decode()
    assert QualityRating.objects.filter(reviewer=reviewer).count() == 3
    assert QualityRating.objects.get(item=one).comment == "fine"


def test_rate_page_shows_my_earlier_rating_and_changing_it_updates_it(reviewer_client, reviewer, sample):
    item = sample.items.get(position=1)
    quality.rate_item(item, SCORES, user=reviewer, comment="first look")
    page = reviewer_client.get(rate_url(sample, item)).content.decode()
    assert 'name="reasonableness" value="4" id="id_reasonableness_3" required checked' in page
    assert page.count(" checked>") == 4
    assert "first look" in page and 'data-testid="rated-at"' in page
    reviewer_client.post(rate_url(sample, item), SCORES | {"reasonableness": "1"})
    assert QualityRating.objects.get().reasonableness == 1


def test_form_errors_are_shown_in_place_and_nothing_is_saved(reviewer_client, sample):
    item = sample.items.get(position=1)
    response = reviewer_client.post(rate_url(sample, item), {"reasonableness": "4", "feasibility": "9"})
    page = response.content.decode()
    assert response.status_code == 400
    assert "Select a valid choice. 9 is not one of the available choices." in page
    assert "Give resource consistency a score from 1 to 5." in page
    assert "Give verification quality a score from 1 to 5." in page
    assert 'class="dimension invalid" data-dimension="verification"' in page
    assert 'name="reasonableness" value="4" id="id_reasonableness_3" required checked' in page  # kept
    assert page.count(" checked>") == 1
    assert not QualityRating.objects.exists()


def test_htmx_saving_fetches_the_next_item_and_errors_swap_the_panel(reviewer_client, sample):
    one, two, _ = sample.items.order_by("position")
    htmx = {"HX-Request": "true"}
    response = reviewer_client.post(rate_url(sample, one), SCORES, headers=htmx)
    assert response.status_code == 204
    location = json.loads(response["HX-Location"])
    assert location == {
        "path": rate_url(sample, two),
        "target": "#rate-panel",
        "select": "#rate-panel",
        "swap": "outerHTML",
    }
    panel = reviewer_client.get(location["path"], headers=htmx).content.decode()
    assert (
        panel.lstrip().startswith("<title>t-0") and '<div id="rate-panel"' in panel and "Saved your rating of" in panel
    )
    assert "Item 2 of 3" in panel and "<html" not in panel
    response = reviewer_client.post(rate_url(sample, two), {"reasonableness": "3"}, headers=htmx)
    assert response.status_code == 200 and "Give execution feasibility a score" in response.content.decode()
    assert QualityRating.objects.count() == 1


def test_htmx_saving_the_last_item_redirects_to_the_sample(reviewer_client, reviewer, sample):
    *rest, last = sample.items.order_by("position")
    for item in rest:
        quality.rate_item(item, SCORES, user=reviewer)
    response = reviewer_client.post(rate_url(sample, last), SCORES, headers={"HX-Request": "true"})
    assert response.status_code == 204 and response["HX-Redirect"] == sample_url(sample)


def test_an_item_of_another_sample_is_404(admin_user, reviewer_client, sample):
    other = draw(admin_user, name="other")
    assert reviewer_client.get(rate_url(sample, other.items.first())).status_code == 404
    assert reviewer_client.get(reverse("review:quality_sample", args=[9999])).status_code == 404


def test_admin_pages_list_samples_and_ratings(admin_client, reviewer, sample):
    quality.rate_item(sample.items.first(), SCORES, user=reviewer)
    assert "first study" in admin_client.get("/admin/review/qualitysample/").content.decode()
    assert admin_client.get(f"/admin/review/qualitysample/{sample.pk}/change/").status_code == 200
    assert "rita_reviewer" in admin_client.get("/admin/review/qualityrating/").content.decode()


# --- API -------------------------------------------------------------------------------------------------------

SAMPLES = "/api/quality-samples/"
RATINGS = "/api/quality-ratings/"


@pytest.mark.parametrize(
    "who, read, rate, create",
    [
        ("outsider", 403, 403, 403),
        ("viewer", 200, 403, 403),
        ("reviewer", 200, 201, 403),
        ("admin_user", 200, 201, 201),
    ],
)
def test_api_roles(request, api_as, sample, who, read, rate, create):
    client = api_as(request.getfixturevalue(who))
    assert client.get(SAMPLES).status_code == read
    assert client.get(f"{SAMPLES}{sample.pk}/stats/").status_code == read
    assert client.get("/api/quality-items/").status_code == read
    assert client.get(RATINGS).status_code == read
    item = sample.items.first()
    assert client.post(RATINGS, {"item": item.pk, **SCORES}, format="json").status_code == rate
    assert client.post(SAMPLES, {"name": f"by {who}", "size": 1}, format="json").status_code == create


def test_api_anonymous_is_refused(client, sample):
    assert client.get(SAMPLES).status_code in (401, 403)


def test_api_draws_a_sample(api_as, admin_user, benchmark):
    made = tasks(5)
    propose_candidates(benchmark, made, user=admin_user)
    client = api_as(admin_user)
    body = {"name": "api study", "size": 3, "seed": 5, "pool": {"benchmark": "claw-bench", "task_status": "ready"}}
    response = client.post(SAMPLES, body, format="json")
    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["size"] == 3 and data["seed"] == 5 and data["pool_size"] == 5 and data["whole_pool"] is False
    assert data["pool"] == {"benchmark": "claw-bench", "task_status": "ready"} and data["created_by"] == "ada_admin"
    items = client.get("/api/quality-items/", {"sample": data["id"]}).json()["results"]
    assert [i["task"] for i in items] == drawn(QualitySample.objects.get(pk=data["id"]))
    assert [i["position"] for i in items] == [1, 2, 3] and items[0]["revision"] == 1


@pytest.mark.parametrize(
    "body, field",
    [
        ({"name": "x", "size": 0}, "size"),
        ({"name": "x", "size": 2, "pool": {"task_status": "shiny"}}, "pool"),
        ({"size": 2}, "name"),
    ],
)
def test_api_bad_sample_input_is_400(api_as, admin_user, body, field):
    task("t-1")
    response = api_as(admin_user).post(SAMPLES, body, format="json")
    assert response.status_code == 400 and field in response.json()


def test_api_refusals_of_the_service_are_400_with_the_reason(api_as, admin_user):
    client = api_as(admin_user)
    response = client.post(SAMPLES, {"name": "x", "size": 2}, format="json")
    assert response.status_code == 400 and "the pool is empty" in response.json()["detail"]
    task("t-1")
    response = client.post(SAMPLES, {"name": "x", "size": 2, "pool": {"benchmark": "nope"}}, format="json")
    assert response.status_code == 400 and response.json()["detail"] == "no benchmark is named 'nope'"
    assert not QualitySample.objects.exists()


def test_api_rating_creates_then_updates_and_stats_follow(api_as, reviewer, second_reviewer, sample):
    item = sample.items.get(position=1)
    client = api_as(reviewer)
    response = client.post(RATINGS, {"item": item.pk, **SCORES, "comment": "ok"}, format="json")
    assert response.status_code == 201
    assert response.json() | {"id": 0, "created_at": "", "updated_at": ""} == {
        "id": 0,
        "sample": sample.pk,
        "item": item.pk,
        "reviewer": "rita_reviewer",
        **SCORES,
        "comment": "ok",
        "created_at": "",
        "updated_at": "",
    }
    response = client.post(RATINGS, {"item": item.pk, **SCORES, "verification": 5}, format="json")
    assert response.status_code == 200 and response.json()["verification"] == 5
    assert QualityRating.objects.count() == 1
    api_as(second_reviewer).post(RATINGS, {"item": item.pk, **SCORES, "verification": 1}, format="json")

    stats = client.get(f"{SAMPLES}{sample.pk}/stats/").json()
    verification = next(d for d in stats["dimensions"] if d["dimension"] == "verification")
    assert verification == {
        "dimension": "verification",
        "label": "Verification quality",
        "n": 2,
        "mean": 3.0,
        "std": pytest.approx(math.sqrt(8)),
        "counts": {"1": 1, "2": 0, "3": 0, "4": 0, "5": 1},
    }
    assert stats["items_rated"] == 1 and stats["raters"] == [
        {"reviewer": "rita_reviewer", "ratings": 1},
        {"reviewer": "rob_reviewer", "ratings": 1},
    ]
    mine = client.get(RATINGS, {"sample": sample.pk, "mine": "true"}).json()["results"]
    assert [r["reviewer"] for r in mine] == ["rita_reviewer"]
    assert len(client.get(RATINGS, {"reviewer": "rob_reviewer"}).json()["results"]) == 1
    assert client.get(RATINGS, {"sample": "abc"}).status_code == 400


@pytest.mark.parametrize("bad", [{"feasibility": 6}, {"feasibility": 0}, {"feasibility": None}, {"item": 9999}])
def test_api_bad_ratings_are_400(api_as, reviewer, sample, bad):
    body = {"item": sample.items.first().pk, **SCORES} | bad
    response = api_as(reviewer).post(RATINGS, body, format="json")
    assert response.status_code == 400 and next(iter(bad)) in response.json()
    assert not QualityRating.objects.exists()


# --- command ---------------------------------------------------------------------------------------------------


def run(*args) -> str:
    out = StringIO()
    call_command("quality_sample", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_command_draws_a_sample_and_prints_json(db):
    made = tasks(6)
    Task.objects.filter(pk=made[0].pk).update(status=Task.Status.DRAFT)
    out = run("--name", "cli study", "--size", "3", "--seed", "42", "--status", "ready", "--json")
    result = json.loads(out.strip().splitlines()[-1])
    sample = QualitySample.objects.get()
    assert result | {"items": []} == {
        "id": sample.pk,
        "name": "cli study",
        "pool": {"task_status": "ready"},
        "pool_description": "Status Ready",
        "pool_size": 5,
        "requested_size": 3,
        "size": 3,
        "whole_pool": False,
        "seed": 42,
        "items": [],
    }
    assert [row["task"] for row in result["items"]] == drawn(sample)
    assert result["items"][0] == {"position": 1, "task": drawn(sample)[0], "revision": 1}
    assert sample.created_by is None
    again = json.loads(
        run("--name", "again", "--size", "3", "--seed", "42", "--status", "ready", "--json").strip().splitlines()[-1]
    )
    assert again["items"] == result["items"]


def test_command_reports_the_table(admin_user, reviewer, second_reviewer):
    tasks(2)
    sample = draw(admin_user)
    first = sample.items.get(position=1)
    quality.rate_item(first, SCORES, user=reviewer)
    quality.rate_item(first, SCORES | {"reasonableness": 2}, user=second_reviewer)
    out = run("--report", str(sample.pk))
    assert "2 ratings by 2 reviewers; 1 of 2 items rated at least once" in out
    assert "Task reasonableness" in out and "3.00   1.41" in out
    result = json.loads(run("--report", str(sample.pk), "--json").strip().splitlines()[-1])
    assert result["id"] == sample.pk and result["size"] == 2
    reasonableness = result["stats"]["dimensions"][0]
    assert (reasonableness["n"], reasonableness["mean"]) == (2, 3.0)
    assert reasonableness["std"] == pytest.approx(math.sqrt(2))


def test_command_errors(db):
    with pytest.raises(CommandError, match="needs --name and --size"):
        run("--name", "x")
    with pytest.raises(CommandError, match="the pool is empty"):
        run("--name", "x", "--size", "2")
    task("t-1")
    with pytest.raises(CommandError, match="no benchmark is named 'nope'"):
        run("--name", "x", "--size", "2", "--benchmark", "nope")
    with pytest.raises(CommandError, match="no quality sample has the id 7"):
        run("--report", "7")
    assert not QualitySample.objects.exists()
