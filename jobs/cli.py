"""What the management commands share about how they end: one exit-status scheme, so that a script can tell
"it ran and failed" from "you asked wrong" from "no worker is there" without reading the message.

    0  done: the work finished and succeeded
    1  failed: the work ran and did not all succeed (a run incomplete, a rollout not scored, a check that could not
       run), or did not finish within --timeout (it goes on running); Django's CommandError (returncode 1)
    2  refused (UsageError): the command line is wrong, or names what is not there or cannot be done now; nothing
       was started. argparse's own errors exit 2 as well
    3  not started (NotStarted): no job worker took the work within --start-timeout (it was cancelled), or the job
       engine did not take it; start a worker (`manage.py check_workers` tells) or pass --here

With --json the JSON is the last stdout line, on failure too wherever something was made that it can describe
(the cancelled run, the rollouts that failed), and always before the error goes to stderr.
"""

from django.core.management.base import CommandError

DONE, FAILED, REFUSED, NOT_STARTED = 0, 1, 2, 3


class UsageError(CommandError):
    """Refused before anything was started: exit status 2."""

    def __init__(self, *args):
        super().__init__(*args, returncode=REFUSED)


class NotStarted(CommandError):
    """No worker or job engine took the work: exit status 3."""

    def __init__(self, *args):
        super().__init__(*args, returncode=NOT_STARTED)


def engine_refused(what: str, exc: Exception) -> NotStarted:
    """The error of a command whose job the engine did not take (broker down, misconfiguration)."""
    return NotStarted(f"the job engine did not take {what}: {exc}")
