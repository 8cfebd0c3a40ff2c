"""Token counts of training samples, made with the tokenizer that trains on them: each sample's length and where its
assistant (trainable) tokens are, as masks.tokenize_sample renders it (the chat template's render the SFT trainer
makes too, with the same `{% generation %}` masks).

    with TokenCounter("/models/qwen3-8b") as counter:
        counted = counter.count({"messages": [...], "tools": [...]})  # SampleTokens(tokens=20195, spans=[(20010, 20054)])
    counted.trainable(2048)  # 0: cut to max_length 2048, the sample keeps no assistant token

A model's reported usage is no measure of this: a harness may report a call's new tokens only, and the usage leaves
out the tool schemas the template renders. So datasets count with a tokenizer, and a run checks what is left after
truncation before it is queued (training_jobs.kinds.sft_checks).

The web process and the job workers never load transformers (training_jobs.tests.test_imports): there the tokenizer
runs in a subprocess of its own (`python -m training_jobs.token_counts PATH`: JSON lines of samples in, of counts
out), one per counter, with the allow-listed environment of training_jobs.child_env. A process that has loaded
transformers already (a trainer, a test, `export_dataset`) counts in itself. Where transformers is not installed at
all (an image without requirements-training.txt) the counter raises NoTrainingStack: a dataset build with a tokenizer
fails saying so, and a run's check says it could not count. The module imports no Django (the subprocess runs it
bare); starting a subprocess reads the settings.
"""

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings

from training.masks import MaskError, require_generation_markers, tokenize_sample

from .child_env import child_env

# The files that make a tokenizer what it is (those of them a folder holds): two folders with the same digest
# tokenize alike, whatever their paths.
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
)


class TokenCountError(ValueError):
    """The folder's tokenizer cannot count samples (no tokenizer, no generation markers, …); the message says why."""


class NoTrainingStack(TokenCountError):
    """transformers is not installed where this runs (a web or worker image without requirements-training.txt)."""


@dataclass
class SampleTokens:
    tokens: int  # the whole sample, untruncated
    spans: list[tuple[int, int]] = field(default_factory=list)  # [start, end) of each run of assistant tokens

    @property
    def assistant_tokens(self) -> int:
        return sum(end - start for start, end in self.spans)

    @property
    def first_assistant_token(self) -> int | None:
        return self.spans[0][0] if self.spans else None

    def trainable(self, max_length: int | None) -> int:
        """The assistant tokens left once the sample is cut to its first max_length tokens (TRL's keep_start)."""
        if max_length is None:
            return self.assistant_tokens
        return sum(max(0, min(end, max_length) - start) for start, end in self.spans)

    def as_json(self) -> dict:
        return {"tokens": self.tokens, "spans": [list(s) for s in self.spans]}


def spans_of(masks: list[int]) -> list[tuple[int, int]]:
    spans, start = [], None
    for i, mask in enumerate(masks):
        if mask and start is None:
            start = i
        elif not mask and start is not None:
            spans.append((start, i))
            start = None
    return spans + ([(start, len(masks))] if start is not None else [])


def count_sample(sample: dict, tokenizer) -> SampleTokens:
    tokenized = tokenize_sample(sample, tokenizer)
    return SampleTokens(tokens=tokenized["length"], spans=spans_of(tokenized["assistant_masks"]))


def tokenizer_sha256(path) -> str:
    """sha256 over the tokenizer's files in the folder (names and contents); TokenCountError when it holds none."""
    folder = Path(path)
    digest, found = hashlib.sha256(), False
    for name in TOKENIZER_FILES:
        file = folder / name
        if file.is_file():
            found = True
            digest.update(name.encode() + b"\0" + file.read_bytes() + b"\0")
    if not found:
        raise TokenCountError(f"{folder} holds no tokenizer (tokenizer.json or tokenizer_config.json)")
    return digest.hexdigest()


def load_tokenizer(path):
    """The folder's tokenizer as the trainers load it (AutoTokenizer, local files only), checked for the generation
    markers assistant masks need."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    except (OSError, ValueError) as exc:
        raise TokenCountError(f"the tokenizer in {path} does not load: {exc}") from None
    try:
        require_generation_markers(tokenizer)
    except MaskError as exc:
        raise TokenCountError(str(exc)) from None
    return tokenizer


class TokenCounter:
    """Counts samples with the tokenizer in the folder `path`: in this process when it has transformers loaded
    already, else in a subprocess started on the first sample and ended with the counter."""

    def __init__(self, path, *, in_process: bool | None = None):
        self.path = str(path)
        self.in_process = "transformers" in sys.modules if in_process is None else in_process
        self._tokenizer = None
        self._proc: subprocess.Popen | None = None
        self._stderr = None

    def __enter__(self) -> "TokenCounter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def count(self, sample: dict) -> SampleTokens:
        sample = {"messages": sample.get("messages") or [], "tools": sample.get("tools") or []}
        if self.in_process:
            if self._tokenizer is None:
                self._tokenizer = load_tokenizer(self.path)
            return _counted(sample, self._tokenizer)
        return self._ask(sample)

    def _ask(self, sample: dict) -> SampleTokens:
        if self._proc is None:
            self._start()
        try:
            self._proc.stdin.write(json.dumps(sample, ensure_ascii=False) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        answer = json.loads(line) if line.strip() else {"error": self._died()}
        if "error" in answer:
            self.close()
            raise TokenCountError(answer["error"])
        return SampleTokens(tokens=answer["tokens"], spans=[tuple(s) for s in answer["spans"]])

    def _start(self) -> None:
        if importlib.util.find_spec("transformers") is None:
            raise NoTrainingStack(
                "counting tokens needs the training stack (requirements-training.txt), which is not "
                "installed where this runs"
            )
        # stderr to a file: a tokenizer's warnings must not fill a pipe nobody reads while samples go through.
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "training_jobs.token_counts", self.path],
            cwd=settings.BASE_DIR,
            env=child_env(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            bufsize=1,
        )

    def _died(self) -> str:
        code = self._proc.wait(timeout=30)
        self._stderr.seek(0)
        tail = " / ".join(self._stderr.read().strip().splitlines()[-3:])
        return f"the token counter for {self.path} exited with {code}" + (f": {tail}" if tail else "")

    def close(self) -> None:
        if self._proc is not None:
            proc, self._proc = self._proc, None
            try:
                proc.stdin.close()
            except BrokenPipeError:
                pass
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            proc.stdout.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None


def _counted(sample: dict, tokenizer) -> SampleTokens:
    try:
        return count_sample(sample, tokenizer)
    except MaskError as exc:
        raise TokenCountError(str(exc)) from None
    except Exception as exc:  # the chat template refused the conversation (jinja2's raise_exception, a bad message)
        raise TokenCountError(f"the chat template cannot render a sample: {type(exc).__name__}: {exc}") from None


def main(argv: list[str]) -> int:
    """The subprocess: one JSON line {"tokens", "spans"} (or {"error"}, then exit 1) per sample line read."""
    if len(argv) != 1:
        sys.stderr.write("usage: python -m training_jobs.token_counts TOKENIZER_FOLDER < samples.jsonl\n")
        return 2
    try:
        tokenizer = load_tokenizer(argv[0])
    except TokenCountError as exc:
        tokenizer, error = None, str(exc)
    for line in sys.stdin:
        if not line.strip():
            continue
        if tokenizer is None:
            print(json.dumps({"error": error}), flush=True)
            return 1
        try:
            print(json.dumps(_counted(json.loads(line), tokenizer).as_json()), flush=True)
        except TokenCountError as exc:
            print(json.dumps({"error": str(exc)}), flush=True)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
