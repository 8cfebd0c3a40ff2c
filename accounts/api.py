"""POST /api/auth/token/ {username, password} -> {token}: scripts exchange a password for their API token.

DRF's own view, with django-axes' lockout said as such: a client address with too many failed sign-ins gets 429
(and Retry-After), not the same 400 a wrong password gets. Axes counts the failures (settings: AXES_*); DRF's request
object carries its lockout flag, which the site's AxesMiddleware does not see.
"""

from axes.helpers import get_cool_off, get_lockout_message
from rest_framework import parsers, status
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from lib.api_parsers import JSONParser


class ObtainToken(ObtainAuthToken):
    parser_classes = (parsers.FormParser, parsers.MultiPartParser, JSONParser)  # DRF's view names its own

    def post(self, request, *args, **kwargs):
        try:
            return super().post(request, *args, **kwargs)
        except ValidationError:
            if not getattr(request, "axes_locked_out", False):
                raise
            cool_off = get_cool_off(request)
            headers = {"Retry-After": str(int(cool_off.total_seconds()))} if cool_off else {}
            return Response(
                {"detail": get_lockout_message()}, status=status.HTTP_429_TOO_MANY_REQUESTS, headers=headers
            )


obtain_token = ObtainToken.as_view()
