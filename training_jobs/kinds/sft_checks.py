"""What an SFT run is checked for before it is queued (the form, the API and `train` all start runs through
services.runs.start_training_run, which asks the SFT kind, kinds.sft, to check them), so that bad input fails at once
saying what to change, not minutes later in a trainer's traceback, nor as a run that "succeeds" training on nothing:

- the dataset is built and holds samples (an empty one says why: datasets.empty_reason);
- the base model is a model folder on this machine (config.json and a tokenizer): the trainer loads it, and the
  token check below reads its tokenizer;
- a run not on CPU needs a GPU, and no more of them than a gpu worker has (CLAWGYM_TRAINING_GPUS; -1, the default,
  counts this machine's from the NVIDIA driver, unless the gpu workers seen lately are all on other machines);
- trainable tokens: the training samples as the base model's tokenizer renders them (the counts stored on the
  dataset when they were made with the same tokenizer files, else counted now: training_jobs.token_counts), cut to
  the run's max_length as TRL cuts them (the first max_length tokens). A run where no assistant token is left is
  refused; samples that lose all or part of their assistant tokens are warned about, with their share.
"""

import glob
import socket
from dataclasses import dataclass, field
from datetime import timedelta
from statistics import median

from django.conf import settings
from django.utils import timezone

from jobs.models import Worker

from ..base_models import BaseModelError, folder_facts
from ..models import TrainingDataset
from ..services.datasets import empty_reason
from ..token_counts import NoTrainingStack, SampleTokens, TokenCounter, TokenCountError, tokenizer_sha256
from .base import TrainingRunError


@dataclass
class TrainableReport:
    """The training samples' assistant tokens before and after the cut to max_length."""

    max_length: int
    counted: list[SampleTokens] = field(default_factory=list)
    counted_now: bool = False  # with the run's tokenizer, now (not the counts stored on the dataset)

    @property
    def samples(self) -> int:
        return len(self.counted)

    @property
    def trainable_tokens(self) -> int:
        return sum(c.trainable(self.max_length) for c in self.counted)

    @property
    def samples_without(self) -> int:
        """Samples left with no assistant token: they train on nothing."""
        return sum(1 for c in self.counted if not c.trainable(self.max_length))

    @property
    def samples_cut(self) -> int:
        """Samples that keep some of their assistant tokens and lose the others."""
        return sum(1 for c in self.counted if 0 < c.trainable(self.max_length) < c.assistant_tokens)

    @property
    def longest(self) -> int:
        return max((c.tokens for c in self.counted), default=0)

    def refusal(self) -> str:
        starts = sorted(c.first_assistant_token for c in self.counted if c.first_assistant_token is not None)
        where = (
            f": the first assistant turn starts at token {starts[0]:,} at the earliest (median {median(starts):,.0f})"
            if starts
            else ": they hold no assistant turn"
        )
        return (
            f"no sample would be trained on: cut to max_length {self.max_length:,}, none of the {self.samples} "
            f"training samples keeps an assistant token{where}. Raise max_length (max_length={self.longest:,} keeps "
            "every sample whole), or build the dataset from shorter trajectories (its “tokens at most” filter)."
        )

    def warnings(self) -> list[str]:
        out = []
        if self.samples_without:
            out.append(
                f"{self.samples_without} of {self.samples} training samples ({self.samples_without / self.samples:.0%})"
                f" lose all their assistant turns when cut to max_length {self.max_length:,} and train on nothing"
            )
        if self.samples_cut:
            out.append(
                f"{self.samples_cut} of {self.samples} training samples ({self.samples_cut / self.samples:.0%}) lose "
                f"part of their assistant turns when cut to max_length {self.max_length:,}"
            )
        if out:
            out[-1] += f" (max_length={self.longest:,} keeps every sample whole)"
        return out


def check_sft_run(
    *, dataset: TrainingDataset, base_model_path: str, config: dict, cpu: bool, preset: str = ""
) -> list[str]:
    """Refuse (TrainingRunError) what cannot train; the warnings of what trains on less than asked."""
    check_dataset(dataset)
    check_base_model(base_model_path)
    check_gpus(config, cpu=cpu, preset=preset)
    try:
        report = trainable_report(dataset, base_model_path, config["max_length"])
    except NoTrainingStack:
        return [
            "the tokens left once the samples are cut to max_length were not checked here (no training stack in "
            "this process, and the dataset's tokens were not counted with this base model's tokenizer); the trainer "
            "refuses a run with none before its first step"
        ]
    if not report.trainable_tokens:
        raise TrainingRunError(report.refusal())
    return report.warnings()


def check_dataset(dataset: TrainingDataset) -> None:
    if dataset.status == TrainingDataset.Status.EMPTY:
        raise TrainingRunError(f"dataset #{dataset.pk} is empty: {empty_reason(dataset)}; nothing to train on")
    if dataset.status != TrainingDataset.Status.READY:
        raise TrainingRunError(f"dataset #{dataset.pk} is {dataset.status}, not ready")
    if not dataset.samples.filter(split="train").exists():
        raise TrainingRunError(f"dataset #{dataset.pk} has no training sample (all of it is the validation split)")


def check_base_model(path: str) -> None:
    try:
        folder_facts(path)
    except BaseModelError as exc:
        raise TrainingRunError(f"the base model: {exc}") from None


def available_gpus() -> tuple[int | None, str]:
    """(how many GPUs a gpu worker has, where that figure comes from); None when it is not known here: the gpu
    workers seen lately are on other machines, and CLAWGYM_TRAINING_GPUS does not say."""
    configured = settings.CLAWGYM_TRAINING_GPUS
    if configured >= 0:
        return configured, "CLAWGYM_TRAINING_GPUS"
    if _gpu_workers_elsewhere():
        return None, "the gpu workers are other machines"
    found = max(len(glob.glob("/proc/driver/nvidia/gpus/*")), len(glob.glob("/dev/nvidia[0-9]*")))
    return found, "counted on this machine"


def _gpu_workers_elsewhere() -> bool:
    since = timezone.now() - timedelta(seconds=settings.CLAWGYM_WORKER_SEEN_SECONDS)
    hosts = {
        host
        for host, queues in Worker.objects.filter(seen_at__gte=since).values_list("host", "queues")
        if "gpu" in queues.split(",")
    }
    return bool(hosts) and socket.gethostname() not in hosts


def check_gpus(config: dict, *, cpu: bool, preset: str = "") -> None:
    if cpu:
        return
    wanted = max(config["distributed"]["gpus"], 1)
    have, source = available_gpus()
    if have is None:
        return  # the worker's trainer finds out
    asks = f"the {preset} preset asks for" if preset and config["distributed"]["gpus"] else "the run asks for"
    if not have:
        raise TrainingRunError(
            f"this install has no GPU ({source}) and {asks} {wanted} (distributed.gpus): train on CPU (“Train on "
            'CPU” on the form, --cpu, "cpu": true), e.g. with the tiny-cpu preset; or, where the gpu workers are '
            "other machines, set CLAWGYM_TRAINING_GPUS to their GPUs"
        )
    if wanted > have:
        raise TrainingRunError(
            f"{asks} {wanted} GPUs (distributed.gpus) and a gpu worker has {have} ({source}): set "
            f"distributed.gpus={have} (global_batch_size must stay a multiple of per_device_batch_size × GPUs)"
        )


def trainable_report(dataset: TrainingDataset, tokenizer_path: str, max_length: int) -> TrainableReport:
    """The training split's token counts with the tokenizer in `tokenizer_path`, measured against max_length."""
    try:
        same = dataset.tokenized and tokenizer_sha256(tokenizer_path) == dataset.tokenizer_sha256
    except TokenCountError as exc:
        raise TrainingRunError(f"the base model: {exc}") from None
    samples = dataset.samples.filter(split="train").order_by("position")
    if same:
        stored = samples.values_list("tokens", "assistant_spans")
        counted = [SampleTokens(tokens, [tuple(s) for s in spans]) for tokens, spans in stored.iterator(chunk_size=500)]
        return TrainableReport(max_length=max_length, counted=counted)
    rows = samples.values_list("trajectory__messages", "trajectory__tools")
    try:
        with TokenCounter(tokenizer_path) as counter:
            counted = [
                counter.count({"messages": messages, "tools": tools})
                for messages, tools in rows.iterator(chunk_size=200)
            ]
    except NoTrainingStack:
        raise
    except TokenCountError as exc:
        raise TrainingRunError(f"counting the samples' tokens with the base model's tokenizer: {exc}") from None
    return TrainableReport(max_length=max_length, counted=counted, counted_now=True)
