"""Pages of quality sampling: the samples (admins draw new ones), one sample's statistics and items, and the rating
page that walks a reviewer through the items they have not rated yet. Viewers see the numbers; reviewers rate."""

import json

from django.contrib import messages
from django.db.models import Count
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from accounts.decorators import admin_required, reviewer_required, viewer_required
from lib.htmx import render_page
from review import quality
from review.forms import RatingForm, SampleForm
from review.models import (
    QUALITY_DIMENSIONS,
    QUALITY_SCALE,
    QualityRating,
    QualitySample,
    QualitySampleItem,
)
from review.services import ReviewError
from tasks.views import checker_files, files_by_role

# --- the samples -----------------------------------------------------------------------------------------------


def _list_page(request, form, status=200):
    context = {
        "nav": "review",
        "samples": quality.samples_with_progress(request.user),
        "form": form,
        "dimensions": QUALITY_DIMENSIONS,
    }
    return render_page(request, "review/quality_list.html", context, status=status)


@viewer_required
@require_GET
def quality_list(request):
    return _list_page(request, SampleForm())


@admin_required
@require_POST
def quality_create(request):
    form = SampleForm(request.POST)
    if form.is_valid():
        data = form.cleaned_data
        try:
            sample = quality.draw_sample(
                name=data["name"], size=data["size"], seed=data["seed"], pool=form.pool(), user=request.user
            )
        except ReviewError as exc:
            form.add_error(None, f"Nothing was drawn: {exc}.")
        else:
            messages.success(request, f"Drew “{sample.name}”: {quality.size_note(sample)}.")
            return redirect("review:quality_sample", pk=sample.pk)
    return _list_page(request, form, status=400)


@viewer_required
@require_GET
def quality_sample(request, pk: int):
    sample = get_object_or_404(QualitySample.objects.select_related("created_by"), pk=pk)
    items = list(
        sample.items.select_related("revision__task__benchmark_category").annotate(rating_count=Count("ratings"))
    )
    mine = {r.item_id: r for r in QualityRating.objects.filter(item__sample=sample, reviewer=request.user)}
    for item in items:
        item.my_rating = mine.get(item.pk)
    context = {
        "nav": "review",
        "sample": sample,
        "size_note": quality.size_note(sample),
        "stats": quality.sample_stats(sample),
        "items": items,
        "my_rated": len(mine),
        "next_item": quality.next_unrated_item(sample, request.user),
        "dimensions": QUALITY_DIMENSIONS,
        "scale": QUALITY_SCALE,
    }
    return render_page(request, "review/quality_sample.html", context, partial="stats")


# --- rating ----------------------------------------------------------------------------------------------------


def _rate_page(request, sample, item, form, rating, status=200):
    revision = item.revision
    task = revision.task
    items = list(sample.items.values_list("pk", "position"))
    neighbours = {position: pk for pk, position in items}
    groups = files_by_role(revision)
    context = {
        "nav": "review",
        "sample": sample,
        "item": item,
        "task": task,
        "revision": revision,
        "is_current": revision.pk == task.current_revision_id,
        "current_number": task.current_revision.number if task.current_revision_id else None,
        "groups": groups,
        "checker_files": checker_files(groups),
        "form": form,
        "rating": rating,
        "total": len(items),
        "my_rated": QualityRating.objects.filter(item__sample=sample, reviewer=request.user).count(),
        "previous_pk": neighbours.get(item.position - 1),
        "next_pk": neighbours.get(item.position + 1),
        # The panel alone replaces the one on show (render_page sends the whole page on a history restore).
        "swapped": bool(request.htmx) and not request.htmx.history_restore_request,
    }
    return render_page(request, "review/quality_rate.html", context, partial="panel", status=status)


@reviewer_required
@require_http_methods(["GET", "POST"])
def quality_rate(request, pk: int, item_pk: int):
    """Rate one item. Saving moves on to the next item this reviewer has not rated, or back to the sample when
    none is left; htmx swaps just the rating panel and keeps the address bar in step."""
    sample = get_object_or_404(QualitySample, pk=pk)
    item = get_object_or_404(
        QualitySampleItem.objects.select_related(
            "revision__task__benchmark_category", "revision__task__current_revision", "revision__author_user"
        ),
        pk=item_pk,
        sample=sample,
    )
    rating = QualityRating.objects.filter(item=item, reviewer=request.user).first()
    if request.method == "GET":
        form = RatingForm(initial={**rating.scores(), "comment": rating.comment} if rating else None)
        return _rate_page(request, sample, item, form, rating)
    form = RatingForm(request.POST)
    if form.is_valid():
        try:
            quality.rate_item(item, form.scores(), user=request.user, comment=form.cleaned_data["comment"])
        except ReviewError as exc:
            form.add_error(None, str(exc))
        else:
            return _after_rating(request, sample, item)
    # htmx swaps 2xx responses only: the form with its errors must still replace the panel.
    return _rate_page(request, sample, item, form, rating, status=200 if request.htmx else 400)


def _after_rating(request, sample, item):
    task = item.revision.task.external_id
    following = quality.next_unrated_item(sample, request.user, after=item.position)
    if following is None:
        messages.success(request, f"Saved your rating of {task}. You have rated every item of this sample.")
        url = reverse("review:quality_sample", args=[sample.pk])
        if request.htmx:
            response = HttpResponse(status=204)
            response["HX-Redirect"] = url
            return response
        return redirect(url)
    messages.success(request, f"Saved your rating of {task}; next: item {following.position}.")
    url = reverse("review:quality_rate", args=[sample.pk, following.pk])
    if request.htmx:
        # htmx fetches the next item's panel itself and pushes its address into the history.
        response = HttpResponse(status=204)
        response["HX-Location"] = json.dumps(
            {"path": url, "target": "#rate-panel", "select": "#rate-panel", "swap": "outerHTML"}
        )
        return response
    return redirect(url)
