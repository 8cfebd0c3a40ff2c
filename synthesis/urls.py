"""Synthesis pages, under /synthesis/ (clawgym_site.urls includes them as the "synthesis" namespace)."""

from django.urls import path

from . import views_batches, views_qa, views_seeds

app_name = "synthesis"
urlpatterns = [
    # batches and their items
    path("", views_batches.batch_list, name="list"),
    path("start/", views_batches.batch_start, name="start"),
    path("running/", views_batches.running_batches, name="running"),
    path("<int:pk>/", views_batches.batch_detail, name="detail"),
    path("<int:pk>/resume/", views_batches.batch_resume, name="resume"),
    path("<int:pk>/cancel/", views_batches.batch_cancel, name="cancel"),
    path("items/<int:pk>/", views_batches.item_detail, name="item"),
    # quality assessment of any task revision (the task page's card)
    path("qa/<int:revision_id>/", views_qa.qa_card, name="qa"),
    # seeds
    path("personas/", views_seeds.persona_list, name="personas"),
    path("personas/import/", views_seeds.persona_import, name="personas-import"),
    path("skills/", views_seeds.skill_list, name="skills"),
    path("skills/import-bundled/", views_seeds.skills_import_bundled, name="skills-import-bundled"),
    path("skills/annotate/", views_seeds.skills_annotate, name="skills-annotate"),
    path("skills/<int:pk>/override/", views_seeds.skill_override, name="skill-override"),
]
