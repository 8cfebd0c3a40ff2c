"""jobs.waiting: the one wait loop of the commands that queue work, and how it gives up."""

import pytest

from jobs import waiting
from jobs.cli import FAILED, NOT_STARTED
from jobs.waiting import NotFinished, NoWorker, Work, wait_for


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch):
    monkeypatch.setattr(waiting, "POLL_SECONDS", 0.01)
    monkeypatch.setattr(waiting, "RECHECK_LOST_SECONDS", 0.0)


def work(**fields) -> Work:
    calls = []
    defaults = {
        "what": "batch #7",
        "queues": ("sandbox",),
        "finished": lambda: False,
        "taken": lambda: False,
        "cancel": lambda: calls.append("cancel"),
    }
    made = Work(**{**defaults, **fields})
    made.calls = calls
    return made


def test_it_returns_once_the_work_is_finished_and_reports_progress_on_the_way():
    polls = iter([False, False, True])
    reported, reclaimed = [], []
    done = work(
        finished=lambda: next(polls),
        taken=lambda: True,
        progress=lambda: reported.append(1),
        reclaim_lost=lambda: reclaimed.append(1),
    )
    wait_for(done, timeout=5, start_timeout=5)
    assert len(reported) == 3 and len(reclaimed) == 2 and done.calls == []


def test_no_worker_cancels_the_work_and_says_how_to_start_one():
    untaken = work(queues=("default", "sandbox"), cancelled="`manage.py synthesize --resume 7` runs it again.")
    with pytest.raises(NoWorker) as raised:
        wait_for(untaken, timeout=60, start_timeout=0.05)
    assert untaken.calls == ["cancel"]
    assert raised.value.returncode == NOT_STARTED
    message = str(raised.value)
    assert message.startswith(
        "no job worker took batch #7 within 0.05 s: are workers running on the default and sandbox queues?"
    )
    assert "`manage.py check_workers --queue default` and `manage.py check_workers --queue sandbox` tells" in message
    assert "-Q default,sandbox" in message and "--here" in message
    assert message.endswith("`manage.py synthesize --resume 7` runs it again.")


def test_a_timeout_shorter_than_the_start_timeout_means_no_worker_when_none_is_seen():
    untaken = work(workers_seen=lambda: False)
    with pytest.raises(NoWorker, match="within 0.05 s"):
        wait_for(untaken, timeout=0.05, start_timeout=60)
    assert untaken.calls == ["cancel"]


def test_a_timeout_shorter_than_the_start_timeout_leaves_the_work_queued_for_the_workers_seen():
    # `--timeout 0`: queue it and look later. A worker that beats on the queue takes it in a moment.
    queued = work(workers_seen=lambda: True, follow="`manage.py eval_report 7` shows it")
    with pytest.raises(NotFinished) as raised:
        wait_for(queued, timeout=0, start_timeout=60)
    assert queued.calls == []  # not cancelled
    assert str(raised.value) == (
        "no worker took batch #7 within 0 s yet; it stays queued for the workers seen on the sandbox queue "
        "(`manage.py eval_report 7` shows it)"
    )


@pytest.mark.django_db
def test_the_workers_seen_are_those_that_beat_on_every_queue_of_the_work():
    from django.utils import timezone

    from jobs.workers import beat

    both = work(queues=("default", "sandbox"))
    with pytest.raises(NoWorker):
        wait_for(both, timeout=0, start_timeout=60)
    beat("host:1:0", "django-q", ["sandbox"], timezone.now())
    with pytest.raises(NoWorker):
        wait_for(both, timeout=0, start_timeout=60)
    beat("host:2:0", "django-q", ["default"], timezone.now())
    with pytest.raises(NotFinished, match="stays queued for the workers seen on the default and sandbox queues"):
        wait_for(both, timeout=0, start_timeout=60)


def test_work_taken_but_not_finished_in_time_goes_on_and_says_where_to_follow_it():
    taken = iter([False, True])
    slow = work(taken=lambda: next(taken, True), follow="`manage.py synthesis_report 7` shows where it is")
    with pytest.raises(NotFinished) as raised:
        wait_for(slow, timeout=0.05, start_timeout=60)
    assert slow.calls == []  # not cancelled: a worker has it
    assert raised.value.returncode == FAILED
    assert str(raised.value) == (
        "batch #7 did not finish within 0.05 s; it goes on running (`manage.py synthesis_report 7` shows where it is)"
    )


def test_the_flags_are_the_same_everywhere():
    from django.core.management.base import CommandParser

    parser = CommandParser()
    waiting.add_wait_arguments(parser, timeout=7 * 24 * 3600.0)
    options = vars(parser.parse_args([]))
    assert options == {"here": False, "timeout": 604800.0, "start_timeout": 60.0}
    assert "(7 d)" in parser.format_help() and "(60)" in parser.format_help()
