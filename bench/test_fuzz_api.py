"""The API fuzzer (bench/fuzz_api.py, `make fuzz`): its checks count what they should on a scripted app, and its CI
profile over the whole API finds no server error and no answer that breaks its own schema."""

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from lib.loopback import serve_in_thread, stop_server

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR / "bench"))
import fuzz_api  # noqa: E402  (bench/ script)

CONFIG = tomllib.loads((BASE_DIR / "bench" / "fuzz.toml").read_text())


async def scripted_app(scope, receive, send):
    """/ok answers as its schema says, /lying a string where an integer is documented, /broken a 500."""
    status, body = {"/ok": (200, {"n": 1}), "/lying": (200, {"n": "one"})}.get(scope["path"], (500, {"e": "boom"}))
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


def operation(name: str) -> dict:
    number = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    return {
        "get": {
            "operationId": name,
            "responses": {"200": {"description": "ok", "content": {"application/json": {"schema": number}}}},
        }
    }


SCHEMA = {
    "openapi": "3.0.3",
    "info": {"title": "scripted", "version": "1"},
    "paths": {f"/{name}": operation(name) for name in ("ok", "lying", "broken")},
}


def test_the_checks_count_server_errors_and_schema_violations():
    server, thread, port = serve_in_thread(scripted_app)
    try:
        result = fuzz_api.fuzz(
            SCHEMA, CONFIG["profiles"]["ci"], CONFIG["checks"], f"http://127.0.0.1:{port}", {}, {}, ["GET"], None
        )
    finally:
        stop_server(server, thread)
    assert result["operations"] == {"GET /ok", "GET /lying", "GET /broken"} and result["requests"] >= 3
    found = {(f["operation"], f["kind"]) for f in result["failures"]}
    assert found == {("GET /broken", "server_errors"), ("GET /lying", "schema_violations")}, result["failures"]


async def door_app(scope, receive, send):
    """/refused turns everyone away (401); /ok answers; the content type of every request is recorded."""
    door_app.seen.append((scope["path"], dict(scope["headers"]).get(b"content-type", b"").decode()))
    refusal = {"detail": "Authentication credentials were not provided."}  # DRF's words
    status, body = {"/refused": (401, refusal)}.get(scope["path"], (200, {"n": 1}))
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


def test_an_operation_that_refuses_the_role_gets_one_request_and_the_others_the_whole_profile():
    profile = CONFIG["profiles"]["ci"] | {"phases": ["fuzzing"], "max_examples": 5, "once_if_refused": ["anonymous"]}
    query = [{"name": "q", "in": "query", "required": True, "schema": {"type": "integer"}}]  # 5 requests, not 1
    paths = {f"/{name}": {"get": operation(name)["get"] | {"parameters": query}} for name in ("ok", "refused")}
    schema = SCHEMA | {"paths": paths}
    door_app.seen = []
    server, thread, port = serve_in_thread(door_app)
    try:
        url = f"http://127.0.0.1:{port}"
        result = fuzz_api.fuzz_role("anonymous", profile, schema, CONFIG["checks"], url, {}, {}, ["GET"], None)
        to_refused = sum(1 for path, _ in door_app.seen if path == "/refused")
        ok_alone = fuzz_api.fuzz(schema, profile, CONFIG["checks"], url, {}, {}, ["GET"], None, {"GET /ok"})
    finally:
        stop_server(server, thread)
    assert result["operations"] == {"GET /ok", "GET /refused"} and result["refused"] == {"GET /refused"}
    assert to_refused == 1 and not result["failures"]
    assert result["requests"] == 2 + ok_alone["requests"]  # the probe's two, then /ok's whole run


def test_the_coverage_phase_writes_each_body_in_the_first_media_type_only():
    body = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    post = operation("make")["get"] | {
        "requestBody": {
            "required": True,
            "content": {kind: {"schema": body} for kind in ("application/json", "application/x-www-form-urlencoded")},
        }
    }
    schema = SCHEMA | {"paths": {"/make": {"post": post}}}
    profile = CONFIG["profiles"]["ci"] | {"phases": ["coverage"]}
    seen = {}
    for first_only in (False, True):
        door_app.seen = []
        server, thread, port = serve_in_thread(door_app)
        try:
            fuzz_api.fuzz(
                schema,
                profile | {"coverage_first_media_type": first_only},
                CONFIG["checks"],
                f"http://127.0.0.1:{port}",
                {},
                {},
                ["POST"],
                None,
            )
        finally:
            stop_server(server, thread)
        seen[first_only] = {kind for path, kind in door_app.seen if path == "/make"}
    assert "application/x-www-form-urlencoded" in seen[False] and "application/json" in seen[True]
    assert "application/x-www-form-urlencoded" not in seen[True]


@pytest.mark.once
@pytest.mark.timeout(900)  # the CI profile takes about 3 minutes here; its own bound is 840 s
def test_the_ci_profile_finds_no_server_error_and_no_schema_violation():
    done = subprocess.run(
        [sys.executable, "bench/fuzz_api.py", "--profile", "ci"],
        cwd=BASE_DIR,
        capture_output=True,
        text=True,
        timeout=840,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["server_errors"] == 0 and report["schema_violations"] == 0, done.stdout[-8000:] + done.stderr[-3000:]
    assert done.returncode == 0
    schema = json.loads(
        subprocess.run(
            [sys.executable, "manage.py", "spectacular", "--format", "openapi-json"],
            cwd=BASE_DIR,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    methods = {"get", "post", "put", "patch", "delete"}
    assert report["operations"] == sum(1 for ops in schema["paths"].values() for m in ops if m in methods)
    assert report["requests"] > 10 * report["operations"]
