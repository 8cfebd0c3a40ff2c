"""python manage.py categorize_tasks [--all | --task ID ...] [--endpoint NAME] [--json]"""

import json

from django.core.management.base import BaseCommand, CommandError

from tasks.categorizing import (
    CategorizingError,
    ProposalError,
    awaiting_proposal,
    categorizer_endpoint,
    propose_categories,
)
from tasks.models import CategoryProposal, Task


class Command(BaseCommand):
    help = (
        "Ask a model (an endpoint with the generator role, else the judge role, or --endpoint) to propose a "
        "benchmark category, with a one-sentence reason, for each task without one (and without a pending "
        "proposal); --all asks about every task, --task about these. Runs in this process, one call per task (as many "
        "at a time as the endpoint's max_concurrent), and stores each answer as a proposal an admin accepts on /tasks/categories/. With --json the last line is a "
        'JSON array [{"task", "category", "reason", "status", "error"}]. Exits non-zero when a proposal failed.'
    )

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group()
        which.add_argument("--all", dest="all_tasks", action="store_true", help="every task that has a revision")
        which.add_argument("--task", dest="task_ids", nargs="+", metavar="ID", help="these tasks (external ids)")
        parser.add_argument("--endpoint", help="the model endpoint to ask (default: generator role, else judge)")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the proposals as JSON last")

    def handle(self, *args, all_tasks, task_ids, endpoint, as_json, **options):
        try:
            model = categorizer_endpoint(endpoint)
        except CategorizingError as exc:
            raise CommandError(str(exc)) from None
        tasks = self._tasks(all_tasks, task_ids)
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

    def _tasks(self, all_tasks: bool, task_ids) -> list[Task]:
        if task_ids is None:
            found = Task.objects.filter(current_revision__isnull=False) if all_tasks else awaiting_proposal()
            return list(found.order_by("external_id"))
        found = list(Task.objects.filter(external_id__in=task_ids).order_by("external_id"))
        known = {t.external_id for t in found}
        missing = [i for i in dict.fromkeys(task_ids) if i not in known]
        if missing:
            raise CommandError(f"no such task: {', '.join(missing)}")
        empty = [t.external_id for t in found if t.current_revision_id is None]
        if empty:
            raise CommandError(f"these tasks have no revision to categorize: {', '.join(empty)}")
        return found


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
