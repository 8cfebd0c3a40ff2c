"""/healthz for load balancers and compose healthchecks (no sign-in), /metrics for Prometheus (protected).

/healthz answers everyone ok or unhealthy (200 or 503); what each check found (the database's vendor, the broker,
the workers seen per queue, free disk) only to those who may read /metrics (see below) and to admins, signed in or
with an API token: an anonymous prober learns nothing of the deployment but whether it is up.

/metrics is served to a request from CLAWGYM_METRICS_ALLOW_NETWORKS (loopback by default: a Prometheus on the same
host, or a sidecar) or carrying `Authorization: Bearer <CLAWGYM_METRICS_TOKEN>` when a token is set; anyone else
gets 403. Behind a front proxy on the same host every request comes from loopback unless uvicorn takes the client's
address from X-Forwarded-For (it does for proxies in --forwarded-allow-ips): a front proxy that does not set it must
not pass /metrics on.

Several web processes (uvicorn --workers N): set PROMETHEUS_MULTIPROC_DIR to an empty folder of their own (emptied
before the server starts); each process writes its metrics there and any of them answers /metrics with the sum.
"""

import hmac
import ipaddress
import os

import prometheus_client
from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import multiprocess
from rest_framework.authentication import TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from accounts.roles import ADMIN, has_role

from . import health
from .metrics import ClawGymCollector


@never_cache
@require_GET
def healthz(request):
    report = health.report()
    code = 200 if report["status"] == "ok" else 503
    if not sees_health_details(request):
        return JsonResponse({"status": report["status"]}, status=code)
    return JsonResponse(report, status=code)


def sees_health_details(request) -> bool:
    return metrics_allowed(request) or _admin(request)


def _admin(request) -> bool:
    """An admin signed in, or sending their API token (`Authorization: Token …`, as scripts and the deployment test
    call the API): this is a plain Django view, which DRF's authentication does not reach by itself."""
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        return has_role(user, ADMIN)
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme != "Token" or not token.strip():
        return False
    try:
        user, _ = TokenAuthentication().authenticate_credentials(token.strip())
    except AuthenticationFailed:
        return False
    return has_role(user, ADMIN)


def _allowed_network(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    for network in settings.CLAWGYM_METRICS_ALLOW_NETWORKS:
        try:
            if ip in ipaddress.ip_network(network, strict=False):
                return True
        except ValueError:  # a bad entry must not open anything; it is reported by the check below
            continue
    return False


def metrics_allowed(request) -> bool:
    token = settings.CLAWGYM_METRICS_TOKEN
    if token:
        given = request.headers.get("Authorization", "")
        if given.startswith("Bearer ") and hmac.compare_digest(given[7:].encode(), token.encode()):
            return True
    return _allowed_network(request.META.get("REMOTE_ADDR", ""))


def _registry():
    directory = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if not directory:
        return prometheus_client.REGISTRY
    # Every web process's request and proxy metrics, summed; ours read from the database once.
    registry = prometheus_client.CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=directory)
    registry.register(ClawGymCollector())
    return registry


@never_cache
@require_GET
def metrics(request):
    if not metrics_allowed(request):
        return HttpResponse(
            "403 Forbidden: /metrics is served to CLAWGYM_METRICS_ALLOW_NETWORKS or with CLAWGYM_METRICS_TOKEN.\n",
            status=403,
            content_type="text/plain",
        )
    output = prometheus_client.generate_latest(_registry())
    return HttpResponse(output, content_type=prometheus_client.CONTENT_TYPE_LATEST)
