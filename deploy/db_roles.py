"""The sandbox workers' PostgreSQL role: `python -m deploy.db_roles`, as the database's owner, after the migrations
(docker-compose.yml's `migrate` service runs it on every `up`, so the grants cover every table there is).

A sandbox worker runs the `sandbox` queue's jobs (rollouts, sanity checks, regrades, synthesis items), and each reads
and writes its rows through the ORM, so it needs the database. But it is the host that untrusted code runs on, as
root with the engine's socket, and there may be many such hosts: one that is taken should not become an admin of
the site. Its role, clawgym_sandbox (password POSTGRES_SANDBOX_PASSWORD), may read and write what those jobs do
(the catalog, rollouts, runs, reviews' candidates, jobs, the proxy's sessions and calls) and nothing more:

- no access to API tokens, sessions, django-axes' records, the admin log, django-q2's tables (the compose deployment's
  engine is Celery): reading a token or a session key is signing in as its owner;
- read only: users, groups and permissions (a job names who asked for it), content types, the migrations' record,
  model endpoints (a changed base_url would send the web app's API keys to another host) and training (runs,
  checkpoints, datasets: the gpu workers' input);
- no schema changes: it owns nothing, and may create nothing in schema public (PostgreSQL 15 and later; on an older
  server whose schema public still lets everyone create, this fails until that grant is revoked).

It stays a limit on the database only: the role can still write rollouts and tasks, so a taken sandbox host can
falsify results, and with the broker's password it can queue jobs (README, "Deploying", trust boundaries).
"""

from __future__ import annotations

import fnmatch
import os
import sys

ROLE = "clawgym_sandbox"
NO_ACCESS = ["authtoken_token", "django_session", "axes_*", "django_admin_log", "django_q_*"]
READ_ONLY = ["auth_*", "django_content_type", "django_migrations", "llm_modelendpoint", "training_jobs_*"]


def access(table: str) -> str:
    """'none', 'read' or 'write': what the sandbox role may do with the table."""
    if any(fnmatch.fnmatchcase(table, pattern) for pattern in NO_ACCESS):
        return "none"
    if any(fnmatch.fnmatchcase(table, pattern) for pattern in READ_ONLY):
        return "read"
    return "write"


def grant_sandbox_role(password: str, name: str = ROLE) -> dict[str, list[str]]:
    """Create or update the role and set its grants on every table of schema public, in one transaction (a sandbox
    worker running meanwhile sees the old grants or the new ones). Returns {access: [tables]}."""
    from django.db import connection, transaction
    from psycopg import sql

    if connection.vendor != "postgresql":
        raise SystemExit(f"deploy.db_roles: the database is {connection.vendor}; roles are PostgreSQL's")
    role = sql.Identifier(name)
    tables = sorted(connection.introspection.table_names())
    by_access: dict[str, list[str]] = {"none": [], "read": [], "write": []}
    for table in tables:
        by_access[access(table)].append(table)

    def run(statement: sql.Composable) -> None:
        cursor.execute(statement.as_string(connection.connection))

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [name])
        if cursor.fetchone() is None:
            run(sql.SQL("CREATE ROLE {}").format(role))
        run(
            sql.SQL(
                "ALTER ROLE {} WITH LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS PASSWORD {}"
            ).format(role, sql.Literal(password))
        )
        run(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(role))
        run(sql.SQL("REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {}").format(role))
        run(sql.SQL("REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM {}").format(role))
        for table in by_access["read"]:
            run(sql.SQL("GRANT SELECT ON {} TO {}").format(sql.Identifier(table), role))
        for table in by_access["write"]:
            run(sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON {} TO {}").format(sql.Identifier(table), role))
        # Identity columns need no grant of their own; a serial column's sequence does.
        run(sql.SQL("GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {}").format(role))
        cursor.execute("SELECT has_schema_privilege(%s, 'public', 'CREATE')", [name])
        if cursor.fetchone()[0]:
            raise SystemExit(
                f"deploy.db_roles: {name} may create objects in schema public (PostgreSQL before 15 lets everyone): "
                "REVOKE CREATE ON SCHEMA public FROM PUBLIC, and GRANT CREATE ON SCHEMA public to the app's own role"
            )
    return by_access


def main() -> None:
    import django

    password = os.environ.get("POSTGRES_SANDBOX_PASSWORD", "")
    if not password:
        raise SystemExit("deploy.db_roles: set POSTGRES_SANDBOX_PASSWORD (the sandbox workers' database password)")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawgym_site.settings")
    django.setup()
    by_access = grant_sandbox_role(password)
    print(
        f"database role {ROLE}: read and write {len(by_access['write'])} tables, read {len(by_access['read'])}, "
        f"no access to {len(by_access['none'])}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
