import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawgym_site.settings")
django_application = get_asgi_application()

from django.conf import settings  # noqa: E402  (after the app registry is ready)

from lib.body_limits import BodyLimit  # noqa: E402

# The recording proxy (/proxy/…) skips the site's middleware: see llm/asgi.py.
from llm.asgi import PREFIX as PROXY_PREFIX  # noqa: E402  (needs the apps loaded above)
from llm.asgi import with_proxy_lane  # noqa: E402

# Every body is bounded before anything reads it (lib.body_limits); the proxy's token is its credential.
application = BodyLimit(
    with_proxy_lane(django_application),
    default=settings.CLAWGYM_MAX_REQUEST_BYTES,
    by_prefix=settings.CLAWGYM_REQUEST_BYTES_BY_PATH,
    anonymous=settings.CLAWGYM_ANONYMOUS_MAX_REQUEST_BYTES,
    session_cookie=settings.SESSION_COOKIE_NAME,
    anonymous_exempt=(PROXY_PREFIX,),
)
