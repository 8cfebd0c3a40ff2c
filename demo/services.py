"""The demo models' endpoints: registered at the address the demo server listens on, disabled when it stops.

    endpoints = register_demo_endpoints("http://127.0.0.1:40123/v1")    # made, or updated and enabled
    disable_demo_endpoints(base_url="http://127.0.0.1:40123/v1")        # those still at that address

Their names start with "demo-" and their model ids with llm.models.DEMO_MODEL_PREFIX, so every page that names them
says they are demo models. Each goes through llm.services, as an endpoint added on the Models page does.
"""

from __future__ import annotations

from decimal import Decimal

from llm.models import ModelEndpoint
from llm.services import create_endpoint, update_endpoint

from .agent import GOOD, WEAK
from .server import GENERATOR, JUDGE, KEY_ENV

Role = ModelEndpoint.Role
DEMO_ENDPOINTS = {  # name -> (model id, roles)
    "demo-agent-good": (GOOD.model, [Role.AGENT]),
    "demo-agent-weak": (WEAK.model, [Role.AGENT]),
    "demo-judge": (JUDGE, [Role.DIAGNOSIS, Role.JUDGE]),
    "demo-generator": (GENERATOR, [Role.GENERATOR]),
}


def register_demo_endpoints(base_url: str, *, user=None) -> list[ModelEndpoint]:
    """Every demo endpoint at `base_url`, enabled, free (no price) and keyed by the demo server's served key."""
    endpoints = []
    for name, (model, roles) in DEMO_ENDPOINTS.items():
        fields = {
            "base_url": base_url,
            "model": model,
            "api_style": ModelEndpoint.ApiStyle.CHAT,
            "api_key_env": KEY_ENV,
            "served_at": base_url,  # the demo server's key goes to this address only
            "roles": [str(role) for role in roles],
            "timeout_seconds": 60.0,
            "max_retries": 1,
            "max_concurrent": 8,
            "sampling": {},
            "price_input_per_mtok": Decimal(0),
            "price_output_per_mtok": Decimal(0),
            "enabled": True,
        }
        existing = ModelEndpoint.objects.filter(name=name).first()
        if existing is None:
            endpoints.append(create_endpoint(name, user=user, **fields))
        else:
            endpoints.append(update_endpoint(existing, user=user, **fields))
    return endpoints


def disable_demo_endpoints(*, base_url: str | None = None, user=None) -> list[ModelEndpoint]:
    """Disable the enabled demo endpoints (only those at `base_url`, when given: another demo server may have
    registered them since). Returns those disabled."""
    found = ModelEndpoint.objects.filter(name__in=DEMO_ENDPOINTS, enabled=True)
    if base_url is not None:
        found = found.filter(base_url=base_url)
    return [update_endpoint(endpoint, user=user, enabled=False) for endpoint in found]
