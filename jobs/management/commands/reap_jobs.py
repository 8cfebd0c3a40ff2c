"""Mark job runs whose worker is lost as failed (or queue them again), so none stays "running" forever."""

from django.conf import settings
from django.core.management.base import BaseCommand

from jobs.runner import MAX_ATTEMPTS, reap_stale, recover_lost


class Command(BaseCommand):
    help = (
        "Mark running jobs whose worker is lost (its process is gone, or no heartbeat for "
        "CLAWGYM_JOB_STALE_SECONDS) as failed (cancelled, if a cancel was requested). Safe to run from cron."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--requeue",
            action="store_true",
            help=f"queue lost runs again instead (up to {MAX_ATTEMPTS} attempts; failed after that), and hand deliveries no worker claimed back to the broker",
        )

    def handle(self, *args, requeue, **options):
        if requeue:
            done = recover_lost()
            self.stdout.write(
                f"Queued {len(done['requeued'])} lost job run(s) again {done['requeued']}; "
                f"marked {len(done['failed'])} failed {done['failed']} "
                f"and {len(done['cancelled'])} cancelled {done['cancelled']}; "
                f"handed {len(done['redelivered'])} delivered but never claimed back to the broker "
                f"{done['redelivered']}."
            )
            return
        count = reap_stale()
        self.stdout.write(
            f"Marked {count} lost job run(s) failed "
            f"(stale after {settings.CLAWGYM_JOB_STALE_SECONDS} s without a heartbeat)."
        )
