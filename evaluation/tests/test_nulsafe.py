"""NUL (U+0000) in what a model or agent sends, stored and read back exactly: PostgreSQL refuses it in text and in
jsonb strings, and a call, rollout or sanity report that cannot be stored is lost work (lib.nulsafe). The tests run
on whichever database the session uses; CI runs them on PostgreSQL too."""

import json

import pytest

from evaluation.models import Rollout
from evaluation.testing import needs_bwrap
from lib.nulsafe import MARK, Decoder, Encoder, escape, unescape
from llm.managers import fill_requests
from llm.models import ModelCall, ModelEndpoint, ProxySession
from tasks.models import SanityReport
from tasks.testing import make_task

AWKWARD = ["a\0b", "\0", MARK, MARK + "0", "\0" + MARK + "\0", "\\u0000", "\\\0", "é\0€", "plain"]


@pytest.mark.parametrize("value", [*AWKWARD, {"k\0" + MARK: ["\0", 1, None, True, "\\\\u0000"]}])
@pytest.mark.parametrize("ensure_ascii", [True, False])
def test_json_round_trips_without_a_nul_escape_left(value, ensure_ascii):
    text = json.dumps(value, cls=Encoder, ensure_ascii=ensure_ascii)
    # Every escape taken whole: no \u0000 escape is left for the database to refuse.
    assert "\\u0000" not in text.replace("\\\\", "")
    assert json.loads(text, cls=Decoder) == value


@pytest.mark.parametrize("text", AWKWARD)
def test_text_round_trips_without_a_nul_left(text):
    assert "\0" not in escape(text) and unescape(escape(text)) == text


def test_text_without_nul_or_the_mark_is_stored_as_it_is():
    value = {"messages": [{"role": "user", "content": "hello \\u0000 is six characters"}]}
    assert json.dumps(value, cls=Encoder) == json.dumps(value)
    assert escape("hello") == "hello"


@pytest.fixture
def endpoint(db):
    return ModelEndpoint.objects.create(name="agent", base_url="http://127.0.0.1:9/v1", model="agent")


@pytest.fixture
def session(endpoint):
    return ProxySession.objects.create(endpoint=endpoint, subject="rollout:1")


def test_a_call_with_nul_in_its_request_and_answer_is_recorded_and_rebuilt(session):
    # A tool result that read a binary file, and an answer a small model sampled with a NUL in it (seen in CI).
    history = [{"role": "system", "content": "agent " * 200}, {"role": "user", "content": "read data.bin"}]
    first = {"model": "m", "messages": history}
    second = {
        "model": "m",
        "messages": [*history, {"role": "tool", "tool_call_id": "c\0", "content": "PK\x03\x04\0\0"}],
    }
    answer = {"choices": [{"message": {"role": "assistant", "content": "`64\0" + MARK}}]}
    calls = [
        ModelCall.objects.record(
            endpoint_name="agent",
            purpose="proxy",
            session=session,
            api="chat",
            request=request,
            response=answer,
            error="upstream said \0",
            status_code=200,
        )
        for request in (first, second)
    ]
    assert calls[1].request_base_id == calls[0].pk  # the second stored as a difference, read back through raw SQL
    stored = list(ModelCall.objects.filter(pk__in=[c.pk for c in calls]).order_by("pk"))
    fill_requests(stored)
    assert [c.request for c in stored] == [first, second]
    assert all(c.response == answer and c.error == "upstream said \0" for c in stored)


def test_a_rollout_and_a_sanity_report_with_nul_are_stored_and_read_back(endpoint):
    revision = make_task("nul-task").current_revision
    rollout = Rollout.objects.create(
        revision=revision,
        endpoint=endpoint,
        final_message="done\0",
        transcript=[{"role": "assistant", "content": "\0" + MARK}],
        log_tail="log\0",
        error="why\0",
        tools_used={"exec\0": 1},
        agent_account={"exit_reason": "stop", "last_text": "summarise\0"},
    )
    rollout = Rollout.objects.get(pk=rollout.pk)
    assert (rollout.final_message, rollout.log_tail, rollout.error) == ("done\0", "log\0", "why\0")
    assert rollout.transcript == [{"role": "assistant", "content": "\0" + MARK}] and rollout.tools_used == {"exec\0": 1}
    # What the harness said of the agent holds the model's words too (CI's second NUL was there).
    assert rollout.agent_account == {"exit_reason": "stop", "last_text": "summarise\0"}
    runs = {"empty": {"stdout": "a hostile checker printed \0", "score": 0.0}}
    report = SanityReport.objects.create(
        revision=revision,
        runs=runs,
        crashed=False,
        lazy_score=0.0,
        over_lenient=False,
        tolerance=0.0,
        backend="bwrap",
        isolated=True,
    )
    assert SanityReport.objects.get(pk=report.pk).runs == runs


def test_every_text_and_json_field_of_the_project_keeps_nul():
    # What a model, an agent, a checker or a job wrote reaches many fields (diagnoses, drafts, logs): none may refuse
    # a NUL on PostgreSQL, and a field added later is held to the same.
    from django.db import models

    from lib.nulsafe import NulSafeJSONField, NulSafeTextField

    fields = [
        (f"{model._meta.label}.{field.name}", field)
        for model in _our_models()
        for field in model._meta.local_fields
        if isinstance(field, models.TextField | models.JSONField)
    ]
    assert len(fields) > 80
    assert [name for name, field in fields if not isinstance(field, NulSafeTextField | NulSafeJSONField)] == []


def test_a_log_line_with_nul_is_appended_in_sql_and_read_back(db):
    # Logs are appended by an update expression, whose value does not pass through the field.
    from jobs.models import JobRun
    from jobs.runner import append_log

    run = JobRun.objects.create(kind="jobs.ping", engine="django_q", log_tail="started\n")
    JobRun.objects.filter(pk=run.pk).update(log_tail=append_log("a progress bar wrote \0\n"))
    assert JobRun.objects.get(pk=run.pk).log_tail == "started\na progress bar wrote \0\n"


def test_every_char_field_of_the_project_takes_nul():
    # Names and one-line reasons are bounded: NUL there is stored as U+FFFD (not reversible, no longer). Slugs are
    # validated to [-a-zA-Z0-9_] before they are saved, so they never hold one.
    from django.db import models

    from lib.nulsafe import NulSafeCharField

    fields = [
        (f"{model._meta.label}.{field.name}", field)
        for model in _our_models()
        for field in model._meta.local_fields
        if isinstance(field, models.CharField) and not isinstance(field, models.SlugField)
    ]
    assert len(fields) > 100
    assert [name for name, field in fields if not isinstance(field, NulSafeCharField)] == []


def _our_models():
    from pathlib import Path

    from django.apps import apps
    from django.conf import settings

    for config in apps.get_app_configs():
        parts = set(Path(config.path).parts)
        if Path(config.path).is_relative_to(settings.BASE_DIR) and not {"site-packages", "dist-packages"} & parts:
            yield from config.get_models()


@needs_bwrap
def test_a_checker_that_fails_quoting_the_agents_binary_file_is_stored_with_its_reason(endpoint):
    # The checker's last line of stderr goes into the rollout's one-line check reason (a CharField): an agent that
    # wrote NUL into the file the checker quotes must not make the rollout unstorable on PostgreSQL.
    from sandbox import Workspace, get_backend
    from tasks.testing import FAST, spec
    from tasks.verification import CheckStatus, run_checker

    checker = spec("import sys\nsys.exit('unexpected header: ' + open('out.bin', encoding='latin-1').read())\n")
    with Workspace.create({"out.bin": b"PK\x03\x04\0\0tail"}) as workspace:
        result = run_checker(checker, workspace, backend=get_backend("bwrap"), limits=FAST)
    assert result.status is CheckStatus.ERROR and "unexpected header: PK\x03\x04\0\0tail" in result.reason, result
    revision = make_task("nul-reason").current_revision
    rollout = Rollout.objects.create(
        revision=revision, endpoint=endpoint, check_status=str(result.status), check_reason=result.reason
    )
    stored = Rollout.objects.get(pk=rollout.pk).check_reason
    assert stored == result.reason.replace("\0", "\ufffd") and "PK\x03\x04\ufffd\ufffdtail" in stored
    assert Rollout.objects.filter(check_reason=result.reason).get() == rollout  # a lookup is replaced alike
