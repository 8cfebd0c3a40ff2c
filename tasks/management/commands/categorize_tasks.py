"""python manage.py categorize_tasks [--all | --task ID ... | --tasks-from SELECTION] [--endpoint NAME] [--json]"""

import json

from django.core.management.base import BaseCommand, CommandError

from jobs.cli import UsageError
from tasks.categorizing import (
    CategorizingError,
    ProposalError,
    awaiting_proposal,
    categorizer_endpoint,
    propose_categories,
)
from tasks.models import CategoryProposal, Task
from tasks.selection import add_task_arguments, tasks_of


class Command(BaseCommand):
    help = (
        "Ask a model (an endpoint with the generator role, else the judge role, or --endpoint) to propose a "
        "benchmark category, with a one-sentence reason, for each task without one (and without a pending "
        "proposal); --all asks about every task, --task / --tasks-from about these. Runs in this process, one call "
        "per task (as many at a time as the endpoint's max_concurrent), and stores each answer as a proposal an "
        "admin accepts on /tasks/categories/. With --json the last line is a JSON array "
        '[{"task", "category", "reason", "status", "error"}]. Exit status (jobs.cli): 1 when a proposal failed, 2 '
        "when refused."
    )

    def add_arguments(self, parser):
        add_task_arguments(parser, every="every task that has a revision")
        parser.add_argument("--endpoint", help="the model endpoint to ask (default: generator role, else judge)")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the proposals as JSON last")

    def handle(self, *args, endpoint, as_json, **flags):
        try:
            model = categorizer_endpoint(endpoint)
        except CategorizingError as exc:
            raise UsageError(str(exc)) from None
        tasks = tasks_of(flags, revision="to categorize")
        if tasks is None:
            found = Task.objects.filter(current_revision__isnull=False) if flags["all_tasks"] else awaiting_proposal()
            tasks = found.order_by("external_id")
        tasks = sorted(tasks, key=lambda t: t.external_id)
        if not tasks:
            self.stdout.write("no task awaits a category: every task has one or a pending proposal")
            if as_json:
                self.stdout.write("[]")
            return

        def heard(proposal):
            if not as_json:
                self.stdout.write(_line(proposal))

        try:
            proposals = propose_categories(tasks, endpoint=model, on_proposal=heard)
        except (CategorizingError, ProposalError) as exc:
            raise CommandError(str(exc)) from None
        failed = [p for p in proposals if p.status == CategoryProposal.Status.FAILED]
        self.stdout.write(
            f"proposed a category for {len(proposals) - len(failed)} of {len(proposals)} tasks with {model.name}"
            + (f"; {len(failed)} failed" if failed else "")
        )
        if as_json:
            self.stdout.write(json.dumps([_row(p) for p in proposals], ensure_ascii=False))
        if failed:
            first = failed[0]
            raise CommandError(f"{len(failed)} proposal(s) failed; first: {first.task.external_id}: {first.error}")


def _row(proposal: CategoryProposal) -> dict:
    return {
        "task": proposal.task.external_id,
        "category": proposal.category.slug if proposal.category_id else None,
        "reason": proposal.reason,
        "status": proposal.status,
        "error": proposal.error,
    }


def _line(proposal: CategoryProposal) -> str:
    if proposal.status == CategoryProposal.Status.FAILED:
        return f"{proposal.task.external_id}: failed: {proposal.error}"
    return f"{proposal.task.external_id}: {proposal.category.slug} ({proposal.reason})"
