"""ClawGym settings: everything that varies between machines comes from the environment."""

import os
import tempfile
from datetime import timedelta
from pathlib import Path

import dj_database_url

from lib.env import declare, env_bool, env_choice, env_float, env_int, env_json, env_list, env_str, secret_key

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(
    env_str(
        "CLAWGYM_VAR_DIR",
        str(BASE_DIR / "var"),
        help="Where the embedded default keeps its data: the SQLite database, uploads, static files, training files.",
        shown="var/ in the project folder",
    )
)
VAR_DIR.mkdir(parents=True, exist_ok=True)

SECRET_KEY = secret_key(BASE_DIR / ".secret_key")
DEBUG = env_bool("DEBUG", False, help="Django's debug pages (1 to turn on). Never on in deployment.")
ALLOWED_HOSTS = env_list(
    "ALLOWED_HOSTS",
    ["127.0.0.1", "localhost", "[::1]", "testserver"],
    help="Host names the web app answers to, comma-separated (add the address a load balancer probes with).",
)
CSRF_TRUSTED_ORIGINS = env_list(
    "CSRF_TRUSTED_ORIGINS",
    [],
    help="Origins trusted for signed-in form posts behind HTTPS, comma-separated (https://clawgym.example.org).",
)

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
    "studies",
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
        env_str(
            "DATABASE_URL",
            f"sqlite:///{VAR_DIR / 'db.sqlite3'}",
            help="The database: postgres://user:pass@host:5432/clawgym in deployment; SQLite in the var folder by "
            "default.",
            shown="sqlite:///var/db.sqlite3",
        ),
        conn_max_age=env_int(
            "DATABASE_CONN_MAX_AGE",
            0,
            help="Seconds a database connection is kept open between requests (0: one per request).",
        ),
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
AXES_FAILURE_LIMIT = env_int(
    "CLAWGYM_LOGIN_FAILURE_LIMIT", 10, help="Failed sign-ins from one address before it is refused (429)."
)
AXES_COOLOFF_TIME = timedelta(
    minutes=env_int(
        "CLAWGYM_LOGIN_COOLOFF_MINUTES", 15, help="How long an address that failed too often stays refused."
    )
)
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
CLAWGYM_MAX_REQUEST_BYTES = env_int(
    "CLAWGYM_MAX_REQUEST_BYTES", 64 * 1024 * 1024, help="Largest request body, checked before it is read (413 past it)."
)
CLAWGYM_MAX_UPLOAD_BYTES = env_int(
    "CLAWGYM_MAX_UPLOAD_BYTES",
    1024 * 1024 * 1024,
    help="Largest upload on the import routes (/tasks/import/, /api/imports/).",
)
CLAWGYM_ANONYMOUS_MAX_REQUEST_BYTES = env_int(
    "CLAWGYM_ANONYMOUS_MAX_REQUEST_BYTES",
    64 * 1024,
    help="Largest body sent with no session cookie or Authorization header (a sign-in).",
)
# A connection's request line and headers must arrive whole within this many seconds of it opening (or of the last
# response): slow-loris and never-speaking connections are closed (lib.http_timeouts, uvicorn --http).
# Idle keep-alive connections are closed by uvicorn itself after --timeout-keep-alive (5 s).
CLAWGYM_HEADER_TIMEOUT_SECONDS = env_float(
    "CLAWGYM_HEADER_TIMEOUT_SECONDS",
    10.0,
    help="A connection's request line and headers must arrive within this many seconds (uvicorn --http "
    "lib.http_timeouts:HttpToolsProtocol).",
)

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie
SECURE_CONTENT_TYPE_NOSNIFF = True
X_FRAME_OPTIONS = "DENY"
if env_bool(
    "CLAWGYM_HTTPS", False, help="Served over HTTPS: secure cookies, X-Forwarded-Proto trusted from the front proxy."
):
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
    # A 400 is a {detail} refusal or a serializer's field errors: lib.api_schema says so on every documented 400.
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "lib.api_schema.bad_requests_name_fields",
    ],
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
        "PlantedFlawKindEnum": "review.models.PlantedFlaw.Kind",
        "ReviewDecisionEnum": "review.models.ReviewDecision.Decision",
        "TrainingRunKindEnum": "training_jobs.models.TrainingRun.Kind",
        "TaskSourceEnum": "tasks.models.Task.Source",
        "ReportToEnum": "training_jobs.models.REPORT_TO",
    },
}

# --- Task catalog limits (checked on every way in) ---
CLAWGYM_MAX_FILE_BYTES = env_int("CLAWGYM_MAX_FILE_BYTES", 10 * 1024 * 1024, help="Largest file of a task.")
CLAWGYM_MAX_FILES_PER_TASK = env_int("CLAWGYM_MAX_FILES_PER_TASK", 500, help="Most files in a task.")
CLAWGYM_MAX_TASK_BYTES = env_int(
    "CLAWGYM_MAX_TASK_BYTES", 50 * 1024 * 1024, help="Largest task, all its files together."
)
# Text people and imports send (lib.bounds), in UTF-8 bytes: over a bound is refused, saying which.
CLAWGYM_MAX_INSTRUCTION_BYTES = env_int(
    "CLAWGYM_MAX_INSTRUCTION_BYTES",
    64 * 1024,
    help="Longest instruction in UTF-8 bytes, at every way in (import, API, editors).",
)
CLAWGYM_MAX_RUBRIC_BYTES = env_int(
    "CLAWGYM_MAX_RUBRIC_BYTES", 64 * 1024, help="Longest rubric, as JSON."
)  # the rubric as JSON
CLAWGYM_MAX_METADATA_BYTES = env_int(
    "CLAWGYM_MAX_METADATA_BYTES", 64 * 1024, help="Longest metadata and extra entry fields, as JSON."
)  # metadata, extra entry fields: JSON
CLAWGYM_MAX_NOTE_BYTES = env_int(
    "CLAWGYM_MAX_NOTE_BYTES",
    16 * 1024,
    help="Longest text people write: reasons, comments, descriptions, endpoint sampling, harness options.",
)  # reasons, notes, comments, descriptions
CLAWGYM_MAX_ARCHIVE_EXPANDED_BYTES = env_int(
    "CLAWGYM_MAX_ARCHIVE_EXPANDED_BYTES", 2 * 1024 * 1024 * 1024, help="Largest expanded size of an imported archive."
)
CLAWGYM_MAX_ARCHIVE_MEMBERS = env_int(
    "CLAWGYM_MAX_ARCHIVE_MEMBERS", 200_000, help="Most entries in an imported archive."
)
CLAWGYM_UPLOAD_DIR = VAR_DIR / "uploads"

# --- Jobs ---
CLAWGYM_JOB_ENGINE = env_choice(
    "CLAWGYM_JOB_ENGINE",
    "django_q",
    {"django_q", "celery"},
    help="The job engine: django_q (embedded, the database as broker) or celery (deployment, with Redis).",
)
# A running job whose heartbeat is older than this may be claimed again (its worker died).
CLAWGYM_JOB_STALE_SECONDS = env_int(
    "CLAWGYM_JOB_STALE_SECONDS",
    600,
    help="A running job whose heartbeat is older than this may be claimed again (its worker died).",
)
# Jobs' workspaces (sanity checks, rollouts) live here while they run, one held folder each (jobs/scratch.py), and a
# dead worker's are removed by whoever finds it dead. The sandbox's uid must be able to traverse every folder above,
# and the path must stay short: a rollout's Unix socket lives inside (108 bytes at most).
CLAWGYM_SCRATCH_DIR = Path(
    env_str(
        "CLAWGYM_SCRATCH_DIR",
        f"{tempfile.gettempdir()}/clawgym-scratch-{os.geteuid()}",
        help="Where running jobs keep their workspaces, one locked folder each; keep the path short (a Unix socket "
        "lives inside).",
        shown="$TMPDIR/clawgym-scratch-<uid>",
    )
)

Q_CLUSTER = {
    "name": env_str("CLAWGYM_Q_NAME", "clawgym", help="The django-q2 cluster's name."),
    "orm": "default",
    "workers": env_int("CLAWGYM_Q_WORKERS", 2, help="django-q2 worker processes (make run)."),
    "timeout": env_int("CLAWGYM_Q_TIMEOUT", 6 * 3600, help="Seconds a django-q2 job may run before it is killed."),
    "retry": env_int("CLAWGYM_Q_TIMEOUT", 6 * 3600, help="Seconds a django-q2 job may run before it is killed.") + 60,
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
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0", help="The Celery broker (Redis).")
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
CLAWGYM_PERIODIC_SECONDS = env_json(
    "CLAWGYM_PERIODIC_SECONDS",
    {},
    help='JSON {"job.kind": seconds} overriding the periodic jobs\' intervals (jobs/periodic.py); 0 turns one off.',
)
# Each worker process writes that it is alive this often (jobs.workers); /healthz counts those seen within
# CLAWGYM_WORKER_SEEN_SECONDS, per queue.
CLAWGYM_WORKER_BEAT_SECONDS = env_float(
    "CLAWGYM_WORKER_BEAT_SECONDS", 15.0, help="How often each worker process writes that it is alive."
)
CLAWGYM_WORKER_SEEN_SECONDS = env_int(
    "CLAWGYM_WORKER_SEEN_SECONDS",
    60,
    help="How recent a worker's beat must be for it to count as seen (/healthz, the waiting commands).",
)
# How many jobs of one run an engine holds at once (jobs.fanout): a batch's children, an evaluation run's rollouts;
# the rest wait in the database and are handed over as those finish. 0: twice the slots of the workers seen on the
# jobs' queue, at least CLAWGYM_IN_FLIGHT_MIN (workers not started yet are not a reason to queue nothing).
CLAWGYM_IN_FLIGHT = env_int(
    "CLAWGYM_IN_FLIGHT",
    0,
    help="Jobs of one run or batch on the engine at once; 0: twice the slots of the workers seen on the queue.",
)
CLAWGYM_IN_FLIGHT_MIN = env_int(
    "CLAWGYM_IN_FLIGHT_MIN",
    8,
    help="The least number of jobs of one run or batch on the engine at once, whatever workers are seen.",
)
# The GPUs of a gpu-queue worker, which a training run may ask for (distributed.gpus; a run not on CPU needs one):
# -1 counts this machine's (the NVIDIA driver's). Set it where the web and the gpu workers are different machines.
CLAWGYM_TRAINING_GPUS = env_int(
    "CLAWGYM_TRAINING_GPUS",
    -1,
    help="GPUs a gpu-queue worker has for training runs; -1 counts this machine's. Set it where the web app and the "
    "gpu workers are different machines.",
)
# Checkpoint servers (training_jobs.serving) listen on CLAWGYM_SERVE_HOST of the gpu worker that starts them; their
# endpoint's base_url names CLAWGYM_SERVE_ADVERTISE_HOST, the worker's address as the proxy reaches it (default: the
# listening host, or the machine's name when that is 0.0.0.0).
CLAWGYM_SERVE_HOST = env_str(
    "CLAWGYM_SERVE_HOST", "127.0.0.1", help="Address the model servers a gpu worker starts listen on."
)
CLAWGYM_SERVE_ADVERTISE_HOST = env_str(
    "CLAWGYM_SERVE_ADVERTISE_HOST",
    "",
    help="Address their endpoints name, as the proxy reaches the worker; empty: the listening host, or the machine's "
    "name when that is 0.0.0.0.",
)
# The largest request body a server ClawGym starts reads (its authenticating front, the RL live policy server): the
# proxy's CLAWGYM_PROXY_MAX_REQUEST_BYTES (32 MiB) and room for the fields it adds.
CLAWGYM_SERVE_MAX_REQUEST_BYTES = env_int(
    "CLAWGYM_SERVE_MAX_REQUEST_BYTES",
    33 * 1024 * 1024,
    help="Largest request body a served model's front and the RL live policy server read.",
)
# The model servers' backend (training_jobs.serving): "auto" (vLLM where it is installed and an NVIDIA GPU is seen,
# else transformers serve), "vllm", "transformers", or "batched" (ClawGym's own server, training.batched_server:
# on CPU it samples agents' calls together and reuses each conversation's cache).
CLAWGYM_SERVE_BACKEND = env_str(
    "CLAWGYM_SERVE_BACKEND",
    "auto",
    help="Model servers' backend: auto (vLLM with a GPU, else transformers serve), vllm, transformers, or batched "
    "(ClawGym's CPU server).",
)
# `transformers serve --continuous-batching` (the CPU backend): at 8 concurrent agent streams on SmolLM2-135M it gave
# 2.8x the tokens/s of the plain server and a tenth of its time to first token (bench/serve_bench.py).
CLAWGYM_SERVE_CONTINUOUS_BATCHING = env_bool(
    "CLAWGYM_SERVE_CONTINUOUS_BATCHING",
    True,
    help="Start transformers serve with --continuous-batching (the CPU backend).",
)
# A served model's endpoint is made with this output cap in its sampling (the proxy holds every call to it): a
# checkpoint that never ends its turn (a tiny or a broken one) would otherwise sample to the proxy's own cap,
# CLAWGYM_PROXY_MAX_OUTPUT_TOKENS, on each call. The paper's agents sample up to 8,192 tokens a call.
CLAWGYM_SERVED_MAX_TOKENS = env_int(
    "CLAWGYM_SERVED_MAX_TOKENS",
    8192,
    help="Output cap (max_tokens) a served model's endpoint is made with; its sampling can change it afterwards.",
)
CLAWGYM_SERVE_REQUEST_TIMEOUT_SECONDS = env_float(
    "CLAWGYM_SERVE_REQUEST_TIMEOUT_SECONDS",
    1800.0,
    help="Per-call timeout of a served model's endpoint (a CPU server answers its streams in turn).",
)
CLAWGYM_SERVE_CPU_KV_MEMORY_SHARE = env_float(
    "CLAWGYM_SERVE_CPU_KV_MEMORY_SHARE",
    0.1,
    help="Share of the free RAM transformers serve's paged KV cache may take without a GPU.",
)
# What trainers and model servers inherit of a gpu worker's environment is an allow-list (training_jobs.child_env);
# these names (or prefixes, `NAME*`) are added to it, comma-separated. Never SECRET_KEY, DATABASE_URL or CLAWGYM_KEY_….
CLAWGYM_CHILD_ENV_ALLOW = env_list(
    "CLAWGYM_CHILD_ENV_ALLOW",
    [],
    help="Names (or NAME* prefixes) added to what trainers and model servers inherit of a gpu worker's environment, "
    "comma-separated; never secrets.",
)
# Base models, datasets' exports, runs' checkpoints and merged models (training_jobs.folders).
CLAWGYM_TRAINING_DIR = Path(
    env_str(
        "CLAWGYM_TRAINING_DIR",
        str(VAR_DIR / "training"),
        help="Where training keeps its files: base models, exported datasets, runs and their checkpoints.",
        shown="var/training/",
    )
)
CLAWGYM_SERVE_IDLE_SECONDS = env_int(
    "CLAWGYM_SERVE_IDLE_SECONDS",
    1800,
    help="A model server ClawGym started that answered nothing for this long is stopped.",
)

# --- Health and metrics (ops/) ---
# /healthz answers 503 unless the database and the broker answer, each queue listed here has a worker seen recently
# ("none": workers are reported, never required), and the var folder has this much free space.
CLAWGYM_HEALTH_QUEUES = [
    q
    for q in env_list(
        "CLAWGYM_HEALTH_QUEUES",
        ["default"],
        help="Queues that need a worker seen for /healthz to answer 200, comma-separated; none: reported, not "
        "required.",
    )
    if q != "none"
]
CLAWGYM_HEALTH_MIN_FREE_MB = env_int(
    "CLAWGYM_HEALTH_MIN_FREE_MB", 1024, help="Free space the var folder's disk needs for /healthz to answer 200."
)
CLAWGYM_HEALTH_CACHE_SECONDS = env_float(
    "CLAWGYM_HEALTH_CACHE_SECONDS", 5.0, help="How long a web process reuses /healthz's worker lookup."
)  # the worker lookup, per web process
# /metrics (Prometheus) is served to requests from these networks, or to any carrying
# `Authorization: Bearer CLAWGYM_METRICS_TOKEN` when a token is set; everyone else gets 403.
CLAWGYM_METRICS_TOKEN = env_str(
    "CLAWGYM_METRICS_TOKEN", "", help="A bearer token that opens /metrics from anywhere; empty: none."
)
CLAWGYM_METRICS_ALLOW_NETWORKS = env_list(
    "CLAWGYM_METRICS_ALLOW_NETWORKS",
    ["127.0.0.0/8", "::1/128"],
    help="Networks /metrics is served to without the token, comma-separated.",
)
PROMETHEUS_EXPORT_MIGRATIONS = False

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO", help="The root logger's level.")},
    "loggers": {"django.db.backends": {"level": "WARNING"}, "axes": {"level": "WARNING"}},  # axes: lockouts only
}

# --- Sandbox and verification ---
# Checkers are untrusted code: they run only in a sandbox. "process" (no isolation) is refused by the sandbox
# package unless CLAWGYM_ALLOW_UNSANDBOXED=1, and results it produced are marked "ran without a sandbox".
CLAWGYM_SANDBOX_BACKEND = env_choice(
    "CLAWGYM_SANDBOX_BACKEND",
    "bwrap",
    {"bwrap", "docker", "process"},
    help="Where untrusted code runs: bwrap (bubblewrap), docker (Docker hosts), or process (no isolation: needs "
    "CLAWGYM_ALLOW_UNSANDBOXED=1).",
)
CLAWGYM_CHECKER_WALL_SECONDS = env_int("CLAWGYM_CHECKER_WALL_SECONDS", 60, help="A checker's wall-clock limit.")
CLAWGYM_CHECKER_MEMORY_MB = env_int(
    "CLAWGYM_CHECKER_MEMORY_MB", 1024, help="A checker's memory, all its processes together."
)
CLAWGYM_CHECKER_MAX_OUTPUT_BYTES = env_int(
    "CLAWGYM_CHECKER_MAX_OUTPUT_BYTES", 1024 * 1024, help="Most output kept of a checker run."
)
# A checker scoring any lazy workspace (tasks.lazy_workspaces) above this is over-lenient.
CLAWGYM_SANITY_TOLERANCE = env_float(
    "CLAWGYM_SANITY_TOLERANCE",
    0.0,
    help="A checker paying a lazy agent (on any of its lazy workspaces) more than this is over-lenient.",
)
# A sanity check's checker runs (empty, initial, scaffold, solution) run side by side, at most this many at once in
# one worker: each may hold CLAWGYM_CHECKER_MEMORY_MB. Much of a sandboxed run is waiting on the kernel (mounting the
# workspace's filesystem, unmounting it), so runs overlap well even on few cores. 1: one after another.
CLAWGYM_SANITY_RUNS_AT_ONCE = env_int(
    "CLAWGYM_SANITY_RUNS_AT_ONCE",
    4,
    help="A sanity check's checker runs side by side in one worker; 1: one after another.",
)
# A sanity check also asks the model of the first enabled "judge" endpoint for a lazy workspace (tasks.lazy_workspaces):
# one model call a check. Off: that move is not run (and the report says why).
CLAWGYM_SANITY_LLM_LAZY = env_bool(
    "CLAWGYM_SANITY_LLM_LAZY",
    True,
    help="A sanity check asks the judge endpoint's model for a lazy workspace to try (one call a check); 0: never.",
)

# --- Synthesis novelty (synthesis.novelty): the MiniLM sentence encoder ---
# "onnx": ONNX Runtime (synthesis.minilm_onnx), several times faster; "numpy": the reference forward pass. Same
# vectors to float32 rounding. Threads: ONNX Runtime's intra-op threads per process (0: one per core).
CLAWGYM_NOVELTY_ENCODER = env_choice(
    "CLAWGYM_NOVELTY_ENCODER",
    "onnx",
    {"onnx", "numpy"},
    help="The novelty encoder: onnx (ONNX Runtime) or numpy (the reference); the same vectors.",
)
CLAWGYM_NOVELTY_THREADS = env_int(
    "CLAWGYM_NOVELTY_THREADS", 0, help="ONNX Runtime threads per process; 0: one per core."
)

# --- LLM gateway (llm/): model client and recording proxy ---
# Where agents reach the proxy: session base URLs are CLAWGYM_PROXY_PUBLIC_URL/proxy/<token>/v1. By default the
# port the web server listens on (PORT, as scripts/run.sh uses it), so changing the port moves the proxy with it.
CLAWGYM_PROXY_PUBLIC_URL = env_str(
    "CLAWGYM_PROXY_PUBLIC_URL",
    f"http://127.0.0.1:{env_int('PORT', 8000, help='The port make run serves on; the proxy address follows it.')}",
    help="Where agents reach the recording proxy: the web app's address as the workers see it.",
    shown="http://127.0.0.1:$PORT",
)
# An endpoint's key is read only from CLAWGYM_KEY_… variables or those listed here (comma-separated), e.g.
# OPENAI_API_KEY: a key goes out as a bearer token to the endpoint's host, so no other server secret may be named.
CLAWGYM_API_KEY_ENV_ALLOW = env_list(
    "CLAWGYM_API_KEY_ENV_ALLOW",
    [],
    help="Variables besides CLAWGYM_KEY_… that may hold an endpoint's key (e.g. OPENAI_API_KEY), comma-separated.",
)
CLAWGYM_PROXY_MAX_REQUEST_BYTES = env_int(
    "CLAWGYM_PROXY_MAX_REQUEST_BYTES", 32 * 1024 * 1024, help="Largest request one proxied call may send."
)
# Deeper JSON than this in a proxied request is refused (400): real requests nest a few levels, tool schemas a few dozen.
CLAWGYM_PROXY_MAX_JSON_DEPTH = env_int(
    "CLAWGYM_PROXY_MAX_JSON_DEPTH", 128, help="Deepest JSON nesting a proxied request may have (400 past it)."
)
# The most bytes one model answer may have as it arrives, for the client and the proxy alike (a stream's every byte
# counted): past it reading stops and the call is an upstream error (llm.failures). The largest real answers are
# streams at long context: 64K tokens from vLLM with token ids and logprobs (a training session) are ~300 bytes an
# event, ~20 MB; 32 MiB holds that, while a whole (non-streamed) answer of the same is far smaller.
CLAWGYM_MAX_RESPONSE_BYTES = env_int(
    "CLAWGYM_MAX_RESPONSE_BYTES",
    32 * 1024 * 1024,
    help="Most bytes one model answer may have as it arrives, for the client and the proxy alike.",
)
# A model call's request or response longer than this (characters of its stored JSON) is shown in part by its page
# and the API, the rest on request (llm.bodies): a page never loads a large body whole.
CLAWGYM_MODEL_CALL_INLINE_BYTES = env_int(
    "CLAWGYM_MODEL_CALL_INLINE_BYTES",
    64 * 1024,
    help="How much of a model call's request or response pages and the API show inline; the rest is at the body's URL.",
)
# Per path prefix, the longest matching one wins; CLAWGYM_REQUEST_BYTES_BY_PATH (a JSON object) adds or overrides.
CLAWGYM_REQUEST_BYTES_BY_PATH = {
    "/tasks/import/": CLAWGYM_MAX_UPLOAD_BYTES,
    "/api/imports/": CLAWGYM_MAX_UPLOAD_BYTES,
    "/proxy/": CLAWGYM_PROXY_MAX_REQUEST_BYTES,
    **env_json(
        "CLAWGYM_REQUEST_BYTES_BY_PATH",
        {},
        help='JSON {"/path/prefix/": bytes} adding or overriding per-path request body bounds.',
    ),
}
# A proxy session's token is refused after this long even if nobody closed it (`proxy_session` sessions; a rollout's
# session lives as long as its agent may run, and is closed when the rollout ends).
CLAWGYM_PROXY_SESSION_TTL_SECONDS = env_int(
    "CLAWGYM_PROXY_SESSION_TTL_SECONDS",
    12 * 3600,
    help="A proxy_session token's life (a rollout's session lasts as long as its agent may run).",
)
CLAWGYM_PROXY_MAX_CONNECTIONS = env_int(
    "CLAWGYM_PROXY_MAX_CONNECTIONS", 512, help="Upstream connections the proxy keeps, per web process."
)  # upstream, per web process
CLAWGYM_PROXY_DB_THREADS = env_int(
    "CLAWGYM_PROXY_DB_THREADS", 2, help="The proxy's database threads, per web process."
)  # the proxy's database threads, per web process
# A rollout's calls ask for at most this many output tokens when its endpoint's sampling names no max_tokens (the proxy
# caps what an agent asks for: llm.sampling).
CLAWGYM_PROXY_MAX_OUTPUT_TOKENS = env_int(
    "CLAWGYM_PROXY_MAX_OUTPUT_TOKENS",
    32768,
    help="Output cap of a rollout's calls when its endpoint's sampling names no max_tokens.",
)
# Client retries: exponential backoff from this base, capped; a waiting call gives up on a busy endpoint after
# CLAWGYM_LLM_SLOT_WAIT_SECONDS.
CLAWGYM_LLM_BACKOFF_SECONDS = env_float(
    "CLAWGYM_LLM_BACKOFF_SECONDS", 1.0, help="The model client's first retry backoff, doubled each retry."
)
CLAWGYM_LLM_BACKOFF_MAX_SECONDS = env_float(
    "CLAWGYM_LLM_BACKOFF_MAX_SECONDS", 30.0, help="The model client's longest retry backoff."
)
CLAWGYM_LLM_SLOT_WAIT_SECONDS = env_float(
    "CLAWGYM_LLM_SLOT_WAIT_SECONDS",
    900.0,
    help="How long a call waits for a busy endpoint's concurrency slot before giving up.",
)
# ModelEndpoint.api_style and ModelCall.api share one choice set: one enum name in the API schema.
# Every model call is a ModelCall row: the HTTP clients' per-request INFO lines would only repeat them.
LOGGING["loggers"].update({"httpx": {"level": "WARNING"}, "httpx2": {"level": "WARNING"}})

# --- Rollouts (evaluation/): agent harnesses in the sandbox ---
# `make harness` installs Node 24 and the pinned OpenClaw CLI here (scripts/install-harness.sh).
CLAWGYM_HARNESS_DIR = Path(
    env_str(
        "CLAWGYM_HARNESS_DIR",
        str(BASE_DIR / ".harness"),
        help="Where make harness installs Node and OpenClaw.",
        shown=".harness/ in the project folder",
    )
)
CLAWGYM_DEFAULT_HARNESS = env_choice(
    "CLAWGYM_DEFAULT_HARNESS",
    "openclaw",
    {"openclaw", "builtin"},
    help="The harness a rollout uses when none is named.",
)
CLAWGYM_ROLLOUT_TIMEOUT_SECONDS = env_int(
    "CLAWGYM_ROLLOUT_TIMEOUT_SECONDS", 600, help="An agent's deadline (a rollout's timeout option overrides it)."
)  # the agent's deadline
# A rollout holds a sandbox slot and a worker until its deadline: no duration option may ask for more than this.
CLAWGYM_MAX_ROLLOUT_TIMEOUT = env_int(
    "CLAWGYM_MAX_ROLLOUT_TIMEOUT",
    3600,
    help="The most seconds any duration option of a rollout may ask (timeout, the builtin harness's tool_timeout and "
    "request_timeout, an RL run's rollout_timeout): larger values are refused, and a rollout stored with more runs "
    "within it.",
)
# RLIMIT_AS of each agent process. V8 reserves address space far beyond what it uses (each worker thread an isolate):
# OpenClaw fails to start under ~8 GiB of address space while using ~1 GB. Real memory is bounded by the slots.
CLAWGYM_ROLLOUT_ADDRESS_SPACE_MB = env_int(
    "CLAWGYM_ROLLOUT_ADDRESS_SPACE_MB",
    16 * 1024,
    help="RLIMIT_AS of agent processes (V8 reserves far more than it uses).",
)
# Rollouts running at once on one machine; 0: from its memory (CLAWGYM_ROLLOUT_SLOT_MEMORY_MB each) and cores.
CLAWGYM_ROLLOUT_SLOTS = env_int(
    "CLAWGYM_ROLLOUT_SLOTS", 0, help="Rollouts at once on one machine; 0: from its memory and cores."
)
CLAWGYM_ROLLOUT_SLOT_MEMORY_MB = env_int(
    "CLAWGYM_ROLLOUT_SLOT_MEMORY_MB", 1536, help="Memory counted per rollout slot when the slots come from memory."
)
CLAWGYM_ROLLOUT_SLOT_WAIT_SECONDS = env_int(
    "CLAWGYM_ROLLOUT_SLOT_WAIT_SECONDS", 6 * 3600, help="How long a rollout waits for a free slot."
)
CLAWGYM_BUILTIN_MAX_TURNS = env_int(
    "CLAWGYM_BUILTIN_MAX_TURNS", 40, help="The builtin harness's turn limit when a rollout names none."
)

# Trajectory rebuilding rules as a JSON object (see evaluation.trajectories.TrajectoryRules.from_dict), e.g.
# {"supported_tools": ["read", "write", "edit", "exec"]}; empty keeps the defaults.
CLAWGYM_TRAJECTORY_RULES = env_json(
    "CLAWGYM_TRAJECTORY_RULES",
    {},
    help='JSON trajectory rebuilding rules (evaluation.trajectories.TrajectoryRules), e.g. {"supported_tools": '
    '["read", "write"]}; empty keeps the defaults.',
)

# --- Evaluation runs (evaluation.services.runs) ---
# Attempts per rollout of a run when the infrastructure fails it (sandbox, worker, proxy, upstream): retried with
# exponential backoff from CLAWGYM_EVAL_RETRY_BACKOFF_SECONDS, capped; each resume grants as many again.
CLAWGYM_EVAL_MAX_ATTEMPTS = env_int(
    "CLAWGYM_EVAL_MAX_ATTEMPTS",
    3,
    help="Attempts per rollout of an evaluation run when the infrastructure fails it; each resume grants as many "
    "again.",
)
CLAWGYM_EVAL_RETRY_BACKOFF_SECONDS = env_float(
    "CLAWGYM_EVAL_RETRY_BACKOFF_SECONDS", 5.0, help="First backoff before an infrastructure retry, doubled each time."
)
CLAWGYM_EVAL_RETRY_BACKOFF_MAX_SECONDS = env_float(
    "CLAWGYM_EVAL_RETRY_BACKOFF_MAX_SECONDS", 120.0, help="Longest backoff before an infrastructure retry."
)

# --- Review ---
# A claimed candidate is locked to its reviewer for this long; after that anyone may claim it.
CLAWGYM_REVIEW_CLAIM_MINUTES = env_int(
    "CLAWGYM_REVIEW_CLAIM_MINUTES", 30, help="How long a reviewer's claim on a candidate lasts."
)

# --- Variables read where they are used (no Django there, or not Python), declared here for the reference ---
declare(
    "CLAWGYM_KEY_<NAME>",
    "",
    "An endpoint's API key: `endpoints add --api-key-env CLAWGYM_KEY_<NAME>` names the variable, never the key. "
    "CLAWGYM_KEY_SERVED_<NAME> keys are derived from SECRET_KEY for the servers ClawGym starts.",
    read_by="llm (when a call is made)",
)
declare(
    "CLAWGYM_ALLOW_UNSANDBOXED",
    "0",
    "1 lets the process backend run untrusted code with no isolation (development only; its results say so).",
    read_by="sandbox",
)
declare(
    "CLAWGYM_RUNTIME_DIR",
    ".runtime/",
    "Where sandbox runtimes are built and found (<dir>/<version>/).",
    read_by="sandbox, scripts/build-runtime.sh",
)
declare(
    "CLAWGYM_RUNTIME_CACHE",
    "/var/cache/clawgym/runtime",
    "The machine's cache for sandbox runtimes: downloaded packages (packages/) and a copy of each runtime built, which "
    "another checkout on the same machine takes in seconds (hard links) instead of building it.",
    read_by="scripts/build-runtime.sh, scripts/images/lib.sh",
)
declare(
    "CLAWGYM_HARNESS_CACHE",
    "/var/cache/clawgym/harness",
    "The machine's copy of each OpenClaw harness installed, which another checkout on the same machine takes in "
    "seconds (hard links) instead of installing it from npm.",
    read_by="scripts/install-harness.sh",
)
declare(
    "CLAWGYM_CGROUP_PARENT",
    "clawgym",
    "Parent of the per-run cgroups (cgroup v1: below each hierarchy; v2: a delegated subtree).",
    read_by="sandbox",
)
declare(
    "CLAWGYM_SANDBOX_SCRATCH",
    "$TMPDIR/clawgym-volumes",
    "Where the per-run workspace filesystems are made and mounted (compose: the sandbox worker's scratch folder, "
    "default /var/lib/clawgym-scratch, mounted at the same path as on the host).",
    read_by="sandbox, docker-compose.yml",
)
declare(
    "CLAWGYM_SANDBOX_VOLUME_POOL",
    "8",
    "Emptied workspace filesystems a process keeps mounted for its next runs (0: a new one each run).",
    read_by="sandbox",
)
declare(
    "CLAWGYM_SANDBOX_IMAGE",
    "clawgym/sandbox:<runtime version>",
    "The Docker backend's image.",
    read_by="sandbox, docker-compose.yml",
)
declare(
    "CLAWGYM_STOP_GRACE_SECONDS",
    "8",
    "Seconds the web server and the worker get to exit on Ctrl-C or SIGTERM before what is left is killed.",
    read_by="scripts/run.sh",
)
declare("CLAWGYM_DEMO_MODELS", "0", "1 (make demo): serve the demo models too.", read_by="scripts/run.sh")
declare(
    "CLAWGYM_DOCKER_DATA_ROOT",
    "/var/lib/clawgym-docker",
    "Data root of the Docker engine make docker starts.",
    read_by="scripts/docker-engine.sh",
)
declare(
    "CLAWGYM_DOCKER_WAIT",
    "60",
    "Seconds to wait for that engine to answer.",
    read_by="scripts/docker-engine.sh",
)
declare(
    "CLAWGYM_GPU_IMAGE",
    "clawgym/app-gpu:latest",
    "The gpu worker's image in compose; CLAWGYM_GPU_IMAGE=1 scripts/images/app.sh builds it.",
    read_by="docker-compose.yml, scripts/images/app.sh",
)
declare("CLAWGYM_APP_IMAGE", "clawgym/app:latest", "The app's image.", read_by="docker-compose.yml")
declare("CLAWGYM_FRONT_IMAGE", "clawgym/front:latest", "The front (nginx) image.", read_by="docker-compose.yml")
declare(
    "CLAWGYM_POSTGRES_IMAGE",
    "postgres:16",
    "PostgreSQL's image (clawgym/postgres-standin:15 where no registry is reachable).",
    read_by="docker-compose.yml",
)
declare(
    "CLAWGYM_REDIS_IMAGE",
    "redis:7",
    "Redis's image (clawgym/redis-standin:7 where no registry is reachable).",
    read_by="docker-compose.yml",
)
declare("CLAWGYM_WEB_PORT", "127.0.0.1:8000", "The one published port (the front's).", read_by="docker-compose.yml")
declare("CLAWGYM_WEB_PROCESSES", "4", "uvicorn worker processes of the web service.", read_by="docker-compose.yml")
declare("CLAWGYM_DEFAULT_CONCURRENCY", "4", "Processes of the default-queue worker.", read_by="docker-compose.yml")
declare("CLAWGYM_SANDBOX_CONCURRENCY", "4", "Processes of each sandbox-queue worker.", read_by="docker-compose.yml")
declare(
    "CLAWGYM_FRONT_TRUSTED_PROXIES",
    "host",
    "Addresses or networks whose X-Forwarded-For and X-Forwarded-Proto the front believes; host: this host's proxy; "
    "empty: nobody.",
    read_by="docker-compose.yml, deploy/front/start.sh",
)
declare(
    "CLAWGYM_FRONT_UPSTREAM",
    "unix:/run/clawgym-web/web.sock",
    "Where the front passes requests (the web app's socket).",
    read_by="deploy/front/start.sh",
)
declare("CLAWGYM_FRONT_LISTEN", "8000", "What the front listens on.", read_by="deploy/front/start.sh")
declare(
    "PROMETHEUS_MULTIPROC_DIR",
    "",
    "An empty folder per web host when uvicorn runs several --workers: /metrics then sums the processes.",
    read_by="prometheus_client (ops.views)",
)
# Set by ClawGym for the processes it starts; never set by hand.
for _name, _help in {
    "CLAWGYM_FRONT_KEY": "The key a served model's authenticating front (training.serving_front) accepts.",
    "CLAWGYM_POLICY_KEY": "The key the batched server and the RL live policy server accept.",
    "CLAWGYM_WATCH_PID": "The job's pid a trainer watches, exiting with it.",
    "CLAWGYM_CHECK_SCRIPT": "The checker script whose stdout the sub-score hook copies (tasks.checker_hook).",
    "CLAWGYM_CHECK_CAPTURE": "Where that hook copies it.",
    "CLAWGYM_WORKSPACE": "The workspace's path inside the sandbox.",
    "CLAWGYM_FUZZ_NETNS": "Set by bench/fuzz_api.py on itself when it runs again inside its own network namespace.",
}.items():
    declare(_name, "", _help, read_by="internal")
# For the test suite.
declare("CLAWGYM_TEST_REDIS_URL", "redis://127.0.0.1:6379", "The Redis the Celery worker tests use.", read_by="tests")
declare(
    "CLAWGYM_SCREENSHOT_DIR", "/tmp/clawgym-screens", "Where browser tests leave their screenshots.", read_by="tests"
)
declare("CLAWGYM_COMPOSE", "docker-compose", "The compose command the deployment test runs.", read_by="tests")
declare(
    "CLAWGYM_DOCS_SCREENSHOTS",
    "0",
    "1 (make docs-screenshots): the browser tests save the screenshots the docs show into docs/images/.",
    read_by="tests",
)
