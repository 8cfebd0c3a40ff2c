"""python manage.py export_dataset ID OUT --format messages|tokenized [--tokenizer PATH] [--split S]
[--max-length N] [--json]"""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from ...exports import FORMATS, ExportError, export_messages, export_tokenized
from ...masks import MaskError
from ...models import DatasetSample, TrainingDataset


class Command(BaseCommand):
    help = (
        'Write a training dataset to the file OUT: `messages` as JSON lines {"messages", "tools"} (what TRL, '
        "OpenRLHF and LLaMA-Factory read), `tokenized` as Parquet with the columns input_ids, assistant_masks, "
        "length for the tokenizer in the folder --tokenizer (its chat template must carry generation markers). "
        'Every sample in order, or one --split. With --json the last line is {"path", "samples", "format"}.'
    )

    def add_arguments(self, parser):
        parser.add_argument("dataset", type=int, metavar="ID", help="the training dataset")
        parser.add_argument("out", metavar="OUT", help="the file to write (replaced)")
        parser.add_argument("--format", required=True, choices=FORMATS)
        parser.add_argument("--tokenizer", metavar="PATH", help="a local tokenizer folder (for --format tokenized)")
        parser.add_argument("--split", choices=DatasetSample.Split.values, help="only this split (default: all)")
        parser.add_argument("--max-length", type=int, help="cut tokenized samples to this many tokens")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the result as JSON last")

    def handle(self, *args, **flags):
        dataset = TrainingDataset.objects.filter(pk=flags["dataset"]).first()
        if dataset is None:
            raise CommandError(f"no training dataset #{flags['dataset']}")
        out = Path(flags["out"]).resolve()
        try:
            if flags["format"] == "messages":
                count = export_messages(dataset, out, split=flags["split"])
            else:
                if not flags["tokenizer"]:
                    raise CommandError("--format tokenized needs --tokenizer PATH (a local tokenizer folder)")
                count = export_tokenized(
                    dataset, out, flags["tokenizer"], split=flags["split"], max_length=flags["max_length"]
                )
        except (ExportError, MaskError, OSError) as exc:
            raise CommandError(str(exc)) from None
        result = {"path": str(out), "samples": count, "format": flags["format"]}
        if flags["as_json"]:
            self.stdout.write(json.dumps(result))
        else:
            self.stdout.write(f"{count} samples of dataset #{dataset.pk} written to {out} ({flags['format']})")
