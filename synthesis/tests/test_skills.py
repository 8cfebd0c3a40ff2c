"""Skills: SKILL.md folders parsed and imported (a folder, an archive, the harness's bundled skills), the text a model
reads, the runtime's commands, and annotation by the scripted model on loopback (stored, missing binaries, the
label, the admin's override, a broken answer repaired or recorded as failed), with its command and job."""

import io
import json
import re
import tarfile
import zipfile
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from jobs import runner
from jobs.models import JobRun
from llm.models import ModelCall
from llm.testing import Reply
from sandbox.runtime import read_manifest
from sandbox.testing import unavailable
from synthesis.annotation import (
    ANNOTATE_PROMPT_VERSION,
    ANNOTATE_PURPOSE,
    AnnotationFailed,
    skill_synthesizable,
)
from synthesis.models import Skill, SkillAnnotation
from synthesis.services import annotate_skill, import_skills, set_override, start_annotation
from synthesis.skills import (
    MAX_FILE_BYTES,
    SKILL_FILE,
    SkillError,
    SkillImportError,
    bundled_skills_dir,
    missing_bins,
    parse_skill_folder,
    runtime_bins,
    skill_text,
)

pytestmark = pytest.mark.django_db

NOTES_SKILL = """---
name: notes-tidy
description: Tidy a folder of Markdown notes into dated files.
homepage: https://example.com/notes
metadata:
  {
    "openclaw":
      {
        "emoji": "🗒",
        "requires": { "bins": ["python3", "jq", "pandoc"], "anyBins": ["rg", "grep"], "env": ["NOTES_DIR"] },
        "primaryEnv": "NOTES_TOKEN",
      },
  }
---

# Notes tidy

Run `scripts/tidy.py` on the notes folder.
"""


def write_skill(folder: Path, name: str, *, body: str = "Do the thing.\n", extra: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SKILL_FILE).write_text(f"---\nname: {name}\ndescription: The {name} skill.\n---\n\n{body}")
    for path, data in (extra or {}).items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_bytes(data if isinstance(data, bytes) else data.encode())
    return folder


def notes_folder(root: Path) -> Path:
    folder = root / "notes-tidy"
    (folder / "scripts").mkdir(parents=True)
    (folder / SKILL_FILE).write_text(NOTES_SKILL)
    (folder / "README.md").write_text("# Read me\nNotes are kept as YYYY-MM-DD.md.\n")
    (folder / "scripts" / "tidy.py").write_text("print('tidy')\n")
    (folder / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    (folder / "huge.txt").write_bytes(b"x" * (MAX_FILE_BYTES + 1))
    (folder / "__pycache__").mkdir()
    (folder / "__pycache__" / "tidy.cpython-311.pyc").write_bytes(b"\x00compiled")
    (folder / "elsewhere.md").symlink_to("/etc/hostname")
    return folder


# --- parsing --------------------------------------------------------------------------------------------------


def test_a_skill_folder_is_parsed_with_its_requirements_and_the_files_it_cannot_keep(tmp_path):
    parsed = parse_skill_folder(notes_folder(tmp_path))

    assert parsed.name == "notes-tidy" and parsed.description == "Tidy a folder of Markdown notes into dated files."
    assert parsed.required_bins == ["python3", "jq", "pandoc"] and parsed.any_bins == ["rg", "grep"]
    assert parsed.required_env == ["NOTES_DIR"] and parsed.primary_env == "NOTES_TOKEN"
    assert parsed.front_matter["homepage"] == "https://example.com/notes"
    assert parsed.front_matter["metadata"]["openclaw"]["emoji"] == "🗒"
    assert sorted(parsed.files) == ["README.md", "SKILL.md", "scripts/tidy.py"]
    reasons = {s["path"]: s["reason"] for s in parsed.skipped}
    assert reasons["logo.png"].startswith("binary")
    assert reasons["huge.txt"].startswith("too large")
    assert reasons["__pycache__"] == "a build or tool folder"
    assert reasons["elsewhere.md"] == "a symbolic link (not followed)"


@pytest.mark.parametrize(
    "text, problem",
    [
        ("# no front matter\n", "does not start with front matter"),
        ("---\nname: x\ndescription: y\n", "no closing '---'"),
        ("---\nname: [unclosed\n---\n", "not valid YAML"),
        ("---\ndescription: no name\n---\n", "has no name"),
        ("---\nname: no-description\n---\n", "has no description"),
        ("---\nname: x\ndescription: y\nmetadata: {openclaw: {requires: {bins: 3}}}\n---\n", "requires.bins"),
    ],
)
def test_a_bad_skill_md_says_what_is_wrong(tmp_path, text, problem):
    (tmp_path / SKILL_FILE).write_text(text)
    with pytest.raises(SkillError, match=re.escape(problem)):
        parse_skill_folder(tmp_path)


def test_metadata_given_as_a_json_string_and_the_legacy_clawdbot_key_are_read(tmp_path):
    meta = json.dumps({"clawdbot": {"requires": {"bins": ["ffmpeg"]}}})
    (tmp_path / SKILL_FILE).write_text(f"---\nname: legacy\ndescription: Old.\nmetadata: '{meta}'\n---\n")
    assert parse_skill_folder(tmp_path).required_bins == ["ffmpeg"]


# --- importing ------------------------------------------------------------------------------------------------


def test_a_folder_of_skills_imports_each_and_a_broken_one_fails_alone(tmp_path):
    notes_folder(tmp_path)
    write_skill(tmp_path / "csv-report", "csv-report", extra={"templates/report.md": "# Report\n"})
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / SKILL_FILE).write_text("no front matter\n")
    write_skill(tmp_path / "copy-of-csv", "csv-report")

    report = import_skills(tmp_path).as_dict()

    assert (report["imported"], report["updated"], report["unchanged"]) == (2, 0, 0)
    sources = {f["source"]: f["error"] for f in report["failed"]}
    assert "does not start with front matter" in sources[f"{tmp_path.name}/broken"]
    # Folders are read in name order: copy-of-csv came first, so csv-report's folder is the second of that name.
    assert sources[f"{tmp_path.name}/csv-report"] == (
        f"the skill name 'csv-report' is also that of {tmp_path.name}/copy-of-csv"
    )
    notes = Skill.objects.get(name="notes-tidy")
    assert notes.required_bins == ["python3", "jq", "pandoc"] and notes.required_env == ["NOTES_DIR"]
    assert notes.primary_env == "NOTES_TOKEN" and notes.source == str(tmp_path)
    assert {f.path: f.blob.content for f in notes.files.select_related("blob")}["scripts/tidy.py"] == b"print('tidy')\n"
    assert {s["path"] for s in notes.skipped_files} == {"logo.png", "huge.txt", "__pycache__", "elsewhere.md"}

    # Again: unchanged. A changed file: updated, its files replaced.
    again = import_skills(tmp_path).as_dict()
    assert (again["imported"], again["updated"], again["unchanged"]) == (0, 0, 2)
    (tmp_path / "notes-tidy" / "scripts" / "tidy.py").write_text("print('tidier')\n")
    (tmp_path / "notes-tidy" / "README.md").unlink()
    third = import_skills(tmp_path).as_dict()
    assert (third["imported"], third["updated"], third["unchanged"]) == (0, 1, 1)
    notes.refresh_from_db()
    assert sorted(notes.files.values_list("path", flat=True)) == ["SKILL.md", "scripts/tidy.py"]


def test_one_skill_folder_or_its_skill_md_imports_that_skill(tmp_path):
    folder = write_skill(tmp_path / "solo", "solo")
    assert import_skills(folder).imported == 1
    assert import_skills(folder / SKILL_FILE).unchanged == 1


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return path


def _tgz(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def skill_md(name: str) -> bytes:
    return f"---\nname: {name}\ndescription: The {name} skill.\n---\n\nBody.\n".encode()


@pytest.mark.parametrize("pack", [_zip, _tgz], ids=["zip", "tar.gz"])
def test_an_archive_of_skills_imports_and_one_with_a_path_outside_is_refused(tmp_path, pack):
    suffix = ".zip" if pack is _zip else ".tar.gz"
    good = pack(
        tmp_path / f"skills{suffix}",
        {
            "skills/alpha/SKILL.md": skill_md("alpha"),
            "skills/alpha/scripts/run.sh": b"echo alpha\n",
            "skills/beta/SKILL.md": skill_md("beta"),
        },
    )
    report = import_skills(good).as_dict()
    assert (report["imported"], report["failed"]) == (2, [])
    alpha = Skill.objects.get(name="alpha")
    assert sorted(alpha.files.values_list("path", flat=True)) == ["SKILL.md", "scripts/run.sh"]
    assert alpha.source == str(good)

    evil = pack(tmp_path / f"evil{suffix}", {"gamma/SKILL.md": skill_md("gamma"), "../escape.txt": b"owned\n"})
    with pytest.raises(SkillImportError, match=r"'\.\.' would place it outside"):
        import_skills(evil)
    assert not Skill.objects.filter(name="gamma").exists()
    assert not (tmp_path.parent / "escape.txt").exists()


def test_the_command_reports_as_json_and_refuses_what_it_cannot_read(tmp_path):
    write_skill(tmp_path / "one", "one")
    out = StringIO()
    call_command("import_skills", str(tmp_path), "--json", stdout=out, stderr=StringIO())
    assert json.loads(out.getvalue().strip().splitlines()[-1]) == {
        "imported": 1,
        "updated": 0,
        "unchanged": 0,
        "failed": [],
        "failed_count": 0,
    }
    (tmp_path / "empty").mkdir()
    with pytest.raises(CommandError, match="found no skill folder"):
        call_command("import_skills", str(tmp_path / "empty"), stdout=StringIO())
    with pytest.raises(CommandError, match="does not exist"):
        call_command("import_skills", str(tmp_path / "nowhere"), stdout=StringIO())


def test_bundled_without_the_harness_names_make_harness(settings, tmp_path):
    settings.CLAWGYM_HARNESS_DIR = tmp_path
    with pytest.raises(CommandError, match="make harness"):
        call_command("import_skills", "--bundled", stdout=StringIO())


@pytest.fixture
def bundled_folders():
    try:
        folder = bundled_skills_dir()
    except SkillImportError as exc:
        unavailable(str(exc))
    return sorted(p.parent.name for p in folder.glob(f"*/{SKILL_FILE}"))


def import_bundled() -> dict:
    out = StringIO()
    call_command("import_skills", "--bundled", "--json", stdout=out, stderr=StringIO())
    return json.loads(out.getvalue().strip().splitlines()[-1])


def test_every_bundled_openclaw_skill_imports_and_a_second_run_is_all_unchanged(bundled_folders):
    assert len(bundled_folders) == 51  # the pinned openclaw package (scripts/install-harness.sh)

    first = import_bundled()
    assert first == {"imported": 51, "updated": 0, "unchanged": 0, "failed": [], "failed_count": 0}
    assert sorted(Skill.objects.values_list("name", flat=True)) == bundled_folders  # folder name = skill name
    assert set(Skill.objects.values_list("source", flat=True)) == {"openclaw-bundled"}
    github = Skill.objects.get(name="github")
    assert github.required_bins == ["gh"] and "GitHub CLI" in github.description
    assert Skill.objects.get(name="goplaces").primary_env == "GOOGLE_PLACES_API_KEY"
    assert Skill.objects.get(name="trello").required_env == ["TRELLO_API_KEY", "TRELLO_TOKEN"]
    assert sorted(Skill.objects.get(name="1password").files.values_list("path", flat=True)) == [
        "SKILL.md",
        "references/cli-examples.md",
        "references/get-started.md",
    ]

    assert import_bundled() == {"imported": 0, "updated": 0, "unchanged": 51, "failed": [], "failed_count": 0}


# --- what the model reads, and the runtime ----------------------------------------------------------------


def test_skill_text_puts_skill_md_then_readme_first_and_stays_within_the_limit(tmp_path):
    write_skill(
        tmp_path / "big",
        "big",
        body="Main instructions.\n",
        extra={
            "a-notes.md": "alpha " * 2000,
            "README.md": "Read me first.\n",
            "z/deep.txt": "deep " * 5000,
        },
    )
    import_skills(tmp_path / "big")
    skill = Skill.objects.get(name="big")

    text = skill_text(skill)
    assert text.index("### SKILL.md") < text.index("### README.md") < text.index("### a-notes.md")
    assert "Main instructions." in text and len(text) <= 30_000

    short = skill_text(skill, limit=3_000)
    assert len(short) <= 3_000 and "Read me first." in short
    assert "[… cut: a-notes.md has 12,000 characters]" in short and "not shown, for room: z/deep.txt" in short


def test_runtime_bins_are_the_commands_the_runtime_manifest_lists():
    bins = runtime_bins()
    assert bins == frozenset(read_manifest().commands)
    assert {"python3", "jq", "git", "sqlite3", "bash"} <= bins and "curl" not in bins and "gh" not in bins


def test_missing_bins_are_the_required_ones_the_runtime_lacks(tmp_path):
    import_skills(notes_folder(tmp_path))
    skill = Skill.objects.get(name="notes-tidy")
    # python3 and jq are there, pandoc is not; grep satisfies anyBins [rg, grep].
    assert missing_bins(skill) == ["pandoc"]
    skill.front_matter["metadata"]["openclaw"]["requires"]["anyBins"] = ["rg", "ag"]
    assert missing_bins(skill) == ["pandoc", "rg|ag"]


# --- annotation -----------------------------------------------------------------------------------------------

NEEDS_AUTH = {"1password", "github", "gh-issues", "notion", "trello", "goplaces", "gog", "xurl", "spotify-player"}
NOT_TEXT_ONLY = {
    "weather",
    "camsnap",
    "peekaboo",
    "openhue",
    "sonoscli",
    "blucli",
    "songsee",
    "apple-notes",
    "apple-reminders",
    "things-mac",
    "openai-whisper",
    "sherpa-onnx-tts",
    "sag",
    "eightctl",
}
RISKY = {"1password": "high", "github": "medium", "coding-agent": "medium"}
# Answer badly once (then well when told the problem), or always.
BROKEN_ONCE = {"tmux"}
ALWAYS_BROKEN = {"xurl"}


@pytest.fixture(autouse=True)
def fast_backoff(fast_llm_retries):
    """Tests here talk to a scripted upstream (llm.testing.fast_llm_retries)."""


@pytest.fixture
def judge(judge, scripted_upstream):
    """llm.testing's judge, answering as the annotator would."""
    scripted_upstream.responder = annotator
    return judge


def annotation_answer(name: str) -> dict:
    return {
        "summary": f"The {name} skill.",
        "core_content": f"Commands of {name}.",
        "auth_required": name in NEEDS_AUTH,
        "required_env": ["EXTRA_VAR"] if name == "notes-tidy" else [],
        "input_format": "text files",
        "output_format": "Markdown",
        "text_only_compatible": name not in NOT_TEXT_ONLY,
        "risk": RISKY.get(name, "low"),
        "risk_reason": "Because.",
    }


def annotator(body):
    """The scripted model: answers by the skill named in the prompt."""
    messages = body["messages"]
    assert "You annotate agent skills" in messages[0]["content"]
    name = re.search(r"^## Skill: (\S+)$", messages[1]["content"], re.M).group(1)
    repairing = messages[-1]["role"] == "user" and "could not be used" in messages[-1]["content"]
    if name in ALWAYS_BROKEN or (name in BROKEN_ONCE and not repairing):
        return Reply.text('{"summary": "cut short", "auth_required": ')
    return Reply.text(json.dumps(annotation_answer(name)))


def expected_label(skill: Skill) -> bool:
    answer = annotation_answer(skill.name)
    return not answer["auth_required"] and answer["text_only_compatible"] and not missing_bins(skill)


def annotate_cmd(*args):
    out = StringIO()
    try:
        call_command("annotate_skills", *args, stdout=out, stderr=StringIO())
    except CommandError as exc:
        return out.getvalue(), exc
    return out.getvalue(), None


def test_an_annotation_is_stored_with_missing_bins_and_its_label(tmp_path, judge, scripted_upstream):
    import_skills(notes_folder(tmp_path))
    skill = Skill.objects.get(name="notes-tidy")

    annotation = annotate_skill(skill, judge)

    assert annotation.summary == "The notes-tidy skill." and annotation.risk == "low"
    assert annotation.missing_bins == ["pandoc"] and annotation.synthesizable is False  # pandoc alone decides
    assert annotation.auth_required is False and annotation.text_only_compatible is True
    assert annotation.required_env == ["NOTES_DIR", "NOTES_TOKEN", "EXTRA_VAR"]
    assert annotation.endpoint_name == "judge" and annotation.prompt_version == ANNOTATE_PROMPT_VERSION
    call = annotation.model_call
    assert call.purpose == ANNOTATE_PURPOSE and call.subject == "skill:notes-tidy" and call.served_id == str(skill.pk)
    prompt = scripted_upstream.requests[0].json["messages"][1]["content"]
    assert "### SKILL.md" in prompt and "### README.md" in prompt and "### scripts/tidy.py" in prompt
    assert "commands it requires on PATH: python3, jq, pandoc" in prompt and "one of these commands: rg, grep" in prompt
    assert "huge.txt" not in prompt
    assert skill_synthesizable(skill) is False


def test_every_bundled_skill_is_annotated_and_labelled_and_failures_are_kept(bundled_folders, judge, scripted_upstream):
    import_bundled()

    out, error = annotate_cmd("--all", "--endpoint", "judge", "--json")

    rows = json.loads(out.strip().splitlines()[-1])
    assert [r["skill"] for r in rows] == bundled_folders
    by_name = {r["skill"]: r for r in rows}
    assert all(
        set(r) == {"skill", "synthesizable", "missing_bins", "auth_required", "text_only_compatible", "risk", "error"}
        for r in rows
    )
    # xurl never answered well: failed, said so, kept on the skill; the command exits non-zero.
    assert error is not None and "1 annotation(s) failed; first: xurl" in str(error)
    xurl = by_name.pop("xurl")
    assert xurl["error"] and "no valid JSON answer in 2 tries" in xurl["error"] and xurl["synthesizable"] is None
    assert xurl["missing_bins"] == ["xurl"]
    assert "no valid JSON answer" in Skill.objects.get(name="xurl").annotation_error
    assert not SkillAnnotation.objects.filter(skill__name="xurl").exists()
    # tmux's first answer was cut short and repaired: two calls, one annotation.
    assert ModelCall.objects.filter(subject="skill:tmux").count() == 2
    assert by_name["tmux"]["error"] is None

    assert SkillAnnotation.objects.count() == 50
    for skill in Skill.objects.exclude(name="xurl"):
        row, annotation = by_name[skill.name], skill.latest_annotation()
        assert annotation.missing_bins == missing_bins(skill) == row["missing_bins"]
        assert annotation.synthesizable is row["synthesizable"] is expected_label(skill), skill.name
        assert row["risk"] == RISKY.get(skill.name, "low")
    # Checked by hand against sandbox/runtime/packages.txt: gh is not in the runtime, git is; jq is, curl is not.
    assert by_name["gh-issues"]["missing_bins"] == ["gh"] and by_name["trello"]["missing_bins"] == ["curl"]
    assert by_name["coding-agent"]["missing_bins"] == ["claude|codex|opencode"]
    assert by_name["notion"]["missing_bins"] == ["ntn|curl"]
    assert by_name["python-debugpy"] == {
        "skill": "python-debugpy",
        "synthesizable": True,
        "missing_bins": [],
        "auth_required": False,
        "text_only_compatible": True,
        "risk": "low",
        "error": None,
    }
    assert by_name["weather"]["synthesizable"] is False and by_name["weather"]["missing_bins"] == []
    assert by_name["skill-creator"]["synthesizable"] is True
    assert by_name["1password"]["synthesizable"] is False and by_name["1password"]["risk"] == "high"
    assert 5 <= sum(r["synthesizable"] for r in by_name.values()) < 50


def test_the_admins_override_wins_over_the_annotation(judge, admin_user, tmp_path):
    write_skill(tmp_path / "solo", "solo")
    import_skills(tmp_path / "solo")
    skill = Skill.objects.get(name="solo")
    assert skill_synthesizable(skill) is False  # not annotated yet
    annotate_skill(skill, judge)
    assert skill_synthesizable(skill) is True

    with pytest.raises(ValueError, match="reason is required"):
        set_override(skill, False, reason=" ", user=admin_user)
    set_override(skill, False, reason="Its checker would need the network.", user=admin_user)
    skill.refresh_from_db()
    assert skill_synthesizable(skill) is False and skill.override_by == admin_user
    annotate_skill(skill, judge)  # a new annotation does not undo the decision
    assert skill.latest_annotation().synthesizable is True and skill_synthesizable(skill) is False
    out, _ = annotate_cmd("--skill", "solo", "--endpoint", "judge", "--json")
    assert json.loads(out.strip().splitlines()[-1])[0]["synthesizable"] is False

    set_override(skill, None, reason="", user=admin_user)
    assert skill_synthesizable(skill) is True and skill.override_reason == ""


def test_an_annotation_that_cannot_be_had_is_recorded_on_the_skill(judge, scripted_upstream, tmp_path):
    write_skill(tmp_path / "xurl", "xurl")
    import_skills(tmp_path / "xurl")
    skill = Skill.objects.get(name="xurl")
    with pytest.raises(AnnotationFailed, match="annotation by judge failed"):
        annotate_skill(skill, judge)
    skill.refresh_from_db()
    assert "no valid JSON answer" in skill.annotation_error
    errors = list(ModelCall.objects.filter(subject="skill:xurl").values_list("error", flat=True))
    assert len(errors) == 2 and all(e.startswith("invalid JSON answer") for e in errors)  # the answer and its repair

    scripted_upstream.responder = None
    scripted_upstream.push(Reply.error(500, "down"))
    with pytest.raises(AnnotationFailed, match="down"):
        annotate_skill(skill, judge)


def test_the_command_names_unknown_skills_and_endpoints(judge, tmp_path):
    with pytest.raises(CommandError, match="no such skill: nope"):
        call_command("annotate_skills", "--skill", "nope", "--endpoint", "judge", stdout=StringIO())
    with pytest.raises(CommandError, match="no enabled model endpoint is named 'other'"):
        call_command("annotate_skills", "--all", "--endpoint", "other", stdout=StringIO())


def test_the_job_annotates_the_skills_and_counts_failures(
    judge, admin_user, tmp_path, django_capture_on_commit_callbacks
):
    for name in ("alpha", "xurl", "beta"):
        write_skill(tmp_path / name, name)
    import_skills(tmp_path)
    with django_capture_on_commit_callbacks(execute=False):
        run = start_annotation(user=admin_user, endpoint_name="judge")

    assert runner.execute(run.pk) == JobRun.Status.SUCCEEDED
    run.refresh_from_db()
    assert run.result["annotated"] == 2 and run.result["failed"] == 1 and run.outcome == "partial"
    assert run.result["failures"][0]["skill"] == "xurl" and "no valid JSON answer" in run.result["failures"][0]["error"]
    assert run.progress_done == 3 and run.progress_total == 3 and run.subject == "every skill"
    assert set(SkillAnnotation.objects.values_list("skill__name", flat=True)) == {"alpha", "beta"}


def test_the_skill_admin_shows_files_and_takes_an_override_with_a_reason(judge, tmp_path, client, django_user_model):
    write_skill(tmp_path / "solo", "solo", extra={"scripts/run.sh": "echo from-the-script\n"})
    import_skills(tmp_path / "solo")
    skill = Skill.objects.get(name="solo")
    annotate_skill(skill, judge)
    root = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(root)
    url = reverse("admin:synthesis_skill_change", args=[skill.pk])

    page = client.get(url).content.decode()
    assert "echo from-the-script" in page and "The solo skill." in page

    # The inlines' management forms and ids, as the page has them.
    hidden = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page))
    hidden.pop("csrfmiddlewaretoken", None)
    response = client.post(url, {**hidden, "override": "no", "override_reason": ""})
    assert response.status_code == 200 and "say why the label is overridden" in response.content.decode()
    response = client.post(url, {**hidden, "override": "no", "override_reason": "Too close to another skill."})
    assert response.status_code == 302
    skill.refresh_from_db()
    assert skill.synthesizable_override is False and skill.override_by == root and not skill_synthesizable(skill)
    assert client.get(reverse("admin:synthesis_skillannotation_changelist")).status_code == 200


def test_the_override_action_asks_for_a_label_and_a_reason(tmp_path, client, django_user_model):
    for name in ("alpha", "beta", "gamma"):
        write_skill(tmp_path / name, name)
    import_skills(tmp_path)
    chosen = list(Skill.objects.filter(name__in=["alpha", "beta"]).values_list("pk", flat=True))
    client.force_login(django_user_model.objects.create_superuser("root", "root@example.com", "pw"))
    url = reverse("admin:synthesis_skill_changelist")
    action = {"action": "override_label", "_selected_action": chosen}

    page = client.post(url, action)
    assert page.status_code == 200 and "alpha" in page.content.decode() and "gamma" not in page.content.decode()
    refused = client.post(url, {**action, "apply": "1", "label": "yes", "reason": ""})
    assert refused.status_code == 200 and "This field is required" in refused.content.decode()
    assert not Skill.objects.filter(synthesizable_override__isnull=False).exists()

    done = client.post(url, {**action, "apply": "1", "label": "yes", "reason": "Reviewed by hand: works offline."})
    assert done.status_code == 302
    assert dict(Skill.objects.values_list("name", "synthesizable_override")) == {
        "alpha": True,
        "beta": True,
        "gamma": None,
    }
    assert Skill.objects.get(name="alpha").override_reason == "Reviewed by hand: works offline."
    assert skill_synthesizable(Skill.objects.get(name="beta")) is True  # never annotated: the override decides

    client.post(url, {"action": "clear_override", "_selected_action": chosen})
    assert not Skill.objects.filter(synthesizable_override__isnull=False).exists()
