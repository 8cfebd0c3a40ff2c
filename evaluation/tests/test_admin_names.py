"""The admin names models in plain English ("Trajectories", not Django's default "Trajectorys")."""

from django.apps import apps


def test_no_model_is_named_with_a_plain_s_after_a_consonant_y():
    for model in apps.get_models():
        name = str(model._meta.verbose_name)
        plural = str(model._meta.verbose_name_plural)
        if name.endswith("y") and name[-2:-1] not in "aeiou":
            assert plural == name[:-1] + "ies", (model, plural)


def test_the_admin_index_lists_trajectories(admin_client):
    page = admin_client.get("/admin/").content.decode()
    assert "Trajectories" in page and "Trajectorys" not in page
