"""The LLM gateway's records: model endpoints, every model call, recording sessions, and concurrency leases.

llm knows no other app: the object a call served is a generic reference (content type + id) or a free
`subject` string such as "rollout:42", so tasks, evaluation or review can point at their calls without llm
importing them. How a call's request and tokens are stored as differences from its session's earlier calls, and
read back, is their managers' (llm.managers).
"""

import hashlib
import json
import os
import re
import secrets
from datetime import timedelta
from decimal import Decimal
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.contenttypes.fields import GenericForeignKey
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import ValidationError
from django.core.validators import MinValueValidator
from django.db import connections, models
from django.utils import timezone
from django.utils.crypto import salted_hmac

from lib.money import cost_text
from lib.nulsafe import NulSafeCharField, NulSafeJSONField, NulSafeTextField

from . import request_chain, token_chain
from .managers import ModelCallManager, ModelCallTokensManager, request_links

ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
API_KEY_ENV_PREFIX = "CLAWGYM_KEY_"
# The keys of model servers ClawGym starts itself (checkpoint servers, the RL live policy server): an endpoint names
# one as CLAWGYM_KEY_SERVED_<server>, and it is derived from SECRET_KEY rather than read from the environment.
SERVED_KEY_PREFIX = API_KEY_ENV_PREFIX + "SERVED_"
MILLION = Decimal(1_000_000)
# The model ids of the demo models (`manage.py demo_models`: scripted answers, no real model): pages mark an endpoint
# serving one "demo", so that nobody takes its figures for a model's.
DEMO_MODEL_PREFIX = "clawgym-demo/"
# Set by the client or the caller, never by an endpoint's default sampling settings.
RESERVED_SAMPLING_KEYS = {"model", "messages", "input", "stream"}


def validate_base_url(value: str) -> None:
    # URLField's validator refuses hosts without a dot (http://vllm:8000/v1), which are normal in clusters.
    parts = urlsplit(value)
    if parts.scheme not in {"http", "https"} or not parts.netloc:
        raise ValidationError(f"{value!r} is not an http(s) URL such as https://api.openai.com/v1")
    if parts.query or parts.fragment:
        raise ValidationError("the base URL takes no query string or fragment")


def key_env_refusal(name: str) -> str:
    """Why `name` may not hold an endpoint's API key ("" when it may).

    An endpoint's key goes out as a bearer token to whatever host its base URL names, so the variable it is read
    from is fenced: only CLAWGYM_KEY_… names, or names listed in CLAWGYM_API_KEY_ENV_ALLOW. Otherwise anyone who
    may edit an endpoint could send any server secret (DATABASE_URL, SECRET_KEY) to a host of their choice.
    """
    if not ENV_NAME.match(name):
        return f"{name!r} is not an environment variable name (letters, digits, underscores)"
    if name.startswith(API_KEY_ENV_PREFIX) and len(name) > len(API_KEY_ENV_PREFIX):
        return ""
    if name in settings.CLAWGYM_API_KEY_ENV_ALLOW:
        return ""
    return (
        f"{name!r} may not hold an API key: name a variable starting with {API_KEY_ENV_PREFIX} "
        "(e.g. CLAWGYM_KEY_OPENAI) or add it to the CLAWGYM_API_KEY_ENV_ALLOW setting"
    )


def served_key(name: str) -> str:
    """The key of a server ClawGym started, for the endpoint whose api_key_env is `name` (SERVED_KEY_PREFIX…).

    An HMAC of the name under SECRET_KEY (Django's salted_hmac, salted for this use only): every process that calls
    the endpoint (the web app's proxy, the workers) holds SECRET_KEY and recomputes it, the server is given it when it
    starts, and nothing is stored, in the database, a page or a file. The name carries the server's identity, so each
    server has its own key; rotating SECRET_KEY changes them all (restart the servers then).
    """
    if not name.startswith(SERVED_KEY_PREFIX) or len(name) == len(SERVED_KEY_PREFIX) or not ENV_NAME.match(name):
        raise ValueError(f"{name!r} does not name a served model's key ({SERVED_KEY_PREFIX}…)")
    return "cgk_" + salted_hmac("clawgym.llm.served_key", name, algorithm="sha256").hexdigest()


def validate_env_name(value: str) -> None:
    refusal = key_env_refusal(value) if value else ""
    if refusal:
        raise ValidationError(refusal)


class ModelEndpoint(models.Model):
    """One model behind an OpenAI-compatible API (OpenAI, vLLM, SGLang, OpenRouter, a local server).

    The API key is never stored: `api_key_env` names the environment variable that holds it, read at call time (a
    server ClawGym started is named CLAWGYM_KEY_SERVED_…: its key is derived, see served_key).
    """

    class ApiStyle(models.TextChoices):
        CHAT = "chat", "Chat completions"
        RESPONSES = "responses", "Responses"

    class Role(models.TextChoices):
        GENERATOR = "generator", "Generator"
        JUDGE = "judge", "Judge"
        DIAGNOSIS = "diagnosis", "Diagnosis"
        AGENT = "agent", "Agent"

    name = models.SlugField(max_length=80, unique=True, help_text="Short name scripts and settings use.")
    base_url = NulSafeCharField(
        max_length=300, validators=[validate_base_url], help_text="Up to and including /v1, e.g. http://gpu1:8000/v1"
    )
    model = NulSafeCharField(max_length=200, help_text="Model id the API expects, e.g. gpt-4.1-mini.")
    api_style = NulSafeCharField(max_length=16, choices=ApiStyle.choices, default=ApiStyle.CHAT)
    api_key_env = NulSafeCharField(
        max_length=100,
        blank=True,
        validators=[validate_env_name],
        help_text="Name of the environment variable holding the API key, CLAWGYM_KEY_… (blank: the server needs none).",
    )
    roles = NulSafeJSONField(
        default=list, blank=True, help_text="What it may serve: generator, judge, diagnosis, agent."
    )
    timeout_seconds = models.FloatField(default=120.0, validators=[MinValueValidator(0.1)])
    max_retries = models.PositiveSmallIntegerField(default=3, help_text="Retries on 429, 5xx and timeouts.")
    max_concurrent = models.PositiveSmallIntegerField(
        default=4, validators=[MinValueValidator(1)], help_text="Calls in flight at once, across all processes."
    )
    sampling = NulSafeJSONField(default=dict, blank=True, help_text='Default settings, e.g. {"temperature": 0.2}.')
    price_input_per_mtok = models.DecimalField(max_digits=12, decimal_places=4, default=Decimal(0))
    price_output_per_mtok = models.DecimalField(max_digits=12, decimal_places=4, default=Decimal(0))
    enabled = models.BooleanField(default=True)
    # Where ClawGym registered a server it started itself (the base URL the server was given its served key for): the
    # key of a CLAWGYM_KEY_SERVED_… api_key_env goes to that address only. Set by ClawGym's own registrations
    # (training_jobs.serving, the RL policy endpoint, the demo models), never by a form, the API or the admin.
    served_at = NulSafeCharField(max_length=300, blank=True, default="", editable=False)
    # The served key (CLAWGYM_KEY_SERVED_…) that registration gave this endpoint: the only one it may name. Without it
    # an endpoint of one server could be set to name another server's key and send it to the first one's address.
    served_key_env = NulSafeCharField(max_length=100, blank=True, default="", editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def clean(self):
        unknown = set(self.roles or []) - set(self.Role.values)
        if not isinstance(self.roles, list) or unknown:
            raise ValidationError({"roles": f"roles must be a list of {self.Role.values}; unknown: {sorted(unknown)}"})
        if not isinstance(self.sampling, dict):
            raise ValidationError({"sampling": "sampling must be a JSON object"})
        reserved = RESERVED_SAMPLING_KEYS & set(self.sampling)
        if reserved:
            raise ValidationError({"sampling": f"sampling holds settings such as temperature, not {sorted(reserved)}"})
        refusal = self.served_key_refusal()
        if refusal:
            raise ValidationError({"api_key_env": refusal})

    def served_key_refusal(self) -> str:
        """Why this endpoint may not be sent the served key its api_key_env names ("" when it may, or names none).

        A served key opens a server ClawGym started: it goes only to the address ClawGym registered that server at
        (served_at), never to an endpoint added by hand, nor to one whose base URL was changed since."""
        if not (self.api_key_env or "").startswith(SERVED_KEY_PREFIX):
            return ""
        if not self.served_at:
            return (
                f"{SERVED_KEY_PREFIX}… names the key of a model server ClawGym started itself, which only ClawGym "
                "registers: name the variable that holds this server's own key (e.g. CLAWGYM_KEY_OPENAI)"
            )
        if self.api_key_env != self.served_key_env:
            return (
                f"{self.api_key_env} is not the key ClawGym registered this endpoint with"
                + (f" ({self.served_key_env})" if self.served_key_env else "")
                + ": a served key belongs to its own server's endpoint only"
            )
        if self.base_url != self.served_at:
            return (
                f"{self.api_key_env} is the key of the server ClawGym started at {self.served_at}, and goes to that "
                "address only: keep that base URL, or name another key variable"
            )
        return ""

    def serves(self, role: str) -> bool:
        return role in (self.roles or [])

    @property
    def is_demo(self) -> bool:
        """A demo model (scripted answers, DEMO_MODEL_PREFIX): pages show it with a "demo" badge."""
        return is_demo_model(self.model)

    @classmethod
    def serving(cls, role: str):
        """The enabled endpoints that serve `role`, by name: what a form offers for that role. (A queryset by
        primary key: SQLite's JSON fields have no `contains` lookup.)"""
        enabled = cls.objects.filter(enabled=True).order_by("name")
        return enabled.filter(pk__in=[e.pk for e in enabled.only("pk", "roles") if e.serves(role)])

    def api_key(self) -> str | None:
        """The key from the environment, or None when no variable is named. Never log or render it.

        Checked again here, not only when the endpoint is saved: a row stored before the fence (or written around
        the model's validation) must not send a server secret upstream. Raises MissingApiKey (ApiKeyNotAllowed)."""
        if not self.api_key_env:
            return None
        refusal = key_env_refusal(self.api_key_env)
        if refusal:
            raise ApiKeyNotAllowed(f"endpoint {self.name!r}: {refusal}; change the endpoint's key variable")
        if self.api_key_env.startswith(SERVED_KEY_PREFIX):
            refusal = self.served_key_refusal()  # checked here too: a row written around the model's validation
            if refusal:
                raise ApiKeyNotAllowed(f"endpoint {self.name!r}: {refusal}")
            return served_key(self.api_key_env)  # a server ClawGym started: its key is derived, never in the env
        key = os.environ.get(self.api_key_env)
        if not key:
            raise MissingApiKey(
                f"endpoint {self.name!r} needs its API key in the environment variable {self.api_key_env}"
            )
        return key

    def key_state(self) -> str:
        """What a page or the API may say about the key: none needed, set, missing or not allowed (never the key)."""
        if not self.api_key_env:
            return "none needed"
        if key_env_refusal(self.api_key_env):
            return "not allowed"
        if self.api_key_env.startswith(SERVED_KEY_PREFIX):
            return "not allowed" if self.served_key_refusal() else "set"
        return "set" if os.environ.get(self.api_key_env) else "missing"

    def cost(self, input_tokens: int | None, output_tokens: int | None) -> Decimal:
        return (
            Decimal(input_tokens or 0) * self.price_input_per_mtok
            + Decimal(output_tokens or 0) * self.price_output_per_mtok
        ) / MILLION

    def as_dict(self) -> dict:
        """Everything scripts may see (the key's variable name, never the key)."""
        return {
            "name": self.name,
            "base_url": self.base_url,
            "model": self.model,
            "api_style": self.api_style,
            "api_key_env": self.api_key_env,
            "roles": list(self.roles or []),
            "timeout_seconds": self.timeout_seconds,
            "max_retries": self.max_retries,
            "max_concurrent": self.max_concurrent,
            "sampling": self.sampling,
            "price_input_per_mtok": str(self.price_input_per_mtok),
            "price_output_per_mtok": str(self.price_output_per_mtok),
            "enabled": self.enabled,
        }


def is_demo_model(model: str) -> bool:
    return (model or "").startswith(DEMO_MODEL_PREFIX)


class MissingApiKey(Exception):
    """The endpoint's key cannot be had: its environment variable is unset or empty (or may not be used)."""


class ApiKeyNotAllowed(MissingApiKey):
    """The endpoint names a variable outside CLAWGYM_KEY_… and CLAWGYM_API_KEY_ENV_ALLOW: it is never read."""


SESSION_TOKEN_PREFIX = "cgs_"


def new_session_token() -> str:
    """256 random bits behind a fixed prefix: a bare url-safe token may begin with "-", which a command line then
    reads as an option (`model_calls --session -x…`), and a prefix lets secret scanners recognise a leaked one."""
    return SESSION_TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    """How a session's token is stored: its sha256. The token itself exists only where the session was opened."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def unheld_token_hash() -> str:
    """The default hash of a row made without open_proxy_session: of a token nobody was given, so none opens it."""
    return hash_token(new_session_token())


def default_session_expiry():
    return timezone.now() + timedelta(seconds=settings.CLAWGYM_PROXY_SESSION_TTL_SECONDS)


class ProxySessionQuerySet(models.QuerySet):
    def usable(self):
        """Sessions whose token still opens the proxy: open and not expired."""
        return self.filter(is_open=True, expires_at__gt=timezone.now())

    def by_token(self, token: str):
        return self.filter(token_hash=hash_token(token))


class ProxySession(models.Model):
    """A recording session of the proxy (one rollout attempt, or one opened by `proxy_session`).

    Its token is the only credential an agent gets, and it is a bearer credential (no login): whoever holds it may
    add calls to the session, and so to a rollout's trajectories. So the token is stored hashed, never shown (pages
    and the API name a session by its id), handed once to whoever opened the session, refused once the session is
    closed (its rollout ended) and refused after `expires_at` (sessions nobody closed).
    """

    token_hash = NulSafeCharField(
        max_length=64, unique=True, editable=False, default=unheld_token_hash, help_text="sha256 of the token."
    )
    endpoint = models.ForeignKey(ModelEndpoint, on_delete=models.PROTECT, related_name="proxy_sessions")
    subject = NulSafeCharField(
        max_length=200, blank=True, db_index=True, help_text='What it records, e.g. "rollout:42".'
    )
    is_open = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(
        default=default_session_expiry, help_text="After this its token gets 401 even if nobody closed it."
    )
    closed_at = models.DateTimeField(null=True, blank=True)
    token_limit = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Input + output tokens its calls may use in all; then the proxy refuses (blank: no limit).",
    )
    # Training sessions (RL rollouts): the proxy asks the upstream for token ids and logprobs and stores them with
    # each call (ModelCallTokens), so the trainer trains on exactly the tokens the policy sampled.
    record_tokens = models.BooleanField(default=False)
    # A rollout's session (evaluation and training runs): the run's sampling, which the proxy holds every call to
    # (llm.sampling: {"set": {...}, "max_output_tokens": N}). Null: the body passes as it came (a person's session).
    sampling = NulSafeJSONField(null=True, blank=True, help_text="The run's sampling the proxy enforces (null: none).")

    objects = ProxySessionQuerySet.as_manager()

    # The plaintext token, only on the object open_proxy_session returned (never stored, never loaded).
    token: str | None = None

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"proxy session #{self.pk} → {self.endpoint_id and self.endpoint.name}"

    @property
    def is_usable(self) -> bool:
        return self.is_open and self.expires_at > timezone.now()

    def tokens_used(self) -> int:
        """Input + output tokens of the calls recorded so far, and the tokens held by calls whose answers are not
        (ModelCall.held_tokens): one aggregate over the indexed session key."""
        totals = self.calls.aggregate(
            input=models.Sum("input_tokens"), output=models.Sum("output_tokens"), held=models.Sum("held_tokens")
        )
        return (totals["input"] or 0) + (totals["output"] or 0) + (totals["held"] or 0)

    @property
    def state(self) -> str:
        if not self.is_open:
            return "closed"
        return "open" if self.expires_at > timezone.now() else "expired"


class ModelCall(models.Model):
    """One model call (the client's or the proxy's): what was asked, what came back, and what it cost.

    The proxy writes a call's row before it forwards the call (`answer_state` pending, its `error` saying so) and adds
    the answer when it has come: a call whose row cannot be written is never forwarded. A row whose answer could not
    be added stays without it (`unrecorded`, or pending when not even that could be written) and keeps counting its
    `held_tokens` against its session's limit; its answer was withheld from the agent, and its rollout is the
    infrastructure's failure (evaluation.infra.unrecorded_answers)."""

    class AnswerState(models.TextChoices):
        RECORDED = "recorded", "Recorded"
        PENDING = "pending", "Not recorded yet"  # forwarded, its answer not (yet) written
        UNRECORDED = "unrecorded", "Not recorded"  # its answer came (or the call ended) but could not be written

    endpoint = models.ForeignKey(ModelEndpoint, null=True, on_delete=models.SET_NULL, related_name="calls")
    endpoint_name = NulSafeCharField(max_length=80, db_index=True, help_text="Kept when the endpoint is deleted.")
    model = NulSafeCharField(max_length=200, blank=True)
    purpose = NulSafeCharField(max_length=80, db_index=True, help_text='Why: "proxy", "judge", "test_connection", …')
    subject = NulSafeCharField(max_length=200, blank=True, db_index=True)
    served_type = models.ForeignKey(ContentType, null=True, blank=True, on_delete=models.SET_NULL)
    served_id = NulSafeCharField(max_length=64, blank=True)
    served = GenericForeignKey("served_type", "served_id")
    session = models.ForeignKey(ProxySession, null=True, blank=True, on_delete=models.SET_NULL, related_name="calls")
    api = NulSafeCharField(max_length=16, choices=ModelEndpoint.ApiStyle.choices, default=ModelEndpoint.ApiStyle.CHAT)
    stream = models.BooleanField(default=False)
    # The request as sent upstream is `request` (a property): stored whole in request_part, or as a difference from
    # an earlier call of its session (llm.request_chain). RESTRICT: a base deleted alone would leave the calls built
    # on it unreadable; calls deleted together (with the calls built on them) go together.
    request_part = NulSafeJSONField(
        help_text="The request body as sent upstream, or, with a base, what it adds to its base (llm.request_chain)."
    )
    request_base = models.ForeignKey("self", null=True, blank=True, on_delete=models.RESTRICT, related_name="+")
    request_shared = models.PositiveIntegerField(
        default=0, help_text="Items of the base's conversation list that open this request's."
    )
    request_inherited = NulSafeJSONField(
        default=list, blank=True, help_text="Top-level keys of the request whose value is the base's."
    )
    request_chars = models.PositiveIntegerField(
        null=True, blank=True, help_text="Characters of the whole request as JSON (null: recorded before it was kept)."
    )
    response = NulSafeJSONField(null=True, blank=True, help_text="The response (assembled, when streamed).")
    sampling_changes = NulSafeJSONField(
        default=list,
        blank=True,
        help_text="What the proxy set, capped, removed or refused of the agent's sampling (llm.sampling).",
    )
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = NulSafeTextField(blank=True)
    answer_state = NulSafeCharField(max_length=16, choices=AnswerState.choices, default=AnswerState.RECORDED)
    held_tokens = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="What a proxied call counts against its session's token limit while no usage of its answer is "
        "recorded: the output cap it was forwarded with.",
    )
    attempts = models.PositiveSmallIntegerField(default=1)
    input_tokens = models.PositiveIntegerField(null=True, blank=True)
    output_tokens = models.PositiveIntegerField(null=True, blank=True)
    latency_ms = models.FloatField(
        null=True, blank=True, help_text="Total time, first byte sent to last byte received."
    )
    ttft_ms = models.FloatField(null=True, blank=True, help_text="Time to the first streamed chunk.")
    cost = models.DecimalField(max_digits=14, decimal_places=8, default=Decimal(0))
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    objects = ModelCallManager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["served_type", "served_id"], name="modelcall_served")]

    def __str__(self):
        return f"{self.purpose} call #{self.pk} to {self.endpoint_name}"

    @property
    def request(self) -> dict:
        """The request body as sent upstream, rebuilt from its chain when it has a base (its ancestors read in one
        query; `ModelCall.objects.with_requests()` rebuilds a list of calls at once). Raises
        request_chain.BrokenChain when the stored rows do not add up."""
        if "_request" not in self.__dict__:
            if self.request_base_id is None:
                return self.request_part
            self._request = request_chain.rebuild(request_links([self.pk], using=self._state.db), self.pk)
        return self._request

    @request.setter
    def request(self, value) -> None:
        """Store `value` whole (ModelCall.objects.record stores it as a difference where that saves)."""
        self.request_part, self.request_base_id, self.request_shared, self.request_inherited = value, None, 0, []
        self.request_chars = len(json.dumps(value, ensure_ascii=False)) if value is not None else None
        self.__dict__.pop("_request", None)

    @property
    def ok(self) -> bool:
        return not self.error

    @property
    def answer_recorded(self) -> bool:
        return self.answer_state == self.AnswerState.RECORDED

    @property
    def total_tokens(self) -> int:
        return (self.input_tokens or 0) + (self.output_tokens or 0)

    def as_dict(self) -> dict:
        return {
            "id": self.pk,
            "endpoint": self.endpoint_name,
            "model": self.model,
            "purpose": self.purpose,
            "subject": self.subject,
            "session": self.session_id,  # the session's id: its token is a credential, never shown
            "api": self.api,
            "stream": self.stream,
            "request": self.request,
            "response": self.response,
            "sampling_changes": self.sampling_changes,
            "status_code": self.status_code,
            "error": self.error,
            "answer_state": self.answer_state,
            "attempts": self.attempts,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "latency_ms": self.latency_ms,
            "ttft_ms": self.ttft_ms,
            "cost": cost_text(self.cost),
            "created_at": self.created_at.isoformat(),
        }


class EndpointLease(models.Model):
    """One of an endpoint's `max_concurrent` call slots. A caller holds a slot by a conditional UPDATE.

    Rows, not Redis: the bound holds across processes on SQLite (the embedded default) and PostgreSQL alike.
    A slot whose holder died frees itself when `expires_at` passes (set to the call's timeout plus a margin).
    """

    endpoint = models.ForeignKey(ModelEndpoint, on_delete=models.CASCADE, related_name="leases")
    slot = models.PositiveSmallIntegerField()
    holder = NulSafeCharField(max_length=100, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["endpoint", "slot"], name="endpointlease_unique_slot")]

    def __str__(self):
        return f"{self.endpoint_id} slot {self.slot}: {self.holder or 'free'}"


def served_reference(obj) -> tuple[ContentType | None, str]:
    """(content type, id) for the object a call served, or (None, "") for none."""
    if obj is None:
        return None, ""
    return ContentType.objects.get_for_model(obj), str(obj.pk)


class ModelCallTokens(models.Model):
    """The exact tokens of one proxied call of a training session: the prompt as the upstream tokenized it, the
    tokens it sampled (first choice) and their logprobs. `exact` is False when the upstream gave no token ids and
    they were re-tokenized afterwards (the sample builder counts those as inexact).

    The prompt is stored as a reference to an earlier row of the session plus the ids after what they share
    (llm.token_chain); read it with `prompt_ids()`. A row without a base holds its whole prompt (as rows written
    before the reference existed do). Write rows with `ModelCallTokens.objects.record`."""

    call = models.OneToOneField(ModelCall, on_delete=models.CASCADE, related_name="tokens")
    # RESTRICT: a base deleted alone would leave the rows built on it unreadable; calls deleted together (with
    # the rows built on them) go together.
    prompt_base = models.ForeignKey("self", null=True, blank=True, on_delete=models.RESTRICT, related_name="+")
    prompt_base_length = models.PositiveIntegerField(
        default=0, help_text="Ids of the base's prompt and completion that open this prompt."
    )
    prompt_suffix_ids = NulSafeJSONField(default=list, help_text="The prompt's ids after those shared with the base.")
    prompt_length = models.PositiveIntegerField(help_text="The whole prompt's length (checked on every rebuild).")
    completion_token_ids = NulSafeJSONField(default=list)
    completion_logprobs = NulSafeJSONField(default=list, help_text="One float per completion token.")
    exact = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ModelCallTokensManager()

    def __str__(self):
        return f"tokens of call #{self.call_id}"

    def prompt_ids(self) -> list[int]:
        """The whole prompt's ids (a new list), rebuilt from the row's chain: its ancestors are read in one query
        (a recursive CTE). Raises token_chain.BrokenChain when the stored rows do not add up."""
        links = {self.pk: self._link()}
        if self.prompt_base_id is not None:
            table = connections[self._state.db].ops.quote_name(self._meta.db_table)
            # UNION, not UNION ALL: a (forged) loop ends the recursion, and token_chain.sequence reports it.
            ancestors = ModelCallTokens.objects.db_manager(self._state.db).raw(
                f"WITH RECURSIVE chain(id, base) AS (SELECT id, prompt_base_id FROM {table} WHERE id = %s"
                f" UNION SELECT t.id, t.prompt_base_id FROM {table} t JOIN chain ON t.id = chain.base)"
                " SELECT id, prompt_base_id, prompt_base_length, prompt_suffix_ids, prompt_length,"
                f" completion_token_ids FROM {table} WHERE id IN (SELECT id FROM chain)",
                [self.prompt_base_id],
            )
            links.update((row.pk, row._link()) for row in ancestors)
        return token_chain.prompt_of(links, self.pk)

    def _link(self) -> token_chain.Link:
        return token_chain.Link(
            self.pk,
            self.prompt_base_id,
            self.prompt_base_length,
            self.prompt_suffix_ids,
            self.prompt_length,
            self.completion_token_ids,
        )
