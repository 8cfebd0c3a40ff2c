"""python manage.py export_dataset ID OUT --format messages|tokenized|hf [--tokenizer PATH] [--split S]
[--max-length N] [--force] [--json]"""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from lib.hf_dataset import HfExportError
from training.masks import MaskError

from ...exports import FORMATS, ExportError, export_messages, export_tokenized
from ...models import DatasetSample, TrainingDataset


class Command(BaseCommand):
    help = (
        'Write a training dataset to the file OUT: `messages` as JSON lines {"messages", "tools"} (what TRL, '
        "OpenRLHF and LLaMA-Factory read), `tokenized` as Parquet with the columns input_ids, assistant_masks, "
        "length for the tokenizer in the folder --tokenizer (its chat template must carry generation markers). "
        "Every sample in order, or one --split. `hf` writes the folder OUT as a Hugging Face dataset: Parquet "
        "configurations `messages` and, with a tokenizer (--tokenizer, else the dataset's own), `tokenized` "
        "(input_ids, assistant_masks, labels, length), each with its train and validation splits, and a README.md "
        'dataset card. With --json the last line is {"path", "samples", "format"} (for hf also "files", "paths", '
        '"splits": rows per config/split, "bytes").'
    )

    def add_arguments(self, parser):
        parser.add_argument("dataset", type=int, metavar="ID", help="the training dataset")
        parser.add_argument("out", metavar="OUT", help="the file to write (replaced)")
        parser.add_argument("--format", required=True, choices=(*FORMATS, "hf"))
        parser.add_argument("--tokenizer", metavar="PATH", help="a local tokenizer folder (for --format tokenized)")
        parser.add_argument("--split", choices=DatasetSample.Split.values, help="only this split (default: all)")
        parser.add_argument("--max-length", type=int, help="cut tokenized samples to this many tokens")
        parser.add_argument("--force", action="store_true", help="hf: replace the folder OUT when it is not empty")
        parser.add_argument("--json", dest="as_json", action="store_true", help="print the result as JSON last")

    def handle(self, *args, **flags):
        dataset = TrainingDataset.objects.filter(pk=flags["dataset"]).first()
        if dataset is None:
            raise CommandError(f"no training dataset #{flags['dataset']}")
        out = Path(flags["out"]).resolve()
        try:
            if flags["format"] == "hf":
                return self._hf(dataset, out, flags)
            if flags["format"] == "messages":
                count = export_messages(dataset, out, split=flags["split"])
            else:
                if not flags["tokenizer"]:
                    raise CommandError("--format tokenized needs --tokenizer PATH (a local tokenizer folder)")
                count = export_tokenized(
                    dataset, out, flags["tokenizer"], split=flags["split"], max_length=flags["max_length"]
                )
        except (ExportError, MaskError, HfExportError, OSError) as exc:
            raise CommandError(str(exc)) from None
        result = {"path": str(out), "samples": count, "format": flags["format"]}
        if flags["as_json"]:
            self.stdout.write(json.dumps(result))
        else:
            self.stdout.write(f"{count} samples of dataset #{dataset.pk} written to {out} ({flags['format']})")

    def _hf(self, dataset, out, flags):
        from ...hf_export import export_dataset_hf

        if flags["split"]:
            raise CommandError("--format hf writes every split (each its own files); leave out --split")
        result = export_dataset_hf(
            dataset, out, tokenizer_path=flags["tokenizer"], max_length=flags["max_length"], force=flags["force"]
        )
        samples = sum(s.rows for s in result.splits if s.config == "messages")
        if flags["as_json"]:
            self.stdout.write(json.dumps({**result.as_dict(), "samples": samples}))
        else:
            configs = sorted({s.config for s in result.splits})
            self.stdout.write(
                f"{samples} samples of dataset #{dataset.pk} written to {out} as a Hugging Face dataset "
                f"({', '.join(configs)})"
            )
