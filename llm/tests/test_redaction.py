"""Proxy tokens are credentials: the web server's access log masks them."""

import logging

from llm.apps import RedactProxyTokens


def test_the_access_log_masks_proxy_tokens():
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        "",
        0,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "POST", "/proxy/s3cr3t-Tok_en/v1/chat/completions", "1.1", 200),
        None,
    )
    assert RedactProxyTokens().filter(record)
    assert "s3cr3t" not in record.getMessage() and "/proxy/…/v1/chat/completions" in record.getMessage()
    for name in ("uvicorn.access", "django.request"):
        assert RedactProxyTokens in {type(f) for f in logging.getLogger(name).filters}


def test_django_logs_refused_proxy_requests_without_the_token(live_server_asgi, caplog):
    import httpx

    with caplog.at_level(logging.WARNING, logger="django.request"):
        assert httpx.get(f"{live_server_asgi.url}/proxy/closed-token-xyz/v1/models").status_code == 401
    messages = [r.getMessage() for r in caplog.records if r.name == "django.request"]
    assert messages == ["Unauthorized: /proxy/…/v1/models"]
