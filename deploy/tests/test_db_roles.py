"""The sandbox workers' database role (deploy/db_roles.py) on the test database, PostgreSQL only: what it refuses
(API tokens, sessions, accounts, model endpoints, the schema) and what the sandbox queue's jobs need of it (rows of
rollouts and jobs, users read). The compose test checks the same in the deployment, where the sandbox workers run
their rollouts and sanity checks as this role."""

import os
import secrets

import psycopg
import pytest
from django.db import connection
from rest_framework.authtoken.models import Token

from deploy.db_roles import access, grant_sandbox_role
from llm.models import ModelEndpoint

postgresql_only = pytest.mark.skipif(connection.vendor != "postgresql", reason="database roles are PostgreSQL's")


@pytest.fixture
def sandbox_role(transactional_db):
    """The role under a name of this session's (roles are the server's, not the database's), its grants committed;
    a psycopg connection as it. Dropped afterwards."""
    name, password = f"clawgym_sandbox_test_{os.getpid()}", secrets.token_urlsafe(16)
    grant_sandbox_role(password, name=name)
    settings = connection.settings_dict
    conninfo = psycopg.conninfo.make_conninfo(
        host=settings["HOST"] or "127.0.0.1",
        port=settings["PORT"] or 5432,
        dbname=settings["NAME"],
        user=name,
        password=password,
    )
    try:
        with psycopg.connect(conninfo, autocommit=True) as as_role:
            yield as_role
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f'DROP OWNED BY "{name}"; DROP ROLE "{name}"')


def refusal(conn, statement: str, params=()) -> str:
    """'' when the statement ran, else the database's first line of why not."""
    try:
        conn.execute(statement, params)
        return ""
    except psycopg.Error as exc:
        return str(exc).splitlines()[0]


@postgresql_only
def test_the_sandbox_role_reads_no_credentials_and_changes_no_account_endpoint_or_schema(sandbox_role, admin_user):
    Token.objects.create(user=admin_user)
    ModelEndpoint.objects.create(name="judge", base_url="http://127.0.0.1:9/v1", model="m")
    for statement in [
        "SELECT key FROM authtoken_token",
        "SELECT session_key FROM django_session",
        "SELECT count(*) FROM axes_accessattempt",
        "UPDATE llm_modelendpoint SET base_url = 'http://elsewhere.invalid/v1'",
        "UPDATE auth_user SET is_superuser = true",
        "DELETE FROM auth_user_groups",
        "INSERT INTO authtoken_token (key, user_id, created) SELECT 'k', id, now() FROM auth_user",
        "CREATE TABLE taken (x int)",
    ]:
        assert "permission denied" in refusal(sandbox_role, statement), statement
    assert "must be owner" in refusal(sandbox_role, "ALTER TABLE evaluation_rollout ADD COLUMN taken int")
    assert ModelEndpoint.objects.get().base_url == "http://127.0.0.1:9/v1"


@postgresql_only
def test_the_sandbox_role_writes_what_the_sandbox_queue_writes(sandbox_role, admin_user):
    """A job row naming its creator (the foreign key's check reads auth_user), and the users read, as jobs do."""
    assert refusal(sandbox_role, "SELECT username, password FROM auth_user") == ""
    assert refusal(sandbox_role, "SELECT count(*) FROM llm_modelendpoint") == ""
    inserted = refusal(
        sandbox_role,
        """
        INSERT INTO jobs_jobrun (kind, queue, engine, params, status, progress_done, progress_total, message, log_tail,
            error, attempts, worker, cancel_requested, created_at, failed_items, subject, subject_url, items_total,
            created_by_id)
        VALUES ('sanity', 'sandbox', 'celery', '{}', 'running', 0, 0, '', '', '', 1, 'host:1', false, now(), 0, '',
            '', 0, %s)""",
        [admin_user.pk],
    )
    assert inserted == ""
    assert refusal(sandbox_role, "UPDATE jobs_jobrun SET status = 'succeeded'") == ""
    assert refusal(sandbox_role, "DELETE FROM jobs_jobrun") == ""


def test_every_table_has_the_access_its_name_gives():
    assert [access(t) for t in ("authtoken_token", "axes_accesslog", "django_q_schedule")] == ["none"] * 3
    assert [access(t) for t in ("auth_user", "llm_modelendpoint", "training_jobs_trainingrun")] == ["read"] * 3
    assert [access(t) for t in ("evaluation_rollout", "jobs_jobrun", "llm_modelcall", "tasks_blob")] == ["write"] * 4
