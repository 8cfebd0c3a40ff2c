"""python manage.py build_dataset (--run EVAL_RUN … | --group ROLLOUT_GROUP …) [--base-model NAME|PATH]
[--min-reward 0.5] [--max-tokens N] [--validation-share 0.05] [--seed 0] [--include-benchmark-tasks --reason TEXT --by ADMIN]
[--include-unverified-history --history-reason TEXT --by ADMIN] [--name N] [--json]"""

import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from jobs.cli import UsageError

from ...base_models import BaseModelError, named_or_folder
from ...services.datasets import DatasetError, build_dataset, summary


class Command(BaseCommand):
    help = (
        "Build a training dataset, in this process, from the trajectories of evaluation runs and/or rollout groups: "
        "reward >= --min-reward, complete interactions only, at most --max-tokens, near-duplicates removed, tasks "
        "of any benchmark version and trajectories whose assistant turns the proxy did not record left out (unless "
        "an admin overrides either with a reason), split by task. Tokens are counted with --base-model's tokenizer "
        "(the tokenized sample, as training sees it); without one they are the models' reported usage, an "
        "estimate. Prints what was kept and why the rest was left out (a dataset that keeps nothing is empty, and "
        'says why); with --json one JSON object on the last line: {"dataset", "status", "empty_reason", "sha256", '
        '"trajectories", "excluded": {reason: n}, "tokens_counted_with"}. Exit status (jobs.cli): 2 when refused '
        "(an empty dataset is made, and exits 0)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--run", action="extend", nargs="+", type=int, default=[], metavar="EVAL_RUN", help="evaluation run ids"
        )
        parser.add_argument(
            "--group",
            action="extend",
            nargs="+",
            default=[],
            metavar="ROLLOUT_GROUP",
            help="rollout groups (rollouts started together)",
        )
        parser.add_argument(
            "--base-model",
            default="",
            metavar="NAME|PATH",
            help="the base model (registered name, or a model folder) whose tokenizer counts tokens",
        )
        parser.add_argument("--min-reward", type=float, default=0.5, help="keep rewards at or above this (0.5)")
        parser.add_argument("--max-tokens", type=int, help="leave out trajectories longer than this")
        parser.add_argument("--validation-share", type=float, default=0.05, help="tasks on the validation side")
        parser.add_argument("--seed", type=int, default=0, help="seeds the split (0)")
        parser.add_argument(
            "--include-benchmark-tasks",
            action="store_true",
            help="override the contamination guard (needs --reason and --by)",
        )
        parser.add_argument("--reason", default="", help="why benchmark tasks are included (written on the dataset)")
        parser.add_argument(
            "--include-unverified-history",
            action="store_true",
            help="override the history guard: include trajectories with assistant turns no recorded "
            "call answered (needs --history-reason and --by)",
        )
        parser.add_argument(
            "--history-reason", default="", help="why unverified history is included (written on the dataset)"
        )
        parser.add_argument("--by", default="", metavar="USERNAME", help="the admin who overrides a guard")
        parser.add_argument("--name", default="", help="the dataset's name")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the summary as JSON last")

    def handle(self, *args, **flags):
        if not flags["run"] and not flags["group"]:
            raise UsageError("name at least one --run EVAL_RUN or --group ROLLOUT_GROUP")
        user = None
        if flags["include_benchmark_tasks"] or flags["include_unverified_history"]:
            if not flags["by"]:
                raise UsageError(
                    "--include-benchmark-tasks and --include-unverified-history need --by ADMIN (who "
                    "overrides the guard) and a reason (--reason, --history-reason)"
                )
            user = get_user_model().objects.filter(username=flags["by"]).first()
            if user is None:
                raise UsageError(f"no user {flags['by']!r}")
        registered, folder = None, ""
        if flags["base_model"]:
            try:
                registered, folder = named_or_folder(flags["base_model"])
            except BaseModelError as exc:
                raise UsageError(f"--base-model: {exc}") from None
        selection = {"eval_runs": flags["run"], "groups": flags["group"]}
        filters = {
            "min_reward": flags["min_reward"],
            "max_tokens": flags["max_tokens"],
            "validation_share": flags["validation_share"],
            "seed": flags["seed"],
        }
        try:
            dataset = build_dataset(
                selection=selection,
                filters=filters,
                name=flags["name"],
                user=user,
                allow_benchmark_tasks=flags["include_benchmark_tasks"],
                override_reason=flags["reason"],
                allow_unverified_history=flags["include_unverified_history"],
                unverified_history_reason=flags["history_reason"],
                base_model=registered,
                tokenizer_path=folder,
            )
        except DatasetError as exc:
            raise UsageError(str(exc)) from None
        result = summary(dataset)
        split = dataset.stats.get("split", {})
        self.stderr.write(
            f"dataset #{dataset.pk} {dataset.name}: {dataset.trajectories_count} trajectories "
            f"({split.get('train', {}).get('trajectories', 0)} train, "
            f"{split.get('validation', {}).get('trajectories', 0)} validation), sha256 {dataset.sha256}"
        )
        for reason, count in dataset.excluded.items():
            self.stderr.write(f"  left out {count}: {reason}")
        if dataset.status == dataset.Status.EMPTY:
            self.stderr.write(f"dataset #{dataset.pk} is empty: {result['empty_reason']}; training refuses it")
        if not dataset.tokenized:
            self.stderr.write(
                "tokens: the models' reported usage, an estimate (--base-model counts them as training sees them)"
            )
        if flags["as_json"]:
            self.stdout.write(json.dumps(result))
        else:
            self.stdout.write(
                f"dataset {dataset.pk}: {dataset.trajectories_count} trajectories, sha256 {dataset.sha256}"
            )
