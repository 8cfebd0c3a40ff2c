import logging
import re

from django.apps import AppConfig

# /proxy/<token>/…: the token is a credential, so the logs that name request paths get it masked:
# the web server's access log, and Django's log of 4xx/5xx responses (an upstream 429 passed through, say).
LOGGERS = ("uvicorn.access", "django.request")
PROXY_TOKEN = re.compile(r"(/proxy/)[^/\s]+")


class RedactProxyTokens(logging.Filter):
    def filter(self, record):
        if isinstance(record.args, tuple):
            record.args = tuple(PROXY_TOKEN.sub(r"\1…", a) if isinstance(a, str) else a for a in record.args)
        return True


class LlmConfig(AppConfig):
    name = "llm"
    verbose_name = "LLM gateway"

    def ready(self):
        for name in LOGGERS:
            logger = logging.getLogger(name)
            if not any(isinstance(f, RedactProxyTokens) for f in logger.filters):
                logger.addFilter(RedactProxyTokens())
