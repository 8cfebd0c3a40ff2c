"""ClawGym settings: everything that varies between machines comes from the environment."""

import os
import tempfile
from datetime import timedelta
from pathlib import Path

import dj_database_url

from .env import env_bool, env_choice, env_float, env_int, env_json, env_list, env_str, secret_key

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("CLAWGYM_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

SECRET_KEY = secret_key(BASE_DIR / ".secret_key")
DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_htmx",
    "template_partials",
    "django_q",
    "django_prometheus",
    "axes",
    "accounts",
    "jobs",
    "llm",
    "tasks",
    "synthesis",
    "benchmarks",
    "evaluation",
    "review",
    "training_jobs",
    "ops",
    "demo",
]

MIDDLEWARE = [
    # First and (but for axes) last: request counts and latency by view for /metrics (django-prometheus).
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
    # Last: turns a locked-out login (too many failures) into a 429 page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "clawgym_site.urls"
WSGI_APPLICATION = "clawgym_site.wsgi.application"
ASGI_APPLICATION = "clawgym_site.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "accounts.context_processors.roles",
            ],
        },
    },
]

# SQLite file in the var folder is the embedded default; postgres://… for deployment.
DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'db.sqlite3'}"),
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 0),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Worker processes share the file with the web process: wait for locks instead of failing,
    # and give tests a file (not :memory:) so that real worker processes can see the test data.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 30,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    }
    # One file per test session (pid), so that concurrent test runs on one machine never share a database.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-db-{os.getpid()}.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Sign-in attempts are rate limited per client address by django-axes: after CLAWGYM_LOGIN_FAILURE_LIMIT failures
# within CLAWGYM_LOGIN_COOLOFF_MINUTES, /login/, the admin's login and /api/auth/token/ refuse that address (429)
# until the cool-off has passed with no further failure; a successful sign-in clears the count. Behind a front proxy
# the address is the client's as uvicorn reports it (--proxy-headers, trusted from --forwarded-allow-ips).
AUTHENTICATION_BACKENDS = ["axes.backends.AxesStandaloneBackend", "django.contrib.auth.backends.ModelBackend"]
AXES_FAILURE_LIMIT = env_int("CLAWGYM_LOGIN_FAILURE_LIMIT", 10)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("CLAWGYM_LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = ["ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_VERBOSE = False
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "dashboard"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"  # filled by collectstatic (`make run` does it)
STATIC_ROOT.mkdir(exist_ok=True)
STATICFILES_DIRS = [BASE_DIR / "static"]
MEDIA_ROOT = VAR_DIR / "media"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Uploaded archives can be large; they are streamed to disk, never held in memory.
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
# Request bodies are bounded before they are read (lib.body_limits, around the whole ASGI app): a body over
# its route's limit gets 413 at once (declared length) or as soon as the bytes pass it (chunked). The import upload
# routes take archives; the proxy's limit is CLAWGYM_PROXY_MAX_REQUEST_BYTES; a request carrying no credential (no
# session cookie, no Authorization header) can only be a login, so it gets the anonymous limit.
CLAWGYM_MAX_REQUEST_BYTES = env_int("CLAWGYM_MAX_REQUEST_BYTES", 64 * 1024 * 1024)
CLAWGYM_MAX_UPLOAD_BYTES = env_int("CLAWGYM_MAX_UPLOAD_BYTES", 1024 * 1024 * 1024)
CLAWGYM_ANONYMOUS_MAX_REQUEST_BYTES = env_int("CLAWGYM_ANONYMOUS_MAX_REQUEST_BYTES", 64 * 1024)
# A connection's request line and headers must arrive whole within this many seconds of it opening (or of the last
# response): slow-loris and never-speaking connections are closed (lib.http_timeouts, uvicorn --http).
# Idle keep-alive connections are closed by uvicorn itself after --timeout-keep-alive (5 s).
CLAWGYM_HEADER_TIMEOUT_SECONDS = env_float("CLAWGYM_HEADER_TIMEOUT_SECONDS", 10.0)

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
if env_bool("CLAWGYM_HTTPS", False):
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["accounts.permissions.RolePermission"],
    # DRF's JSON parser, but deeply nested JSON is a 400 (lib.api_parsers), not a RecursionError's 500.
    "DEFAULT_PARSER_CLASSES": [
        "lib.api_parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    # A list answers 400 for a query parameter it does not understand (a view with its own filter_backends lists
    # this one first too).
    "DEFAULT_FILTER_BACKENDS": ["lib.api_filters.UnknownParametersFilter"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "ClawGym API",
    "DESCRIPTION": "Workspace tasks for claw-style agents: catalog, import jobs and job runs.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and its docs pages are for people with a role, like the rest of the API.
    "SERVE_PERMISSIONS": ["accounts.permissions.RolePermission"],
    # Swagger UI and ReDoc assets come from the sidecar package, served locally (no CDN).
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Several models have a `status` with different choices: name each enum after its model.
    "ENUM_NAME_OVERRIDES": {
        "TaskStatusEnum": "tasks.models.Task.Status",
        "JobRunStatusEnum": "jobs.models.JobRun.Status",
        "ApiStyleEnum": "llm.models.ModelEndpoint.ApiStyle",
        "RolloutStatusEnum": "evaluation.models.Rollout.Status",
        "CandidateStatusEnum": "review.models.BenchmarkCandidate.Status",
        "EvalRunStatusEnum": "evaluation.models.EvalRun.Status",
        "DifficultyFilterStatusEnum": "review.models.DifficultyFilter.Status",
        "SynthesisBatchStatusEnum": "synthesis.models.SynthesisBatch.Status",
        "SynthesisItemStatusEnum": "synthesis.models.SynthesisItem.Status",
        "SynthesisStageEnum": "synthesis.models.Stage",
        "QAStageEnum": "synthesis.models.QAStage",
        "TrainingDatasetStatusEnum": "training_jobs.models.TrainingDataset.Status",
    },
}

# --- Task catalog limits (checked on every way in) ---
CLAWGYM_MAX_FILE_BYTES = env_int("CLAWGYM_MAX_FILE_BYTES", 10 * 1024 * 1024)
CLAWGYM_MAX_FILES_PER_TASK = env_int("CLAWGYM_MAX_FILES_PER_TASK", 500)
CLAWGYM_MAX_TASK_BYTES = env_int("CLAWGYM_MAX_TASK_BYTES", 50 * 1024 * 1024)
# Text people and imports send (lib.bounds), in UTF-8 bytes: over a bound is refused, saying which.
CLAWGYM_MAX_INSTRUCTION_BYTES = env_int("CLAWGYM_MAX_INSTRUCTION_BYTES", 64 * 1024)
CLAWGYM_MAX_RUBRIC_BYTES = env_int("CLAWGYM_MAX_RUBRIC_BYTES", 64 * 1024)  # the rubric as JSON
CLAWGYM_MAX_METADATA_BYTES = env_int("CLAWGYM_MAX_METADATA_BYTES", 64 * 1024)  # metadata, extra entry fields: JSON
CLAWGYM_MAX_NOTE_BYTES = env_int("CLAWGYM_MAX_NOTE_BYTES", 16 * 1024)  # reasons, notes, comments, descriptions
CLAWGYM_MAX_ARCHIVE_EXPANDED_BYTES = env_int("CLAWGYM_MAX_ARCHIVE_EXPANDED_BYTES", 2 * 1024 * 1024 * 1024)
CLAWGYM_MAX_ARCHIVE_MEMBERS = env_int("CLAWGYM_MAX_ARCHIVE_MEMBERS", 200_000)
CLAWGYM_UPLOAD_DIR = VAR_DIR / "uploads"

# --- Jobs ---
CLAWGYM_JOB_ENGINE = env_choice("CLAWGYM_JOB_ENGINE", "django_q", {"django_q", "celery"})
# A running job whose heartbeat is older than this may be claimed again (its worker died).
CLAWGYM_JOB_STALE_SECONDS = env_int("CLAWGYM_JOB_STALE_SECONDS", 600)
# Jobs' workspaces (sanity checks, rollouts) live here while they run, one held folder each (jobs/scratch.py), and a
# dead worker's are removed by whoever finds it dead. The sandbox's uid must be able to traverse every folder above,
# and the path must stay short: a rollout's Unix socket lives inside (108 bytes at most).
CLAWGYM_SCRATCH_DIR = Path(env_str("CLAWGYM_SCRATCH_DIR", f"{tempfile.gettempdir()}/clawgym-scratch-{os.geteuid()}"))

Q_CLUSTER = {
    "name": env_str("CLAWGYM_Q_NAME", "clawgym"),
    "orm": "default",
    "workers": env_int("CLAWGYM_Q_WORKERS", 2),
    "timeout": env_int("CLAWGYM_Q_TIMEOUT", 6 * 3600),
    "retry": env_int("CLAWGYM_Q_TIMEOUT", 6 * 3600) + 60,
    "max_attempts": 1,
    "poll": 0.5,
    "sync": False,
    "catch_up": False,
    "save_limit": 1000,
    "ack_failures": True,
    "label": "Background queue (django-q2)",
}

# The Celery app, named as ROOT_URLCONF names the URLs: jobs and ops send through it without importing this package.
CLAWGYM_CELERY_APP = "clawgym_site.celery.app"
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 6 * 3600}
# A broker blip (a Redis restart) must not kill the jobs running: their state is in the database, which they go on
# writing; a later delivery of one finds its run finished (jobs.runner._claim). Celery 6 turns this on by default.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_TASK_ALWAYS_EAGER = False  # never run inline by surprise
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")  # beat's own state (last ticks)

# Periodic jobs (jobs.periodic): a JSON object of kind → seconds between ticks overrides the table; 0 turns one off.
CLAWGYM_PERIODIC_SECONDS = env_json("CLAWGYM_PERIODIC_SECONDS", {})
# Each worker process writes that it is alive this often (jobs.workers); /healthz counts those seen within
# CLAWGYM_WORKER_SEEN_SECONDS, per queue.
CLAWGYM_WORKER_BEAT_SECONDS = env_float("CLAWGYM_WORKER_BEAT_SECONDS", 15.0)
CLAWGYM_WORKER_SEEN_SECONDS = env_int("CLAWGYM_WORKER_SEEN_SECONDS", 60)
# How many jobs of one run an engine holds at once (jobs.fanout): a batch's children, an evaluation run's rollouts;
# the rest wait in the database and are handed over as those finish. 0: twice the slots of the workers seen on the
# jobs' queue, at least CLAWGYM_IN_FLIGHT_MIN (workers not started yet are not a reason to queue nothing).
CLAWGYM_IN_FLIGHT = env_int("CLAWGYM_IN_FLIGHT", 0)
CLAWGYM_IN_FLIGHT_MIN = env_int("CLAWGYM_IN_FLIGHT_MIN", 8)
# The GPUs of a gpu-queue worker, which a training run may ask for (distributed.gpus; a run not on CPU needs one):
# -1 counts this machine's (the NVIDIA driver's). Set it where the web and the gpu workers are different machines.
CLAWGYM_TRAINING_GPUS = env_int("CLAWGYM_TRAINING_GPUS", -1)
# Checkpoint servers (training_jobs.serving) listen on CLAWGYM_SERVE_HOST of the gpu worker that starts them; their
# endpoint's base_url names CLAWGYM_SERVE_ADVERTISE_HOST, the worker's address as the proxy reaches it (default: the
# listening host, or the machine's name when that is 0.0.0.0).
CLAWGYM_SERVE_HOST = env_str("CLAWGYM_SERVE_HOST", "127.0.0.1")
CLAWGYM_SERVE_ADVERTISE_HOST = env_str("CLAWGYM_SERVE_ADVERTISE_HOST", "")
# The largest request body a server ClawGym starts reads (its authenticating front, the RL live policy server): the
# proxy's CLAWGYM_PROXY_MAX_REQUEST_BYTES (32 MiB) and room for the fields it adds.
CLAWGYM_SERVE_MAX_REQUEST_BYTES = env_int("CLAWGYM_SERVE_MAX_REQUEST_BYTES", 33 * 1024 * 1024)
# The model servers' backend (training_jobs.serving): "auto" (vLLM where it is installed and an NVIDIA GPU is seen,
# else transformers serve), "vllm", "transformers", or "batched" (ClawGym's own server, training_jobs.batched_server:
# on CPU it samples agents' calls together and reuses each conversation's cache).
CLAWGYM_SERVE_BACKEND = env_str("CLAWGYM_SERVE_BACKEND", "auto")
# `transformers serve --continuous-batching` (the CPU backend): at 8 concurrent agent streams on SmolLM2-135M it gave
# 2.8x the tokens/s of the plain server and a tenth of its time to first token (bench/serve_bench.py).
CLAWGYM_SERVE_CONTINUOUS_BATCHING = env_bool("CLAWGYM_SERVE_CONTINUOUS_BATCHING", True)
CLAWGYM_SERVE_REQUEST_TIMEOUT_SECONDS = env_float("CLAWGYM_SERVE_REQUEST_TIMEOUT_SECONDS", 1800.0)
CLAWGYM_SERVE_CPU_KV_MEMORY_SHARE = env_float("CLAWGYM_SERVE_CPU_KV_MEMORY_SHARE", 0.1)
# What trainers and model servers inherit of a gpu worker's environment is an allow-list (training_jobs.child_env);
# these names (or prefixes, `NAME*`) are added to it, comma-separated. Never SECRET_KEY, DATABASE_URL or CLAWGYM_KEY_….
CLAWGYM_CHILD_ENV_ALLOW = env_list("CLAWGYM_CHILD_ENV_ALLOW", [])

# --- Health and metrics (ops/) ---
# /healthz answers 503 unless the database and the broker answer, each queue listed here has a worker seen recently
# ("none": workers are reported, never required), and the var folder has this much free space.
CLAWGYM_HEALTH_QUEUES = [q for q in env_list("CLAWGYM_HEALTH_QUEUES", ["default"]) if q != "none"]
CLAWGYM_HEALTH_MIN_FREE_MB = env_int("CLAWGYM_HEALTH_MIN_FREE_MB", 1024)
CLAWGYM_HEALTH_CACHE_SECONDS = env_float("CLAWGYM_HEALTH_CACHE_SECONDS", 5.0)  # the worker lookup, per web process
# /metrics (Prometheus) is served to requests from these networks, or to any carrying
# `Authorization: Bearer CLAWGYM_METRICS_TOKEN` when a token is set; everyone else gets 403.
CLAWGYM_METRICS_TOKEN = env_str("CLAWGYM_METRICS_TOKEN", "")
CLAWGYM_METRICS_ALLOW_NETWORKS = env_list("CLAWGYM_METRICS_ALLOW_NETWORKS", ["127.0.0.0/8", "::1/128"])
PROMETHEUS_EXPORT_MIGRATIONS = False

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}, "axes": {"level": "WARNING"}},  # axes: lockouts only
}

# --- Sandbox and verification ---
# Checkers are untrusted code: they run only in a sandbox. "process" (no isolation) is refused by the sandbox
# package unless CLAWGYM_ALLOW_UNSANDBOXED=1, and results it produced are marked "ran without a sandbox".
CLAWGYM_SANDBOX_BACKEND = env_choice("CLAWGYM_SANDBOX_BACKEND", "bwrap", {"bwrap", "docker", "process"})
CLAWGYM_CHECKER_WALL_SECONDS = env_int("CLAWGYM_CHECKER_WALL_SECONDS", 60)
CLAWGYM_CHECKER_MEMORY_MB = env_int("CLAWGYM_CHECKER_MEMORY_MB", 1024)
CLAWGYM_CHECKER_MAX_OUTPUT_BYTES = env_int("CLAWGYM_CHECKER_MAX_OUTPUT_BYTES", 1024 * 1024)
# A checker scoring an untouched (initial) or placeholder-only (scaffold) workspace above this is over-lenient.
CLAWGYM_SANITY_TOLERANCE = env_float("CLAWGYM_SANITY_TOLERANCE", 0.0)
# A sanity check's checker runs (empty, initial, scaffold, solution) run side by side, at most this many at once in
# one worker: each may hold CLAWGYM_CHECKER_MEMORY_MB. Much of a sandboxed run is waiting on the kernel (mounting the
# workspace's filesystem, unmounting it), so runs overlap well even on few cores. 1: one after another.
CLAWGYM_SANITY_RUNS_AT_ONCE = env_int("CLAWGYM_SANITY_RUNS_AT_ONCE", 4)

# --- Synthesis novelty (synthesis.novelty): the MiniLM sentence encoder ---
# "onnx": ONNX Runtime (synthesis.minilm_onnx), several times faster; "numpy": the reference forward pass. Same
# vectors to float32 rounding. Threads: ONNX Runtime's intra-op threads per process (0: one per core).
CLAWGYM_NOVELTY_ENCODER = env_choice("CLAWGYM_NOVELTY_ENCODER", "onnx", {"onnx", "numpy"})
CLAWGYM_NOVELTY_THREADS = env_int("CLAWGYM_NOVELTY_THREADS", 0)

# --- LLM gateway (llm/): model client and recording proxy ---
# Where agents reach the proxy: session base URLs are CLAWGYM_PROXY_PUBLIC_URL/proxy/<token>/v1. By default the
# port the web server listens on (PORT, as scripts/run.sh uses it), so changing the port moves the proxy with it.
CLAWGYM_PROXY_PUBLIC_URL = env_str("CLAWGYM_PROXY_PUBLIC_URL", f"http://127.0.0.1:{env_int('PORT', 8000)}")
# An endpoint's key is read only from CLAWGYM_KEY_… variables or those listed here (comma-separated), e.g.
# OPENAI_API_KEY: a key goes out as a bearer token to the endpoint's host, so no other server secret may be named.
CLAWGYM_API_KEY_ENV_ALLOW = env_list("CLAWGYM_API_KEY_ENV_ALLOW", [])
CLAWGYM_PROXY_MAX_REQUEST_BYTES = env_int("CLAWGYM_PROXY_MAX_REQUEST_BYTES", 32 * 1024 * 1024)
# Deeper JSON than this in a proxied request is refused (400): real requests nest a few levels, tool schemas a few dozen.
CLAWGYM_PROXY_MAX_JSON_DEPTH = env_int("CLAWGYM_PROXY_MAX_JSON_DEPTH", 128)
# The most bytes one model answer may have as it arrives, for the client and the proxy alike (a stream's every byte
# counted): past it reading stops and the call is an upstream error (llm.failures). The largest real answers are
# streams at long context: 64K tokens from vLLM with token ids and logprobs (a training session) are ~300 bytes an
# event, ~20 MB; 32 MiB holds that, while a whole (non-streamed) answer of the same is far smaller.
CLAWGYM_MAX_RESPONSE_BYTES = env_int("CLAWGYM_MAX_RESPONSE_BYTES", 32 * 1024 * 1024)
# A model call's request or response longer than this (characters of its stored JSON) is shown in part by its page
# and the API, the rest on request (llm.bodies): a page never loads a large body whole.
CLAWGYM_MODEL_CALL_INLINE_BYTES = env_int("CLAWGYM_MODEL_CALL_INLINE_BYTES", 64 * 1024)
# Per path prefix, the longest matching one wins; CLAWGYM_REQUEST_BYTES_BY_PATH (a JSON object) adds or overrides.
CLAWGYM_REQUEST_BYTES_BY_PATH = {
    "/tasks/import/": CLAWGYM_MAX_UPLOAD_BYTES,
    "/api/imports/": CLAWGYM_MAX_UPLOAD_BYTES,
    "/proxy/": CLAWGYM_PROXY_MAX_REQUEST_BYTES,
    **env_json("CLAWGYM_REQUEST_BYTES_BY_PATH", {}),
}
# A proxy session's token is refused after this long even if nobody closed it (`proxy_session` sessions; a rollout's
# session lives as long as its agent may run, and is closed when the rollout ends).
CLAWGYM_PROXY_SESSION_TTL_SECONDS = env_int("CLAWGYM_PROXY_SESSION_TTL_SECONDS", 12 * 3600)
CLAWGYM_PROXY_MAX_CONNECTIONS = env_int("CLAWGYM_PROXY_MAX_CONNECTIONS", 512)  # upstream, per web process
CLAWGYM_PROXY_DB_THREADS = env_int("CLAWGYM_PROXY_DB_THREADS", 2)  # the proxy's database threads, per web process
# A rollout's calls ask for at most this many output tokens when its endpoint's sampling names no max_tokens (the proxy
# caps what an agent asks for: llm.sampling).
CLAWGYM_PROXY_MAX_OUTPUT_TOKENS = env_int("CLAWGYM_PROXY_MAX_OUTPUT_TOKENS", 32768)
# Client retries: exponential backoff from this base, capped; a waiting call gives up on a busy endpoint after
# CLAWGYM_LLM_SLOT_WAIT_SECONDS.
CLAWGYM_LLM_BACKOFF_SECONDS = env_float("CLAWGYM_LLM_BACKOFF_SECONDS", 1.0)
CLAWGYM_LLM_BACKOFF_MAX_SECONDS = env_float("CLAWGYM_LLM_BACKOFF_MAX_SECONDS", 30.0)
CLAWGYM_LLM_SLOT_WAIT_SECONDS = env_float("CLAWGYM_LLM_SLOT_WAIT_SECONDS", 900.0)
# ModelEndpoint.api_style and ModelCall.api share one choice set: one enum name in the API schema.
# Every model call is a ModelCall row: the HTTP clients' per-request INFO lines would only repeat them.
LOGGING["loggers"].update({"httpx": {"level": "WARNING"}, "httpx2": {"level": "WARNING"}})

# --- Rollouts (evaluation/): agent harnesses in the sandbox ---
# `make harness` installs Node 24 and the pinned OpenClaw CLI here (scripts/install-harness.sh).
CLAWGYM_HARNESS_DIR = Path(env_str("CLAWGYM_HARNESS_DIR", str(BASE_DIR / ".harness")))
CLAWGYM_DEFAULT_HARNESS = env_choice("CLAWGYM_DEFAULT_HARNESS", "openclaw", {"openclaw", "builtin"})
CLAWGYM_ROLLOUT_TIMEOUT_SECONDS = env_int("CLAWGYM_ROLLOUT_TIMEOUT_SECONDS", 600)  # the agent's deadline
# RLIMIT_AS of each agent process. V8 reserves address space far beyond what it uses (each worker thread an isolate):
# OpenClaw fails to start under ~8 GiB of address space while using ~1 GB. Real memory is bounded by the slots.
CLAWGYM_ROLLOUT_ADDRESS_SPACE_MB = env_int("CLAWGYM_ROLLOUT_ADDRESS_SPACE_MB", 16 * 1024)
# Rollouts running at once on one machine; 0: from its memory (CLAWGYM_ROLLOUT_SLOT_MEMORY_MB each) and cores.
CLAWGYM_ROLLOUT_SLOTS = env_int("CLAWGYM_ROLLOUT_SLOTS", 0)
CLAWGYM_ROLLOUT_SLOT_MEMORY_MB = env_int("CLAWGYM_ROLLOUT_SLOT_MEMORY_MB", 1536)
CLAWGYM_ROLLOUT_SLOT_WAIT_SECONDS = env_int("CLAWGYM_ROLLOUT_SLOT_WAIT_SECONDS", 6 * 3600)
CLAWGYM_BUILTIN_MAX_TURNS = env_int("CLAWGYM_BUILTIN_MAX_TURNS", 40)

# Trajectory rebuilding rules as a JSON object (see evaluation.trajectories.TrajectoryRules.from_dict), e.g.
# {"supported_tools": ["read", "write", "edit", "exec"]}; empty keeps the defaults.
CLAWGYM_TRAJECTORY_RULES = env_json("CLAWGYM_TRAJECTORY_RULES", {})

# --- Evaluation runs (evaluation.services.runs) ---
# Attempts per rollout of a run when the infrastructure fails it (sandbox, worker, proxy, upstream): retried with
# exponential backoff from CLAWGYM_EVAL_RETRY_BACKOFF_SECONDS, capped; each resume grants as many again.
CLAWGYM_EVAL_MAX_ATTEMPTS = env_int("CLAWGYM_EVAL_MAX_ATTEMPTS", 3)
CLAWGYM_EVAL_RETRY_BACKOFF_SECONDS = env_float("CLAWGYM_EVAL_RETRY_BACKOFF_SECONDS", 5.0)
CLAWGYM_EVAL_RETRY_BACKOFF_MAX_SECONDS = env_float("CLAWGYM_EVAL_RETRY_BACKOFF_MAX_SECONDS", 120.0)

# --- Review ---
# A claimed candidate is locked to its reviewer for this long; after that anyone may claim it.
CLAWGYM_REVIEW_CLAIM_MINUTES = env_int("CLAWGYM_REVIEW_CLAIM_MINUTES", 30)
