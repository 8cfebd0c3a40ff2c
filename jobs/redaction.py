"""What people without the admin role see of errors: no tracebacks and no server paths.

A job's `error` holds the exception and its traceback (for admins, who run the servers); everyone else gets its
first line with every absolute path cut to its last part ("…/upload.zip"), and the same for logs, parameters and
results. Admins see everything on the pages (folded) and in the API.
"""

import re

from accounts.roles import ADMIN, has_role

# An absolute path of two parts or more. Not a URL: "://host/x" has ":" or "/" before each slash, "a/b" a letter.
SERVER_PATH = re.compile(r"(?<![\w.:/~-])/(?:[\w.@+~-]+/)+[\w.@+~-]+")


def hide_paths(text: str) -> str:
    """`text` with each absolute path cut to its last part."""
    return SERVER_PATH.sub(lambda m: "…/" + m.group().rsplit("/", 1)[1], text or "")


def error_summary(error: str) -> str:
    """The exception line of an error, without its traceback, paths hidden.

    The runner stores "Type: message" first, then the traceback; a bare traceback ends with the exception.
    """
    lines = [line.strip() for line in (error or "").splitlines() if line.strip()]
    if not lines:
        return ""
    return hide_paths(lines[-1] if lines[0].startswith("Traceback") else lines[0])


def hide_paths_in(value):
    """A JSON value (params, a result) with paths hidden in every string in it."""
    if isinstance(value, str):
        return hide_paths(value)
    if isinstance(value, list):
        return [hide_paths_in(v) for v in value]
    if isinstance(value, dict):
        return {k: hide_paths_in(v) for k, v in value.items()}
    return value


def sees_server_details(user) -> bool:
    return has_role(user, ADMIN)
