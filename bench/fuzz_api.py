#!/usr/bin/env python
"""The API fuzzer (issue 34): Schemathesis over the app's OpenAPI schema, every operation as every role.

1. The whole run happens in a network namespace of its own that holds only a loopback interface (`unshare --net`,
   entered by re-running this script): the fuzzer, the app and anything the app might start can reach nothing but
   127.0.0.1, whatever a generated request asks the app to do (an endpoint's base_url, a path to import). It checks
   that an outside address is unreachable before it starts.
2. A throwaway database: a SQLite file in a temporary folder (CLAWGYM_VAR_DIR and DATABASE_URL point there; never
   the project's var/), migrated and seeded through the real commands and services: the example tasks
   (import_tasks), a viewer, a reviewer and an admin with API tokens (create_user --token), model endpoints (agent,
   judge, generator; `endpoints add`, pointing at a closed loopback port), a benchmark with its candidates (one
   accepted and frozen into a version), an evaluation run (its rollouts queued), a training dataset, a base model and
   a quality sample. No job worker runs: what the fuzzer queues stays queued.
3. The app under uvicorn on a free loopback port, as the deployment serves it.
4. For each role (anonymous, then viewer, reviewer, admin: `Authorization: Token …`), Schemathesis runs the phases of
   the profile (bench/fuzz.toml) over every operation, path parameters drawn half of the time from the ids the seed
   made (so that requests reach the objects, not only 404s). Operations that delete run last, after every role
   has had the others, so that they do not empty the database under the rest. A role in the profile's
   `once_if_refused` sends each operation one request first, and the phases go on only where it was not refused at
   the door (401 or 403 from DRF's authentication and permission classes: before any validation, whatever the
   request).
5. Each answer is checked: not a server error (5xx, or no answer within the profile's request timeout) and, when its
   status is documented, matching its schema. Every failure is printed with the request that caused it (a curl
   line) and the server's log is kept when there was one.

The last line is one JSON object: {"operations": N, "requests": R, "server_errors": S, "schema_violations": V}; the
exit status is 1 unless S and V are 0.

    .venv/bin/python bench/fuzz_api.py [--profile ci|long] [--config bench/fuzz.toml] [--keep]
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import tomllib
from io import StringIO
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
BENCH = BASE_DIR / "bench"
sys.path.insert(0, str(BASE_DIR))
sys.path.insert(0, str(BENCH))
from netutil import free_port, start_app, wait_for_port  # noqa: E402  (bench/ helper)

IN_NAMESPACE = "CLAWGYM_FUZZ_NETNS"
OUTSIDE = ("192.0.2.1", 80)  # TEST-NET-1: never routed; in the namespace there is no route at all
CLOSED_PORT_URL = "http://127.0.0.1:9/v1"  # discard port: nothing listens there in the namespace


# --- the network namespace -----------------------------------------------------------------------------------------


def enter_namespace() -> int:
    """Run this script again inside a new network namespace (loopback only) and return its exit status."""
    unshare = shutil.which("unshare")
    if unshare is None:
        sys.exit("bench/fuzz_api.py needs unshare (util-linux) to run in a network namespace of its own")
    argv = [unshare, "--net"] + ([] if os.geteuid() == 0 else ["--map-root-user"])
    return subprocess.call([*argv, sys.executable, *sys.argv], env=os.environ | {IN_NAMESPACE: "1"})


def loopback_up() -> None:
    """Bring `lo` up in the new namespace (it starts down), with the SIOCSIFFLAGS ioctl: no iproute2 needed."""
    import fcntl
    import struct

    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(sock, siocgifflags, request)[:18])[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sH", b"lo", flags | iff_up))


def check_isolated() -> None:
    """Refuse to fuzz when an outside address is reachable: the namespace is what keeps the traffic on loopback."""
    with socket.socket() as sock:
        sock.settimeout(2)
        try:
            sock.connect(OUTSIDE)
        except OSError:
            return
    sys.exit(f"{OUTSIDE[0]} is reachable from the fuzzer's network namespace: refusing to fuzz")


# --- the database --------------------------------------------------------------------------------------------------


def command(*args) -> str:
    from django.core.management import call_command

    out = StringIO()
    call_command(*args, stdout=out, stderr=StringIO())
    return out.getvalue()


def seed(folder: Path) -> dict[str, str]:
    """Migrate and fill the fuzz database through the real commands and services; return each role's API token."""
    command("migrate", "--noinput")
    command("import_tasks", str(BASE_DIR / "examples" / "tasks"))
    tokens = {
        role: command("create_user", f"fuzz-{role}", "--role", role, "--token").strip().splitlines()[-1]
        for role in ("viewer", "reviewer", "admin")
    }
    for name, role in (("fuzz-agent", "agent"), ("fuzz-judge", "judge"), ("fuzz-generator", "generator")):
        command("endpoints", "add", name, "--base-url", CLOSED_PORT_URL, "--model", name, "--role", role)

    from django.contrib.auth import get_user_model

    from benchmarks.models import Benchmark
    from evaluation.services.runs import create_eval_run
    from llm.models import ModelEndpoint
    from review import quality, services
    from tasks.models import Task
    from training_jobs.services.datasets import build_dataset

    admin = get_user_model().objects.get(username="fuzz-admin")
    benchmark = Benchmark.objects.create(name="fuzz-bench")
    tasks = list(Task.objects.order_by("external_id"))
    services.propose_candidates(benchmark, tasks, user=admin)
    first = benchmark.candidates.order_by("pk").first()
    services.decide(first, "accept", user=admin, override_reason="the fuzzer's seed: no sanity check runs here")
    version = services.freeze_version(benchmark, user=admin, note="fuzz")
    agent = ModelEndpoint.objects.get(name="fuzz-agent")
    run, _ = create_eval_run(endpoint=agent, benchmark_version=version, user=admin)
    build_dataset(selection={"eval_runs": [run.pk]}, name="fuzz-dataset", user=admin)
    model = folder / "fuzz-base-model"  # what base_models checks a folder for; no weights: nothing loads it here
    model.mkdir()
    config = {"architectures": ["LlamaForCausalLM"], "max_position_embeddings": 2048}
    (model / "config.json").write_text(json.dumps(config))
    (model / "tokenizer_config.json").write_text("{}")
    command("base_models", "add", "fuzz-base", "--path", str(model))
    quality.draw_sample(name="fuzz-sample", size=2, pool={}, user=admin, seed=1)
    return tokens


# --- the fuzzing ---------------------------------------------------------------------------------------------------


def known_values(base_url: str, schema: dict, admin_headers: dict) -> dict[str, dict[str, list]]:
    """{operation path: {path parameter: values the seed made}}: each parameter's values from its collection (the path
    up to it), read as the admin, e.g. /api/candidates/{id}/claim/ → the `id`s of /api/candidates/."""
    import requests

    found = {}
    session = requests.Session()
    session.trust_env = False  # no proxy from the environment: loopback only
    for path in schema["paths"]:
        values = {}
        for part in path.split("/"):
            if not part.startswith("{"):
                continue
            name = part[1:-1]
            collection = path.split(part)[0]
            if "{" in collection:
                continue  # nested (a task's revision numbers): generated
            response = session.get(base_url + collection, headers=admin_headers, timeout=60)
            rows = response.json() if response.status_code == 200 else []
            rows = rows.get("results", []) if isinstance(rows, dict) else rows
            field = next((f for f in (name, name.removeprefix("task_"), "id") if rows and f in rows[0]), None)
            if field:
                values[name] = [row[field] for row in rows if row.get(field) is not None][:20]
        if values:
            found[path] = values
    return found


def schemathesis_config(profile: dict, checks: dict, base_url: str, headers: dict):
    from schemathesis import Config

    phases = {name: {"enabled": name in profile["phases"]} for name in ("examples", "coverage", "fuzzing", "stateful")}
    return Config.from_dict(
        {
            "seed": profile["seed"],
            "cache": {"enabled": False},  # no state kept between runs (.schemathesis/): each run is its seed's alone
            "base-url": base_url,
            "headers": headers,
            "workers": 1,
            "request-timeout": profile["request_timeout"],
            "continue-on-failure": True,
            "generation": {
                "max-examples": profile["max_examples"],
                "deterministic": profile["deterministic"],
                "database": "none",
            },
            "phases": phases,
            "checks": {"enabled": False} | {name: {"enabled": True} for name in checks},
        }
    )


def refused_at_door(response) -> bool:
    """Whether DRF's authentication or permission classes turned the request away (401 or 403 in their own words),
    before the view read anything of it. A view that refuses later, for what a request asks, says why in its own."""
    from rest_framework.exceptions import NotAuthenticated, PermissionDenied

    if response is None or response.status_code not in (401, 403):
        return False
    try:
        detail = json.loads(response.content).get("detail")
    except (ValueError, AttributeError):
        return False
    return detail in (str(NotAuthenticated.default_detail), str(PermissionDenied.default_detail))


def fuzz(
    schema_dict: dict,
    profile: dict,
    checks: dict,
    base_url: str,
    headers: dict,
    known: dict,
    methods,
    only,
    operations=None,
) -> dict:
    """One role's run over the operations with `methods` (and paths matching `only`, a regular expression, when
    given; and only the `operations`, by label, when given): the operations it tested, the requests, the failures,
    and the operations that refused every request at the door."""
    import hypothesis.strategies as st
    import schemathesis
    from schemathesis.engine import events, from_schema
    from schemathesis.specs.openapi.adapter.parameters import ParameterLocation

    chosen = {"method": list(methods)} | ({"path_regex": only} if only else {})
    if operations is not None:
        chosen["name"] = sorted(operations)  # in the same include: two includes would be either one's operations
    schema = schemathesis.openapi.from_dict(
        schema_dict, config=schemathesis_config(profile, checks, base_url, headers)
    ).include(**chosen)

    @schema.hook
    def filter_case(context, case):
        # The coverage phase writes each body case once per media type the operation accepts (JSON, form, multipart);
        # with `coverage_first_media_type`, once: in the first (JSON), the same serializer behind every parser.
        meta = case.meta
        if not profile.get("coverage_first_media_type") or meta is None or meta.phase.name != "coverage":
            return True
        if getattr(meta.phase.data, "parameter_location", None) != ParameterLocation.BODY or not case.media_type:
            return True
        bodies = list(case.operation.body)
        return not bodies or case.media_type == bodies[0].media_type

    @schema.hook
    def flatmap_path_parameters(context, path_parameters):
        values = known.get(context.operation.path, {}) if context.operation else {}
        if not values or not path_parameters:
            return st.just(path_parameters)
        seeded = st.fixed_dictionaries(
            {
                name: st.sampled_from(values[name]) if values.get(name) else st.just(value)
                for name, value in path_parameters.items()
            }
        )
        return st.one_of(st.just(path_parameters), seeded)

    tested, requests, failures, errors = set(), 0, [], []
    door = {}  # operation label → for each answer, whether it was a refusal at the door
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished):
            recorder = event.recorder
            # By each request's own operation: a stateful scenario's label is "Stateful tests", not an operation.
            for case_id, interaction in recorder.interactions.items():
                label = recorder.cases[case_id].value.operation.label
                tested.add(label)
                door.setdefault(label, set()).add(refused_at_door(interaction.response))
            requests += len(recorder.interactions)
            for case_id, nodes in recorder.checks.items():
                for node in nodes:
                    if node.name in checks and node.failure_info is not None:
                        case = recorder.cases[case_id].value
                        failures.append(
                            {
                                "kind": checks[node.name],
                                "operation": case.operation.label,
                                "title": node.failure_info.failure.title,
                                "message": node.failure_info.failure.message[:2000],
                                "curl": node.failure_info.code_sample,
                                "case": case.id,
                            }
                        )
        elif isinstance(event, events.NonFatalError):
            errors.append(f"{event.label}: {event.info.message}")
        elif isinstance(event, events.FatalError):
            raise event.exception
    refused = {label for label, answers in door.items() if answers == {True}}
    return {"operations": tested, "requests": requests, "failures": failures, "errors": errors, "refused": refused}


def fuzz_role(role: str, profile: dict, schema_dict: dict, checks: dict, base_url: str, headers: dict, *where) -> dict:
    """`fuzz` as `role`, with the role's phases (`where`: known, methods, only). A role in the profile's
    `once_if_refused` first sends each operation one request; only the operations that did not refuse it at the door
    (before any validation, whatever the request) get the rest of the profile."""
    phases = profile.get("role_phases", {}).get(role, profile["phases"])
    if role not in profile.get("once_if_refused", ()):
        return fuzz(schema_dict, profile | {"phases": phases}, checks, base_url, headers, *where)
    once = profile | {"phases": ["fuzzing"], "max_examples": 1}
    probe = fuzz(schema_dict, once, checks, base_url, headers, *where)
    admitted = probe["operations"] - probe["refused"]
    if not admitted:
        return probe
    rest = fuzz(schema_dict, profile | {"phases": phases}, checks, base_url, headers, *where, admitted)
    return {
        "operations": probe["operations"] | rest["operations"],
        "requests": probe["requests"] + rest["requests"],
        "failures": probe["failures"] + rest["failures"],
        "errors": probe["errors"] + rest["errors"],
        "refused": probe["refused"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="ci")
    parser.add_argument("--config", default=str(BENCH / "fuzz.toml"))
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (database, server log)")
    parser.add_argument("--only", metavar="REGEX", help="only the operations whose path matches (to replay a failure)")
    parser.add_argument("--role", action="append", help="only these roles (repeatable)")
    args = parser.parse_args()
    config = tomllib.loads(Path(args.config).read_text())
    if args.profile not in config["profiles"]:
        parser.error(f"no profile {args.profile!r} in {args.config}; known: {', '.join(config['profiles'])}")
    profile, checks = config["profiles"][args.profile], config["checks"]

    if os.environ.get(IN_NAMESPACE) != "1":
        return enter_namespace()
    loopback_up()
    check_isolated()

    folder = Path(tempfile.mkdtemp(prefix="clawgym-fuzz-"))
    app_env = {
        "CLAWGYM_VAR_DIR": str(folder / "var"),
        "DATABASE_URL": f"sqlite:///{folder / 'var' / 'fuzz.sqlite3'}",
        "CLAWGYM_SCRATCH_DIR": str(folder / "scratch"),
        "CLAWGYM_JOB_ENGINE": "django_q",
        "DJANGO_SETTINGS_MODULE": "clawgym_site.settings",
    }
    os.environ.update(app_env)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        os.environ.pop(name, None)
    import django

    port = free_port()
    log = (folder / "server.log").open("w")
    # The app starts while the seed migrates and fills the database: it opens the database only for a request.
    server = start_app(port, os.environ.copy(), BASE_DIR, stderr=log)
    try:
        django.setup()
        tokens = seed(folder)
        wait_for_port(port, server)
        base_url = f"http://127.0.0.1:{port}"
        admin = {"Authorization": f"Token {tokens['admin']}"}
        import requests

        session = requests.Session()
        session.trust_env = False
        schema_dict = session.get(f"{base_url}/api/schema/?format=json", headers=admin, timeout=60).json()
        known = known_values(base_url, schema_dict, admin)
        operations, total, failures, errors = set(), 0, [], []
        passes = [("GET", "POST", "PUT", "PATCH"), ("DELETE",)]  # deleting last, for every role
        for methods in passes:
            for role in args.role or config["roles"]:
                headers = {} if role == "anonymous" else {"Authorization": f"Token {tokens[role]}"}
                result = fuzz_role(role, profile, schema_dict, checks, base_url, headers, known, methods, args.only)
                operations |= result["operations"]
                total += result["requests"]
                failures += [failure | {"role": role} for failure in result["failures"]]
                errors += [f"{role}: {error}" for error in result["errors"]]
                print(
                    f"{role:<9} {'/'.join(methods):<20} {len(result['operations']):>4} operations "
                    f"{result['requests']:>6} requests {len(result['failures']):>3} failures "
                    f"({len(result['refused'])} refused at the door)",
                    flush=True,
                )
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
    for failure in failures:
        print(f"\n[{failure['kind']}] {failure['role']} {failure['operation']}: {failure['title']}")
        print(failure["message"])
        print(failure["curl"])
    for error in errors:
        print(f"\n[engine error] {error}")
    counts = {name: sum(1 for f in failures if f["kind"] == name) for name in checks.values()}
    if failures or args.keep:
        print(f"\nthe database and the server's log are in {folder}")
    else:
        shutil.rmtree(folder, ignore_errors=True)
    print(json.dumps({"operations": len(operations), "requests": total} | counts))
    return 1 if any(counts.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
