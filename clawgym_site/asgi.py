import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "clawgym_site.settings")
django_application = get_asgi_application()

# The recording proxy (/proxy/…) skips the site's middleware: see llm/asgi.py.
from llm.asgi import with_proxy_lane  # noqa: E402  (needs the apps loaded above)

application = with_proxy_lane(django_application)
