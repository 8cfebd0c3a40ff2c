"""Write the django-q2 schedules of the periodic jobs (jobs.periodic's table); scripts/run.sh runs it.

Idempotent: a schedule that exists keeps its next run; changed intervals are updated, entries that left the table
(or were turned off with CLAWGYM_PERIODIC_SECONDS) are deleted. Celery deployments need none of this: beat reads the
table itself (`celery -A clawgym_site beat`).
"""

from django.core.management.base import BaseCommand, CommandError

from jobs import periodic, registry


class Command(BaseCommand):
    help = "Create or update the django-q2 schedules of the periodic jobs (jobs/periodic.py); safe to run again."

    def handle(self, *args, **options):
        try:
            entries = periodic.enabled()
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        unregistered = [entry.kind for entry in periodic.PERIODIC if entry.kind not in registry.kinds()]
        if unregistered:
            raise CommandError(f"periodic jobs with no registered job kind: {', '.join(unregistered)}")
        done = periodic.sync_django_q_schedules()
        for entry, seconds in entries:
            minutes = periodic.django_q_minutes(seconds)
            self.stdout.write(f"{entry.kind}: every {minutes} min")
        summary = ", ".join(f"{len(kinds)} {what}" for what, kinds in done.items() if kinds)
        self.stdout.write(self.style.SUCCESS(f"Periodic job schedules: {summary or 'none'}."))
