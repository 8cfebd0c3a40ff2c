"""Our Prometheus collectors, beside django-prometheus's request metrics (counts and latency by view).

Read from the database and the broker when /metrics is scraped (so every web process reports the same numbers):
- clawgym_job_runs{queue, status}: JobRuns queued and running, per queue (both engines);
- clawgym_broker_queue_depth{engine, queue}: messages waiting in the broker (Celery: each Redis queue list; django-q2:
  its ORM queue table, one queue for the whole cluster);
- clawgym_workers_seen{queue}: workers that beat within CLAWGYM_WORKER_SEEN_SECONDS (jobs.workers);
- clawgym_rollouts_running: rollouts whose agent or checker is running now.
Counted in the web process that serves the proxy (llm.metrics): clawgym_proxy_streams_in_flight and
clawgym_proxy_tokens_total{direction}. A part that cannot be read (database down) is left out and counted in
clawgym_metrics_errors_total{part}, so a scrape still answers with the rest.
"""

import logging

import redis
from django.conf import settings
from django.db.models import Count
from django_q.models import OrmQ
from prometheus_client import REGISTRY, Counter
from prometheus_client.core import GaugeMetricFamily

from evaluation.models import Rollout
from jobs.models import JobRun
from jobs.registry import QUEUES
from jobs.workers import seen_by_queue

log = logging.getLogger(__name__)

COLLECT_ERRORS = Counter("clawgym_metrics_errors", "Parts of a /metrics scrape that could not be read.", ["part"])
# Celery's Redis transport keeps one list per queue and priority step: "name", then "name\x06\x16<priority>".
CELERY_PRIORITY_SEPARATOR = "\x06\x16"
CELERY_PRIORITY_STEPS = (0, 3, 6, 9)


def celery_queue_depth(url: str, queues) -> dict[str, int]:
    client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    try:
        pipe = client.pipeline(transaction=False)
        keys = []
        for queue in queues:
            for step in CELERY_PRIORITY_STEPS:
                key = queue if step == 0 else f"{queue}{CELERY_PRIORITY_SEPARATOR}{step}"
                keys.append(queue)
                pipe.llen(key)
        depth = dict.fromkeys(queues, 0)
        for queue, length in zip(keys, pipe.execute(), strict=True):
            depth[queue] += length
        return depth
    finally:
        client.close()


class ClawGymCollector:
    def describe(self):
        # The names only: without describe(), registering would collect (query the database) at start-up.
        yield GaugeMetricFamily("clawgym_job_runs", "", labels=["queue", "status"])
        yield GaugeMetricFamily("clawgym_broker_queue_depth", "", labels=["engine", "queue"])
        yield GaugeMetricFamily("clawgym_workers_seen", "", labels=["queue"])
        yield GaugeMetricFamily("clawgym_rollouts_running", "")

    def collect(self):
        yield from self._part("job_runs", self._job_runs)
        yield from self._part("broker", self._broker)
        yield from self._part("workers", self._workers)
        yield from self._part("rollouts", self._rollouts)

    def _part(self, name, read):
        try:
            families = list(read())
        except Exception as exc:  # one line: a database that is down would otherwise log a traceback a scrape
            log.warning("metrics: could not read %s: %s: %s", name, type(exc).__name__, exc)
            COLLECT_ERRORS.labels(part=name).inc()
            return []
        return families

    def _job_runs(self):
        family = GaugeMetricFamily(
            "clawgym_job_runs", "Job runs queued or running, per queue.", labels=["queue", "status"]
        )
        counts = dict.fromkeys(((q, s) for q in QUEUES for s in JobRun.ACTIVE), 0)
        rows = JobRun.objects.filter(status__in=JobRun.ACTIVE).order_by().values_list("queue", "status")
        for queue, status, n in rows.annotate(n=Count("id")):
            counts[(queue, status)] = n
        for (queue, status), n in sorted(counts.items()):
            family.add_metric([queue, str(status)], n)
        yield family

    def _broker(self):
        engine = settings.CLAWGYM_JOB_ENGINE
        family = GaugeMetricFamily(
            "clawgym_broker_queue_depth", "Messages waiting in the job broker, per queue.", labels=["engine", "queue"]
        )
        if engine == "celery":
            for queue, depth in celery_queue_depth(settings.CELERY_BROKER_URL, QUEUES).items():
                family.add_metric([engine, queue], depth)
        else:
            name = settings.Q_CLUSTER["name"]
            family.add_metric([engine, name], OrmQ.objects.filter(key=name).count())
        yield family

    def _workers(self):
        family = GaugeMetricFamily("clawgym_workers_seen", "Workers seen alive recently, per queue.", labels=["queue"])
        for queue, n in seen_by_queue().items():
            family.add_metric([queue], n)
        yield family

    def _rollouts(self):
        running = Rollout.objects.filter(status=Rollout.Status.RUNNING).count()
        yield GaugeMetricFamily("clawgym_rollouts_running", "Rollouts running now.", value=running)


_collector: ClawGymCollector | None = None


def register() -> None:
    global _collector
    if _collector is None:
        _collector = ClawGymCollector()
        REGISTRY.register(_collector)
