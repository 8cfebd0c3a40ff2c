"""Reading PinchBench task markdown, and running the checker it becomes."""

import json
import os
import subprocess
import textwrap

import pytest

from tasks.formats import ReadFailure, detect_format, get_format
from tasks.package import STANDARD_REWARD_SH, validate_rubric

fmt = get_format("pinchbench")

HYBRID = '''\
---
id: task_meeting_follow_up
name: Meeting Follow-Up Email
category: meeting_analysis
grading_type: hybrid
timeout_seconds: 180
grading_weights:
  automated: 0.7
  llm_judge: 0.3
workspace_files:
  - source: meetings/2021-06-28.md
    dest: meeting_transcript.md
  - path: "config.json"
    content: |
      {"team": "pmm"}
  - agenda.txt
---

# Meeting Follow-Up Email

## Prompt

Draft a follow-up email from `meeting_transcript.md` into `follow_up_email.md`.

---

## Expected Behavior

The agent reads the transcript and writes a concise email.

## Grading Criteria

- [ ] File `follow_up_email.md` is created
- [ ] Mentions the Tuesday deadline

## Automated Checks

```python
def grade(transcript: list, workspace_path: str) -> dict:
    """Score the email."""
    from pathlib import Path

    ## not a section: a comment inside the code
    print("debug output that must not reach the scores")
    email = Path(workspace_path) / "follow_up_email.md"
    scores = {"file_created": 1.0 if email.exists() else 0.0}
    text = email.read_text().lower() if email.exists() else ""
    scores["deadline_mentioned"] = 1.0 if "tuesday" in text else 0.0
    scores["turns"] = len(transcript)
    scores["bonus"] = 7
    return scores
```

## LLM Judge Rubric

### Criterion 1: Accuracy of Content (Weight: 35%)

**Score 1.0**: Captures every decision
and action item.
**Score 0.75**: Most content accurate.
**Score 0.5**: Core decisions present.
**Score 0.25**: Significant inaccuracies.
**Score 0.0**: Missing or wrong.

### Criterion 2: Email Format (Weight: 65%)

**Score 1.0**: Reads like a real email.
**Score 0.5**: Right information, unnatural email.
**Score 0.0**: Not an email.

---

## Additional Notes

The meeting has a relaxed tone.
'''

JUDGE_ONLY = """\
---
id: task_csv_report
name: Finance Report
category: finance
grading_type: llm_judge
timeout_seconds: 180
workspace_files: []
---

## Prompt

Write finance_report.md from the CSV.

## Grading Criteria

- [ ] Report file is created
- [x] Volatility metrics are presented
"""

AUTOMATED = """\
---
id: task_sanity
name: Sanity
category: basic
grading_type: automated
timeout_seconds: 60
---

## Prompt

Say hello in hello.txt.

## Automated Checks

```python
def grade(transcript, workspace_path):
    return {"ok": 1.0}
```
"""


@pytest.fixture
def bench(tmp_path):
    root = tmp_path / "pinchbench"
    (root / "tasks" / "task_meeting_follow_up").mkdir(parents=True)
    (root / "assets" / "meetings").mkdir(parents=True)
    (root / "assets" / "meetings" / "2021-06-28.md").write_text("We meet again Tuesday.\n")
    (root / "tasks" / "task_meeting_follow_up" / "agenda.txt").write_text("1. budget\n")
    (root / "tasks" / "task_meeting_follow_up.md").write_text(HYBRID)
    (root / "tasks" / "task_csv_report.md").write_text(JUDGE_ONLY)
    (root / "tasks" / "task_sanity.md").write_text(AUTOMATED)
    (root / "tasks" / "README.md").write_text("# PinchBench tasks\n")
    (root / "tasks" / "TASK_TEMPLATE.md").write_text("---\nid: task_XX_name\n---\n")
    return root


def by_id(root):
    return {p.external_id: p for p in fmt.read(root) if not isinstance(p, ReadFailure)}


def test_hybrid_task(bench):
    assert detect_format(bench) is fmt and fmt.count(bench) == 3
    task = by_id(bench)["task_meeting_follow_up"]
    assert task.instruction == "Draft a follow-up email from `meeting_transcript.md` into `follow_up_email.md`."
    assert task.origin == "tasks/task_meeting_follow_up.md"
    assert task.code_weight == pytest.approx(0.7)
    assert task.metadata == {
        "name": "Meeting Follow-Up Email",
        "category": "meeting_analysis",
        "grading_type": "hybrid",
        "timeout_seconds": 180,
        "grading_weights": {"automated": 0.7, "llm_judge": 0.3},
        "expected_behavior": "The agent reads the transcript and writes a concise email.",
        "grading_criteria": "- [ ] File `follow_up_email.md` is created\n- [ ] Mentions the Tuesday deadline",
        "additional_notes": "The meeting has a relaxed tone.",
    }
    files = {(f.role, f.path): f.data for f in task.files}
    assert files[("input", "meeting_transcript.md")] == b"We meet again Tuesday.\n"
    assert files[("input", "config.json")] == b'{"team": "pmm"}\n'
    assert files[("input", "agenda.txt")] == b"1. budget\n"
    assert files[("reward", "reward.sh")] == STANDARD_REWARD_SH.encode()
    assert files[("reward", "grade_impl.py")].startswith(b"def grade(transcript: list, workspace_path: str)")
    assert b"## not a section" in files[("reward", "grade_impl.py")]
    assert sorted(files) == sorted(
        [
            ("input", "meeting_transcript.md"),
            ("input", "config.json"),
            ("input", "agenda.txt"),
            ("reward", "grade_impl.py"),
            ("reward", "check.py"),
            ("reward", "reward.sh"),
        ]
    )

    assert validate_rubric(task.rubric) == task.rubric
    accuracy, layout = task.rubric
    assert (accuracy["name"], accuracy["weight"]) == ("Accuracy of Content", 35.0)
    assert accuracy["scores"]["1"] == "Captures every decision and action item."
    assert accuracy["scores"]["0"] == "Missing or wrong."
    assert (layout["name"], layout["weight"]) == ("Email Format", 65.0)
    # A criterion keeps the levels it states, no more: the judge answers one of 1, 0.5 and 0.
    assert layout["scores"] == {
        "0": "Not an email.",
        "0.5": "Right information, unnatural email.",
        "1": "Reads like a real email.",
    }


def test_llm_judge_task_without_rubric_is_judged_on_its_criteria(bench):
    task = by_id(bench)["task_csv_report"]
    assert task.code_weight == 0.0
    assert [r["name"] for r in task.rubric] == ["Criterion 1", "Criterion 2"]
    assert "Volatility metrics are presented" in task.rubric[1]["scores"]["1"]
    files = {(f.role, f.path): f.data for f in task.files}
    assert sorted(files) == [("reward", "check.py"), ("reward", "reward.sh")]


def test_automated_task_has_no_rubric(bench):
    task = by_id(bench)["task_sanity"]
    assert task.code_weight == 1.0 and task.rubric == []
    assert task.metadata["grading_type"] == "automated"


def _run_checker(tmp_path, task, payload: dict | None, files: dict):
    workspace = tmp_path / "workspace"
    for f in task.files:
        target = workspace / ("reward" if f.role == "reward" else "") / f.path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(f.data)
    for name, text in files.items():
        (workspace / name).write_text(text)
    env = {"PATH": os.environ["PATH"]}
    if payload is not None:
        (tmp_path / "payload.json").write_text(json.dumps(payload))
        env["OPENCLAW_REWARD_PAYLOAD"] = str(tmp_path / "payload.json")
    return subprocess.run(
        ["bash", str(workspace / "reward" / "reward.sh")], capture_output=True, text=True, env=env, timeout=60
    )


def test_the_checker_runs_grade_with_the_transcript_and_clamps_scores(bench, tmp_path):
    task = by_id(bench)["task_meeting_follow_up"]
    payload = {"task_id": task.external_id, "transcript": [{"type": "message"}, {"type": "message"}]}
    done = _run_checker(tmp_path, task, payload, {"follow_up_email.md": "See you Tuesday"})
    assert done.returncode == 0, done.stderr
    *lines, last = done.stdout.strip().splitlines()
    assert json.loads(lines[-1]) == {"file_created": 1.0, "deadline_mentioned": 1.0, "turns": 1.0, "bonus": 1.0}
    assert float(last) == 1.0
    assert "debug output" in done.stderr  # grade()'s prints go to stderr, never into the scores


def test_the_checker_without_payload_grades_on_the_workspace(bench, tmp_path):
    done = _run_checker(tmp_path, by_id(bench)["task_meeting_follow_up"], None, {})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[0]) == {
        "file_created": 0.0,
        "deadline_mentioned": 0.0,
        "turns": 0.0,
        "bonus": 1.0,
    }
    assert float(done.stdout.strip().splitlines()[-1]) == 0.25


def test_the_judge_only_checker_reports_no_sub_scores(bench, tmp_path):
    done = _run_checker(tmp_path, by_id(bench)["task_csv_report"], {"transcript": []}, {})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["{}", "0.0"]


def _with(bench, name: str, text: str):
    (bench / "tasks" / name).write_text(textwrap.dedent(text))
    return {r.source: r.error for r in fmt.read(bench) if isinstance(r, ReadFailure)}


@pytest.mark.parametrize(
    "text, error",
    [
        ("no front matter here\n## Prompt\nx\n", "no YAML front matter"),
        ("---\nid: [unclosed\n---\n## Prompt\nx\n", "front matter is not valid YAML"),
        ("---\nid: t_bad\ngrading_type: vibes\n---\n## Prompt\nx\n", "grading_type 'vibes' is not one of"),
        ("---\nid: t_bad\n---\n## Expected Behavior\nx\n", "no '## Prompt' section"),
        (
            "---\nid: t_bad\ngrading_type: automated\n---\n## Prompt\nx\n",
            "grading_type automated needs an '## Automated Checks' section",
        ),
        (
            "---\nid: t_bad\ngrading_type: llm_judge\nworkspace_files:\n  - source: nope.csv\n---\n## Prompt\nx\n",
            "workspace_files[0]: 'nope.csv' not found in assets/ or tasks/t_bad/",
        ),
        (
            "---\nid: t_bad\ngrading_type: llm_judge\nworkspace_files:\n  - source: ../secret\n---\n## Prompt\nx\n",
            "workspace_files[0]: source '../secret': '..' is not allowed in a path",
        ),
        (
            "---\nid: t_bad\ngrading_type: llm_judge\nworkspace_files:\n  - path: /etc/x\n    content: x\n---\n"
            "## Prompt\nx\n## Grading Criteria\n- [ ] ok\n",
            "destination '/etc/x': absolute paths are not allowed",
        ),
        (
            "---\nid: t_bad\ngrading_type: hybrid\ngrading_weights: {automated: -1}\n---\n## Prompt\nx\n",
            "grading_weights.automated must be a number ≥ 0",
        ),
        (
            "---\nid: t_bad\ngrading_type: llm_judge\n---\n## Prompt\nx\n",
            "an llm_judge/hybrid task needs an LLM Judge Rubric or Grading Criteria section",
        ),
        (
            "---\nid: t_bad\ngrading_type: llm_judge\n---\n## Prompt\nx\n## LLM Judge Rubric\n### Criterion 1: A\n"
            "**Score 1.5**: beyond the scale\n**Score 0**: no\n",
            "'A': score level 1.5 is not in [0, 1]",
        ),
        (
            "---\nid: t_bad\ngrading_type: llm_judge\n---\n## Prompt\nx\n## LLM Judge Rubric\n### Criterion 1: A\n"
            "**Score 1.0**: yes\n**Score 1**: also yes\n",
            "'A': score level 1 is given twice",
        ),
    ],
)
def test_a_bad_task_file_is_reported_and_the_others_are_read(bench, text, error):
    failures = _with(bench, "t_bad.md", text)
    assert list(failures) == ["tasks/t_bad.md"]
    assert failures["tasks/t_bad.md"].startswith("tasks/t_bad.md: ")
    assert error in failures["tasks/t_bad.md"]
    assert set(by_id(bench)) == {"task_meeting_follow_up", "task_csv_report", "task_sanity"}


def test_symlinked_asset_is_refused(bench, tmp_path):
    (tmp_path / "secret.txt").write_text("secret")
    os.symlink(tmp_path / "secret.txt", bench / "assets" / "link.txt")
    failures = _with(
        bench,
        "t_link.md",
        "---\nid: t_link\ngrading_type: llm_judge\nworkspace_files:\n"
        "  - source: link.txt\n---\n## Prompt\nx\n## Grading Criteria\n- [ ] ok\n",
    )
    assert failures == {"tasks/t_link.md": "tasks/t_link.md: assets/link.txt: symbolic links are not allowed"}


def test_free_text_rubric_becomes_one_rule(bench):
    _with(
        bench,
        "t_free.md",
        "---\nid: t_free\ngrading_type: llm_judge\n---\n## Prompt\nx\n"
        "## LLM Judge Rubric\nJudge whether the report is accurate.\n",
    )
    (rule,) = by_id(bench)["t_free"].rubric
    assert rule["name"] == "rubric" and "Judge whether the report is accurate." in rule["scores"]["1"]


def test_pinchbench_cannot_be_exported(tmp_path):
    with pytest.raises(ValueError, match="import only"):
        fmt.write([], tmp_path / "out")


# PinchBench's own shape for a criterion scored in steps of 0.2 (one of its 23 tasks does this); written here.
STEPS_OF_A_FIFTH = """\
---
id: task_release_notes
name: Release Notes Draft
category: writing
grading_type: llm_judge
timeout_seconds: 240
workspace_files:
  - path: "CHANGELOG.md"
    content: |
      ## 2.4.0
      - fix: retry uploads on 503
      - feat: dark mode
---

# Release Notes Draft

## Prompt

Turn `CHANGELOG.md` into user-facing release notes in `release_notes.md`.

## Expected Behavior

Plain-language notes grouped into new features and fixes.

## LLM Judge Rubric

### Criterion 1: Coverage (Weight: 60%)

**Score 1.0**: Every changelog entry appears, in plain language.
**Score 0.8**: One minor entry is missing.
**Score 0.6**: Two entries are missing, or one is misdescribed.
**Score 0.4**: Only about half the entries appear.
**Score 0.2**: A single entry appears.
**Score 0.0**: No release notes.

### Criterion 2: Tone (Weight: 40%)

**Score 1.0**: Friendly and concise.
**Score 0.5**: Accurate but reads like a commit log.
**Score 0.0**: Unreadable.
"""


def test_a_criterion_scored_in_steps_of_a_fifth_keeps_its_six_levels(bench):
    (bench / "tasks" / "task_release_notes.md").write_text(STEPS_OF_A_FIFTH)
    task = by_id(bench)["task_release_notes"]
    coverage, tone = task.rubric
    assert list(coverage["scores"]) == ["0", "0.2", "0.4", "0.6", "0.8", "1"]
    assert coverage["scores"]["0.8"] == "One minor entry is missing."
    assert coverage["weight"] == 60.0 and task.code_weight == 0.0
    assert list(tone["scores"]) == ["0", "0.5", "1"]
    assert validate_rubric(task.rubric) == task.rubric


def test_only_the_ends_of_the_scale_are_added_when_left_out(bench):
    _with(
        bench,
        "t_ends.md",
        "---\nid: t_ends\ngrading_type: llm_judge\n---\n## Prompt\nx\n## LLM Judge Rubric\n"
        "### Criterion 1: Totals\n**Score 0.6**: most totals right\n",
    )
    (rule,) = by_id(bench)["t_ends"].rubric
    assert list(rule["scores"]) == ["0", "0.6", "1"]
    assert rule["scores"]["0.6"] == "most totals right"
    assert rule["scores"]["0"].startswith("Falls clearly short of the description for 0.6")


def test_the_imported_levels_are_what_the_task_page_shows(bench, viewer_client):
    from django.urls import reverse

    from tasks.importing import import_path

    (bench / "tasks" / "task_release_notes.md").write_text(STEPS_OF_A_FIFTH)
    report = import_path(bench, fmt="pinchbench")
    assert not report.failed and report.imported == 4
    page = viewer_client.get(reverse("tasks:detail", args=["task_release_notes"])).content.decode()
    rubric = page[page.index('id="rubric"') :]
    shown = [rubric.index(f'<th class="num">{level}</th>') for level in ("0", "0.2", "0.4", "0.6", "0.8", "1")]
    assert shown == sorted(shown)  # every level, lowest first
    assert "One minor entry is missing." in rubric and '<th class="num">0.75</th>' not in rubric.split("Tone")[0]
