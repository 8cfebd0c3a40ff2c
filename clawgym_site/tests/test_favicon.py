"""Pages that do not link our icon (the Django admin, the API docs, the browsable API) make browsers ask /favicon.ico."""

from django.templatetags.static import static


def test_favicon_ico_leads_to_the_icon(client, db):
    response = client.get("/favicon.ico")
    assert response.status_code == 301 and response["Location"] == static("favicon.svg")
