"""Serving backends are picked by name (training_jobs.serve_backends): each says its own command, streams, timeout
and extra environment, and an unknown name fails loudly, listing the known ones."""

import pytest

from training_jobs.serve_backends import BACKENDS, BATCHED_STREAMS, ServingError, default_backend, serve_backend


def test_an_unknown_backend_names_the_known_ones(settings):
    with pytest.raises(ServingError, match="unknown serving backend 'tgi'; known: vllm, transformers, batched"):
        serve_backend("tgi")
    settings.CLAWGYM_SERVE_BACKEND = "tgi"
    with pytest.raises(ServingError, match="CLAWGYM_SERVE_BACKEND; known: vllm, transformers, batched, auto"):
        default_backend()


def test_auto_is_vllm_only_where_it_can_run(settings, monkeypatch):
    settings.CLAWGYM_SERVE_BACKEND = "auto"
    monkeypatch.setattr(BACKENDS["vllm"], "available", lambda: False)
    assert default_backend() == "transformers"
    monkeypatch.setattr(BACKENDS["vllm"], "available", lambda: True)
    assert default_backend() == "vllm"
    settings.CLAWGYM_SERVE_BACKEND = "batched"
    assert default_backend() == "batched"


def test_each_backend_serves_on_its_socket_with_its_own_settings(settings):
    settings.CLAWGYM_SERVE_CONTINUOUS_BATCHING = False
    settings.CLAWGYM_SERVE_REQUEST_TIMEOUT_SECONDS = 1234
    for name, backend in BACKENDS.items():
        command = backend.command("/models/m", "ckpt-1-2", "/tmp/x/backend.sock")
        assert "/tmp/x/backend.sock" in command and "--port" not in command, name
    vllm, transformers, batched = BACKENDS["vllm"], BACKENDS["transformers"], BACKENDS["batched"]
    assert vllm.env("k") == {"VLLM_API_KEY": "k"} and batched.env("k") == {"CLAWGYM_POLICY_KEY": "k"}
    assert transformers.env("k") == {}
    assert (vllm.streams(), transformers.streams(), batched.streams()) == (8, 1, BATCHED_STREAMS)
    assert transformers.request_timeout() == batched.request_timeout() == 1234.0
    assert vllm.request_timeout() == 120.0  # the endpoints' default: vLLM answers its streams together
    settings.CLAWGYM_SERVE_CONTINUOUS_BATCHING = True
    assert transformers.streams() == 8 and "--continuous-batching" in transformers.command("/m", "n", "/s")


@pytest.mark.django_db
def test_a_served_models_endpoint_is_made_with_the_output_cap_and_keeps_a_changed_one(settings):
    from llm.models import ModelEndpoint
    from llm.sampling import policy_for
    from training_jobs.serving import register_endpoint

    settings.CLAWGYM_SERVED_MAX_TOKENS = 64
    endpoint = register_endpoint("ckpt-1-2", "http://127.0.0.1:41000/v1", "batched", "CLAWGYM_KEY_SERVED_CKPT_1_2")
    assert endpoint.sampling == {"max_tokens": 64}
    assert policy_for(endpoint)["max_output_tokens"] == 64  # what the proxy holds every call of a rollout to
    ModelEndpoint.objects.filter(pk=endpoint.pk).update(sampling={"max_tokens": 192, "temperature": 0.7})
    again = register_endpoint("ckpt-1-2", "http://127.0.0.1:41001/v1", "batched", "CLAWGYM_KEY_SERVED_CKPT_1_2")
    assert again.pk == endpoint.pk and again.base_url == "http://127.0.0.1:41001/v1"
    assert again.sampling == {"max_tokens": 192, "temperature": 0.7}
