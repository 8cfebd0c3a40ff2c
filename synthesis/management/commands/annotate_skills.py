"""python manage.py annotate_skills (--all | --skill NAME ...) --endpoint E [--json]"""

import json

from django.core.management.base import BaseCommand, CommandError

from synthesis.annotation import AnnotationError, AnnotationResult, annotator_endpoint
from synthesis.models import Skill
from synthesis.services import annotate_skills


class Command(BaseCommand):
    help = (
        "Ask a model (--endpoint) to annotate skills: what each does, whether it needs an account or key, whether a "
        "task using it can be done with text files offline, its risk; with the commands it needs that the sandbox "
        "runtime lacks, that gives its synthesizable label. Runs in this process, one call per skill, and stores "
        "each annotation (a failure is kept on the skill). With --json the last line is a JSON array "
        '[{"skill", "synthesizable", "missing_bins", "auth_required", "text_only_compatible", "risk", "error"}] '
        "(synthesizable: the admin's override when set, else the new label; null when the annotation failed and "
        "no override is set). Exits non-zero when an annotation failed."
    )

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--all", dest="all_skills", action="store_true", help="every imported skill")
        which.add_argument("--skill", dest="names", nargs="+", metavar="NAME", help="these skills, by name")
        parser.add_argument("--endpoint", required=True, help="the model endpoint to ask (manage.py endpoints list)")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the results as JSON last")

    def handle(self, *args, all_skills, names, endpoint, as_json, **options):
        try:
            model = annotator_endpoint(endpoint)
        except AnnotationError as exc:
            raise CommandError(str(exc)) from None
        skills = self._skills(all_skills, names)
        if not skills:
            self.stdout.write("there are no skills to annotate: import some first (manage.py import_skills --bundled)")
            if as_json:
                self.stdout.write("[]")
            return

        def heard(result: AnnotationResult):
            if not as_json:
                self.stdout.write(_line(result))

        try:
            results = annotate_skills(skills, model, on_result=heard)
        except AnnotationError as exc:
            raise CommandError(str(exc)) from None
        failed = [r for r in results if r.error]
        good = [r for r in results if not r.error]
        self.stdout.write(
            f"annotated {len(good)} of {len(results)} skills with {model.name}: "
            f"{sum(r.annotation.synthesizable for r in good)} synthesizable"
            + (f"; {len(failed)} failed" if failed else "")
        )
        if as_json:
            self.stdout.write(json.dumps([r.as_row() for r in results], ensure_ascii=False))
        if failed:
            raise CommandError(f"{len(failed)} annotation(s) failed; first: {failed[0].skill.name}: {failed[0].error}")

    def _skills(self, all_skills: bool, names) -> list[Skill]:
        if all_skills:
            return list(Skill.objects.order_by("name"))
        found = list(Skill.objects.filter(name__in=names).order_by("name"))
        known = {s.name for s in found}
        missing = [n for n in dict.fromkeys(names) if n not in known]
        if missing:
            raise CommandError(f"no such skill: {', '.join(missing)}")
        return found


def _line(result: AnnotationResult) -> str:
    if result.error:
        return f"{result.skill.name}: failed: {result.error}"
    a = result.annotation
    label = "synthesizable" if a.synthesizable else "not synthesizable"
    why = []
    if a.auth_required:
        why.append("needs auth")
    if not a.text_only_compatible:
        why.append("not text-only")
    if a.missing_bins:
        why.append("missing " + ", ".join(a.missing_bins))
    return f"{result.skill.name}: {label}" + (f" ({'; '.join(why)})" if why else "")
