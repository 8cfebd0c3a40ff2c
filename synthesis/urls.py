"""Synthesis pages, under /synthesis/ (clawgym_site.urls includes them as the "synthesis" namespace)."""

from django.urls import path

from .views import batches, qa, seeds

app_name = "synthesis"
urlpatterns = [
    # batches and their items
    path("", batches.batch_list, name="list"),
    path("start/", batches.batch_start, name="start"),
    path("running/", batches.running_batches, name="running"),
    path("<int:pk>/", batches.batch_detail, name="detail"),
    path("<int:pk>/resume/", batches.batch_resume, name="resume"),
    path("<int:pk>/cancel/", batches.batch_cancel, name="cancel"),
    path("items/<int:pk>/", batches.item_detail, name="item"),
    # quality assessment of any task revision (the task page's card)
    path("qa/<int:revision_id>/", qa.qa_card, name="qa"),
    # seeds
    path("personas/", seeds.persona_list, name="personas"),
    path("personas/import/", seeds.persona_import, name="personas-import"),
    path("skills/", seeds.skill_list, name="skills"),
    path("skills/import-bundled/", seeds.skills_import_bundled, name="skills-import-bundled"),
    path("skills/annotate/", seeds.skills_annotate, name="skills-annotate"),
    path("skills/<int:pk>/override/", seeds.skill_override, name="skill-override"),
]
