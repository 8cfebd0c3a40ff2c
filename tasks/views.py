# Owned by the pages work (dashboard, task list, detail, import page); replaced there.
from django.http import HttpResponse


def dashboard(request):
    return HttpResponse("ClawGym")
