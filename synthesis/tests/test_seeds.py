"""Persona route seeds: the shipped personas and operations (loaded by migration), persona import (Persona Hub
JSONL, plain text, deduplication, failures by line) and its command, and the admin pages of the seeds."""

import io
import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from synthesis.models import AtomicOperation, OperationCategory, Persona
from synthesis.seed_files import (
    SHIPPED_SOURCE,
    SeedError,
    load_operations,
    persona_hash,
    read_operations,
    shipped_personas,
)
from synthesis.services import import_personas

pytestmark = pytest.mark.django_db


def run_import(*args):
    out, err = StringIO(), StringIO()
    call_command("import_personas", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


# --- what ships -----------------------------------------------------------------------------------------------


def test_the_migration_loads_the_shipped_personas_and_operations():
    texts = shipped_personas()
    assert len(texts) >= 200
    assert Persona.objects.filter(source=SHIPPED_SOURCE, enabled=True).count() == len(texts)
    # No two shipped personas are the same once case and white space are folded.
    assert len({persona_hash(t) for t in texts}) == len(texts)
    assert all(len(t) >= 40 for t in texts), "each persona is a concrete sentence"

    assert 25 <= AtomicOperation.objects.count() <= 30
    assert 7 <= OperationCategory.objects.count() <= 8
    network = set(AtomicOperation.objects.filter(needs_network=True).values_list("slug", flat=True))
    assert {"fetch-web-page", "send-email"} <= network and len(network) <= 5
    assert all(op.description for op in AtomicOperation.objects.all())
    assert list(OperationCategory.objects.values_list("slug", flat=True)[:2]) == ["file-handling", "document-editing"]


def test_loading_the_operations_again_updates_by_slug_and_keeps_added_ones():
    extra = AtomicOperation.objects.create(
        category=OperationCategory.objects.get(slug="computation"), slug="my-own", name="My own operation"
    )
    AtomicOperation.objects.filter(slug="send-email").update(name="renamed by hand", needs_network=False)
    before = AtomicOperation.objects.count()

    assert load_operations() == len([o for c in read_operations() for o in c["operations"]])

    assert AtomicOperation.objects.count() == before
    restored = AtomicOperation.objects.get(slug="send-email")
    assert restored.name == "Send an email" and restored.needs_network
    assert AtomicOperation.objects.filter(pk=extra.pk).exists()


def test_a_malformed_operations_file_is_refused_saying_where(tmp_path):
    bad = tmp_path / "ops.yaml"
    bad.write_text("categories:\n  - slug: a\n    name: A\n    operations:\n      - slug: x\n        name: X\n")
    with pytest.raises(SeedError, match="lacks a slug, name or description"):
        read_operations(bad)
    bad.write_text(
        "categories:\n  - slug: a\n    name: A\n    operations:\n"
        "      - {slug: x, name: X, description: d}\n      - {slug: x, name: Y, description: e}\n"
    )
    with pytest.raises(SeedError, match="'x' is listed twice"):
        read_operations(bad)


# --- importing personas ---------------------------------------------------------------------------------------


def test_persona_hub_jsonl_imports_new_ones_and_reports_each_bad_line(tmp_path):
    shipped = shipped_personas()[0]
    lines = [
        json.dumps({"persona": "A beekeeper in Ljubljana who sells comb honey at a market."}),
        "",
        '{"persona": "broken',  # line 3: not JSON
        json.dumps({"name": "no persona key"}),  # line 4
        json.dumps({"persona": "   "}),  # line 5: empty
        json.dumps({"persona": "  " + shipped.upper() + "  "}),  # the shipped one, in other case and spacing
        json.dumps({"persona": "A  beekeeper in LJUBLJANA who sells comb honey at a market."}),  # same as line 1
        json.dumps(["a list"]),  # line 8
        json.dumps({"persona": "A retired ferry captain in Split who repairs fishing nets.", "id": 7}),
    ]
    path = tmp_path / "persona.jsonl"
    path.write_text("\n".join(lines) + "\n")
    before = Persona.objects.count()

    report = import_personas(path).as_dict()

    assert report["imported"] == 2 and report["updated"] == 0 and report["unchanged"] == 2
    assert [f["source"] for f in report["failed"]] == [
        "persona.jsonl:3",
        "persona.jsonl:4",
        "persona.jsonl:5",
        "persona.jsonl:8",
    ]
    assert report["failed"][0]["error"].startswith("not JSON")
    assert report["failed"][1]["error"] == 'no "persona" string in the object'
    assert report["failed"][2]["error"] == "the persona is empty"
    assert Persona.objects.count() == before + 2
    added = Persona.objects.get(text__startswith="A beekeeper")
    assert (
        added.text == "A beekeeper in Ljubljana who sells comb honey at a market." and added.source == "persona.jsonl"
    )

    # The same file again changes nothing.
    again = import_personas(path).as_dict()
    assert again["imported"] == 0 and again["unchanged"] == 4 and len(again["failed"]) == 4
    assert Persona.objects.count() == before + 2


def test_plain_text_is_one_persona_per_non_empty_line_and_an_open_file_works_too(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text(
        "A glassblower in Murano who keeps a log of furnace temperatures.\n\n"
        "   A courier in Hanoi who plans routes around the morning floods.  \n"
    )
    report = import_personas(path).as_dict()
    assert report == {"imported": 2, "updated": 0, "unchanged": 0, "failed": [], "failed_count": 0}
    assert Persona.objects.filter(source="mine.txt").count() == 2

    upload = io.BytesIO(b"A courier in HANOI who plans routes around the morning floods.\nA new one from a form.\n")
    report = import_personas(upload, source="upload").as_dict()
    assert report["imported"] == 1 and report["unchanged"] == 1
    assert Persona.objects.get(text="A new one from a form.").source == "upload"
    assert not upload.closed  # the caller's file is the caller's to close


def test_a_jsonl_file_without_the_extension_is_recognised_by_its_first_line(tmp_path):
    path = tmp_path / "personas.data"
    path.write_text(json.dumps({"persona": "A luthier in Cremona who dries spruce for ten years."}) + "\nnot json\n")
    report = import_personas(path).as_dict()
    assert report["imported"] == 1 and report["failed"][0]["source"] == "personas.data:2"


def test_the_command_prints_the_report_as_json_last(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(
        json.dumps({"persona": "A tram driver in Lisbon who writes fado lyrics on her breaks."}) + "\n{oops\n"
    )

    out, err = run_import(str(path), "--json")

    report = json.loads(out.strip().splitlines()[-1])
    assert set(report) == {"imported", "updated", "unchanged", "failed", "failed_count"}
    assert (report["imported"], report["updated"], report["unchanged"]) == (1, 0, 0)
    assert [set(f) for f in report["failed"]] == [{"source", "error"}]
    assert report["failed"][0]["source"] == "p.jsonl:2" and report["failed"][0]["error"].startswith("not JSON")
    assert "failed: p.jsonl:2: not JSON" in err
    assert "imported 1, updated 0, unchanged 0, failed 1" in out

    with pytest.raises(CommandError, match="does not exist"):
        run_import(str(tmp_path / "missing.jsonl"))


# --- admin pages ---------------------------------------------------------------------------------------------


@pytest.fixture
def superuser_client(client, django_user_model):
    user = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(user)
    return client


def test_personas_are_searchable_and_can_be_disabled_in_the_admin(superuser_client):
    url = reverse("admin:synthesis_persona_changelist")
    page = superuser_client.get(url, {"q": "night-shift ICU nurse"}).content.decode()
    assert "Manchester" in page and "1 result" in page

    nurse = Persona.objects.get(text__contains="night-shift ICU nurse")
    response = superuser_client.post(url, {"action": "disable", "_selected_action": [nurse.pk]})
    assert response.status_code == 302
    nurse.refresh_from_db()
    assert not nurse.enabled

    # Adding one that is there already (in other case) is refused.
    response = superuser_client.post(
        reverse("admin:synthesis_persona_add"), {"text": nurse.text.upper(), "source": "admin", "enabled": "on"}
    )
    assert response.status_code == 200 and "this persona is there already" in response.content.decode()
    response = superuser_client.post(
        reverse("admin:synthesis_persona_add"),
        {"text": "A falconer in Abu Dhabi  who logs each bird's weight.", "source": "admin", "enabled": "on"},
    )
    assert response.status_code == 302
    added = Persona.objects.get(source="admin")
    assert added.text == "A falconer in Abu Dhabi who logs each bird's weight."
    assert added.text_hash == persona_hash(added.text)


def test_operations_are_editable_in_the_admin(superuser_client):
    operation = AtomicOperation.objects.get(slug="draft-email")
    page = superuser_client.get(reverse("admin:synthesis_atomicoperation_change", args=[operation.pk]))
    assert page.status_code == 200
    response = superuser_client.post(
        reverse("admin:synthesis_atomicoperation_change", args=[operation.pk]),
        {
            "category": operation.category_id,
            "slug": operation.slug,
            "name": "Draft an email to a file",
            "description": operation.description,
            "enabled": "on",
        },
    )
    assert response.status_code == 302
    operation.refresh_from_db()
    assert operation.name == "Draft an email to a file" and not operation.needs_network
    category_page = superuser_client.get(
        reverse("admin:synthesis_operationcategory_change", args=[operation.category_id])
    ).content.decode()
    assert "Draft an email to a file" in category_page
