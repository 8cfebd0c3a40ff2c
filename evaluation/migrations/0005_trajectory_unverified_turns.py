"""Trajectory.unverified_turns: the assistant turns no recorded call answered. Trajectories rebuilt before are checked
here against their session's recorded answers (evaluation.trajectories.unverified_in), so none is trusted unchecked."""

from django.db import migrations, models
from django.db.models import Q


def check_stored_trajectories(apps, schema_editor):
    from evaluation.trajectories import unverified_in

    Trajectory = apps.get_model("evaluation", "Trajectory")
    ModelCall = apps.get_model("llm", "ModelCall")
    for trajectory in Trajectory.objects.only("id", "messages", "model_call_ids").iterator(chunk_size=200):
        ids = trajectory.model_call_ids or []
        last = ModelCall.objects.filter(pk=ids[-1]).values("session_id", "created_at", "id").first() if ids else None
        earlier = []
        if last is not None and last["session_id"] is not None:
            before = Q(created_at__lt=last["created_at"]) | Q(created_at=last["created_at"], id__lt=last["id"])
            earlier = ModelCall.objects.filter(before, session_id=last["session_id"]).values_list("response", flat=True)
        turns = unverified_in(trajectory.messages or [], earlier)  # no call log left: no turn can be shown recorded
        if turns:
            Trajectory.objects.filter(pk=trajectory.pk).update(unverified_turns=turns)


class Migration(migrations.Migration):

    dependencies = [
        ('evaluation', '0004_evaluation_runs'),
        ('llm', '0005_training_tokens'),
    ]

    operations = [
        migrations.AddField(
            model_name='trajectory',
            name='unverified_turns',
            field=models.JSONField(blank=True, default=list, help_text='Indices of assistant turns that are no recorded answer (forged history).'),
        ),
        migrations.RunPython(check_stored_trajectories, migrations.RunPython.noop),
    ]
