"""Sampling for many requests at once from one causal LM in this process: rows join the running batch at any decode
step and leave it as soon as they finish (continuous batching over a plain KV cache). Used by the live policy server
of RL runs (the trainer's own model) and by the `batched` serving backend (training.batched_server), never by
the web app (torch is imported inside methods).

Why: on a CPU a small model's decode step reads every weight once whatever the rows, so a step for 8 rows costs little
more than for one. SmolLM2-135M fp32 on 2 cores, a 228-token prompt, 64 tokens sampled per row (transformers'
`generate`): 21.6 tokens/s for 1 row, 64 for 8, 84 for 16; `transformers serve --continuous-batching` gave 32.6 to 8
streams (its paged cache is costly on CPU). bench/serve_bench.py measures the servers side by side.

How: every active row has one sampled token not yet in the cache (its "pending" token). A step feeds each row's
pending token, with the rows' real positions (left padding is masked out and skipped by position ids), and samples
the next. New rows are prefilled together (left-padded; only the last position's logits computed) and their caches
merged into the batch's, padded on the left to the longer of the two; finished rows are dropped from the cache, and
columns that only padding holds are cut. A finished row's cache is kept (PrefixCache, bounded in bytes): an agent's
next call opens with its last prompt and answer, so only the tool results and the new turn are computed again. On
a CPU the prefill is what costs: computing a 355-token prompt for 8 rows took about as long as sampling 48 tokens
for them.

Sampling is per row: its temperature (0: greedy), its top-p, and a generator of its own (seeded by the request's seed
when it gives one, so a request's draw does not depend on which others share its batch, up to the last bits of float
arithmetic that batch shapes change). The log-probability returned for each token is that of the distribution it was
drawn from (logits / temperature, after top-p), as vLLM's processed logprobs and TRL's trainer compute it.

Only models whose cache is a plain full-attention one (Llama, Qwen2/3, SmolLM2, …) are taken: a sliding-window or
recurrent cache cannot be merged and cut like this, and the sampler says so at start.
"""

import functools
import threading
from dataclasses import dataclass, field

# Finished rows' caches kept for the calls that continue them, at most this many bytes (SmolLM2-135M: 46 KB a token, so
# 1 GiB holds about 23K tokens: sixteen agents' 1,400-token conversations).
PREFIX_CACHE_BYTES = 1 << 30
MIN_REUSE = 16  # fewer shared tokens are computed again with the others (one batched prefill beats a row alone)
SPARE_COLUMNS = 256  # a cache grown past its room gets this many columns (or a quarter of its own) to grow into


class SamplingError(RuntimeError):
    pass


class PrefixCache:
    """Finished rows' caches by their tokens, the most recently used last, bounded in bytes. A row's cache covers
    the tokens that were fed (its prompt and all but its last sampled token), so entries are keyed by those. An entry
    that a new one extends (an agent's earlier call, continued by its next) is dropped: the new one serves both."""

    def __init__(self, max_bytes: int):
        self.max_bytes = int(max_bytes)
        self.entries: list[tuple[list[int], list, int]] = []  # (token ids, (keys, values) per layer, bytes)
        self.bytes = 0

    def store(self, token_ids: list[int], layers: list) -> None:
        columns = layers[0][0].size(2) if layers else 0
        if not columns or self.max_bytes <= 0:
            return
        size = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers)
        if size > self.max_bytes:
            return
        ids = list(token_ids[:columns])
        kept = [entry for entry in self.entries if ids[: len(entry[0])] != entry[0]]
        self.entries = kept + [(ids, layers, size)]
        self.bytes = sum(entry[2] for entry in self.entries)
        while self.bytes > self.max_bytes:
            self.bytes -= self.entries.pop(0)[2]

    def longest(self, prompt_ids: list[int]) -> tuple[int, list | None]:
        """The most tokens of `prompt_ids` (all but its last, which must be computed for its logits) that a stored
        entry opens with, and that entry's layers (then the most recently used)."""
        best, found = 0, None
        head = prompt_ids[: len(prompt_ids) - 1]
        for position, (ids, _layers, _size) in enumerate(self.entries):
            shared = 0
            for a, b in zip(ids, head):
                if a != b:
                    break
                shared += 1
            if shared > best:
                best, found = shared, position
        if found is None:
            return 0, None
        entry = self.entries.pop(found)
        self.entries.append(entry)
        return best, entry[1]

    def clear(self) -> None:
        self.entries, self.bytes = [], 0


@dataclass
class Row:
    prompt_ids: list[int]
    max_tokens: int
    temperature: float
    top_p: float
    seed: int | None
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    finished: bool = False  # ended by an end-of-sequence token (else by max_tokens)
    error: BaseException | None = None
    done: threading.Event = field(default_factory=threading.Event)
    generator: object = None


class BatchedSampler:
    """`sample()` from any number of threads; the batch runs in whichever thread calls `run()`.

    Run it in the thread that does the process's other torch work (the main thread): on this 2-core machine
    transformers' `generate` gave 21 tokens/s in the main thread and 12 in a second one, whose OpenMP team competes
    with the main thread's spinning one (OMP_WAIT_POLICY=PASSIVE gives 12 in both). The RL trainer's main thread runs
    it while it waits for a step's rollouts; the batched model server's main thread runs it for good.

    `model_getter()` is called at each step (the RL trainer's live model); the model is put in eval mode for the step
    and given back in the mode it was in."""

    def __init__(
        self, model_getter, *, eos_ids, pad_id: int, max_batch: int = 16, prefix_bytes: int = PREFIX_CACHE_BYTES
    ):
        self.model_getter = model_getter
        self.prefixes = PrefixCache(prefix_bytes)
        self.eos_ids = {int(i) for i in (eos_ids if isinstance(eos_ids, list | tuple | set) else [eos_ids])}
        self.pad_id = int(pad_id)
        self.max_batch = max(1, int(max_batch))
        self.cond = threading.Condition()
        self.waiting: list[Row] = []
        self.batch = Batch()
        self.stopped = False
        self.steps = 0  # decode steps run (a prefill is not one)
        self.rows_stepped = 0  # rows over those steps: rows_stepped / steps is the mean batch
        self.reused_tokens = 0  # prompt tokens whose cache came from an earlier row (not computed again)

    @staticmethod
    def check_model(model) -> None:
        """Refuse a model whose cache this sampler cannot merge (sliding windows, recurrent state)."""
        from transformers.cache_utils import DynamicCache, DynamicLayer

        layers = DynamicCache(config=model.config).layers
        if not layers or any(type(layer) is not DynamicLayer for layer in layers):
            kinds = sorted({type(layer).__name__ for layer in layers})
            raise SamplingError(
                f"batched sampling needs a plain full-attention KV cache; {model.config.model_type} has {kinds}"
            )

    def sample(
        self, prompt_ids: list[int], *, max_tokens: int, temperature: float, top_p: float = 1.0, seed=None
    ) -> dict:
        """{"token_ids", "logprobs", "finished"} for one prompt; blocks until its row is done."""
        if not prompt_ids:
            raise SamplingError("an empty prompt")
        if max_tokens < 1:
            raise SamplingError("max_tokens must be at least 1")
        row = Row(list(map(int, prompt_ids)), int(max_tokens), float(temperature), float(top_p), seed)
        with self.cond:
            if self.stopped:
                raise SamplingError("the sampler is stopped")
            self.waiting.append(row)
            self.cond.notify_all()
        row.done.wait()
        if row.error is not None:
            raise SamplingError(f"{type(row.error).__name__}: {row.error}") from row.error
        return {"token_ids": row.token_ids, "logprobs": row.logprobs, "finished": row.finished}

    def stop(self) -> None:
        """Fail what waits and what is in flight; later calls to sample() fail at once."""
        with self.cond:
            self.stopped = True
            self._fail(self.waiting + self.batch.rows, SamplingError("the sampler was stopped"))
            self.waiting, self.batch = [], Batch()
            self.cond.notify_all()

    @staticmethod
    def _fail(rows, error: BaseException) -> None:
        for row in rows:
            row.error = error
            row.done.set()

    # --- the batch ----------------------------------------------------------------------------------------------

    def run(self, until=None, poll: float = 0.05) -> None:
        """Run the batch in this thread until `until()` is true (None: until stopped), idle in between."""
        import torch

        while True:
            with self.cond:
                while not self.waiting and not self.batch.rows and not self.stopped:
                    if until is not None and until():
                        return
                    self.cond.wait(poll)
                if self.stopped:
                    return
                room = self.max_batch - len(self.batch.rows)
                joining, self.waiting = self.waiting[:room], self.waiting[room:]
            model, was_training = None, False
            try:
                model = self.model_getter()
                was_training = model.training
                model.eval()
                with torch.no_grad():
                    for part in self._prefill(model, joining):
                        self.batch.join(part)
                    if self.batch.rows:
                        self._step(model, self.batch)
            except Exception as exc:  # every row in flight fails with it; the next ones start a batch afresh
                self._fail(self.batch.rows + [r for r in joining if r not in self.batch.rows], exc)
                self.batch = Batch()
            finally:
                if model is not None:
                    model.train(was_training)
            for index, row in enumerate(self.batch.rows):
                if row.done.is_set() and row.error is None:
                    self.prefixes.store(row.prompt_ids + row.token_ids, self.batch.row_cache(index))
            self.batch.drop_done()

    def forget_prefixes(self) -> None:
        """Drop the stored caches: the model's weights changed (an RL step), so they no longer hold."""
        with self.cond:
            self.prefixes.clear()

    def _prefill(self, model, rows: list[Row]) -> list["Batch"]:
        """The joining rows prefilled, their first token sampled: a row whose prompt opens with a stored row's tokens
        (an agent's next call: the last prompt, the answer, the tool results) from that row's cache, computing only
        the rest; the others together, left-padded."""
        import torch

        device = next(model.parameters()).device
        for row in rows:
            row.generator = torch.Generator(device=device)
            if row.seed is not None:
                row.generator.manual_seed(int(row.seed) & 0xFFFF_FFFF_FFFF_FFFF)
            else:
                row.generator.seed()
        parts, fresh = [], []
        for row in rows:
            reused, layers = self.prefixes.longest(row.prompt_ids)
            if reused >= MIN_REUSE:
                self.reused_tokens += reused
                parts.append(self._forward(model, [row], device, reused, layers))
            else:
                fresh.append(row)
        if fresh:
            parts.append(self._forward(model, fresh, device, 0, None))
        return parts

    def _forward(self, model, rows: list[Row], device, reused: int, layers) -> "Batch":
        """Prefill `rows` (left-padded), after `reused` tokens whose (keys, values) per layer are `layers` (one row)."""
        import torch
        from transformers.cache_utils import DynamicCache

        width = max(len(r.prompt_ids) for r in rows)
        mask = torch.tensor([[0] * (width - len(r.prompt_ids)) + [1] * len(r.prompt_ids) for r in rows], device=device)
        ids = torch.tensor([[self.pad_id] * (width - len(r.prompt_ids)) + r.prompt_ids for r in rows], device=device)
        cache = DynamicCache()
        cache.layer_class_to_replicate = growing_layer()  # each layer made at its first update
        for index, (keys, values) in enumerate(layers or []):
            cache.update(keys[:, :, :reused], values[:, :, :reused], index)
        out = model(
            input_ids=ids[:, reused:],
            attention_mask=mask,
            position_ids=(mask.cumsum(1) - 1).clamp(min=0)[:, reused:],
            cache=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        part = Batch(rows=list(rows), mask=mask, cache=cache)
        self._take(part, out.logits[:, -1, :])
        return part

    def _step(self, model, batch: "Batch") -> None:
        import torch

        device = batch.mask.device
        pending = torch.tensor([[row.token_ids[-1]] for row in batch.rows], device=device)
        positions = batch.mask.sum(1, keepdim=True)
        mask = torch.cat([batch.mask, torch.ones_like(positions)], dim=1)
        out = model(
            input_ids=pending,
            attention_mask=mask,
            position_ids=positions,
            cache=batch.cache,  # grows by the step's column in place
            use_cache=True,
            logits_to_keep=1,
        )
        batch.mask = mask
        self.steps += 1
        self.rows_stepped += len(batch.rows)
        self._take(batch, out.logits[:, -1, :])

    def _take(self, batch: "Batch", logits) -> None:
        """Each unfinished row's next token from its logits; a row that ends (end of sequence, max_tokens) is done."""
        import torch

        for index, row in enumerate(batch.rows):
            if row.done.is_set():
                continue
            scores = logits[index].float()
            if row.temperature <= 0:
                logps = torch.log_softmax(scores, dim=-1)
                token = int(torch.argmax(scores))
            else:
                scores = scores / row.temperature
                if row.top_p < 1.0:
                    scores = nucleus(scores, row.top_p)
                logps = torch.log_softmax(scores, dim=-1)
                # A draw by the inverse of the cumulative distribution: one uniform number from the row's generator
                # (multinomial, or an exponential race, cost about 1 ms a row over 49K tokens here).
                cdf = logps.exp().cumsum(0)
                drawn = torch.rand(1, generator=row.generator, device=cdf.device) * cdf[-1]
                # right=True: never a token of probability 0 (the cdf does not rise at it)
                token = min(int(torch.searchsorted(cdf, drawn, right=True)), cdf.numel() - 1)
            row.token_ids.append(token)
            row.logprobs.append(float(logps[token]))
            if token in self.eos_ids:
                row.finished = True
            if row.finished or len(row.token_ids) >= row.max_tokens:
                row.done.set()


def with_room(columns: int) -> int:
    """The columns of a buffer for a cache of `columns`: spare room for SPARE_COLUMNS more, or a quarter more."""
    return columns + max(SPARE_COLUMNS, columns // 4)


@functools.cache
def growing_layer():
    """A DynamicLayer that grows into spare columns instead of concatenating: transformers' own copies every row's
    keys and values at each decode step, which for 16 rows of 1,000 tokens (SmolLM2-135M, 2 cores) took 0.2 s of a
    0.29 s step. Its keys and values are views of the first columns of a larger buffer; a step writes its column in
    place. A batch that rows join or leave restacks its rows straight into a new buffer (`restack`: one copy; building
    the tensors first and growing them at the next step copied the whole cache twice, which was a tenth of the batched
    server's time in an evaluation). Whoever sets `keys`/`values` otherwise leaves the buffer: the next update copies
    them into a new one."""
    import torch
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        def lazy_initialization(self, key_states, value_states) -> None:
            super().lazy_initialization(key_states, value_states)
            self.key_room = self.value_room = None

        def _holds(self, tensor, room) -> bool:
            return (
                room is not None
                and tensor.data_ptr() == room.data_ptr()
                and tensor.shape[:2] == room.shape[:2]
                and tensor.stride() == room.stride()
            )

        def _grow(self, tensor, room, new):
            """(tensor with `new` appended along the columns, the buffer it now is a view of)."""
            have, more = (tensor.size(-2) if tensor.numel() else 0), new.size(-2)
            if not (self._holds(tensor, room) and have + more <= room.size(-2)):
                room = new.new_empty((*new.shape[:2], with_room(have + more), new.shape[-1]))
                if have:
                    room[:, :, :have] = tensor
            room[:, :, have : have + more] = new
            return room[:, :, : have + more], room

        def update(self, key_states, value_states, *args, **kwargs):
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            with torch.no_grad():
                self.keys, self.key_room = self._grow(self.keys, self.key_room, key_states)
                self.values, self.value_room = self._grow(self.values, self.value_room, value_states)
            return self.keys, self.values

        def restack(self, blocks, columns: int) -> None:
            """Keys and values become `blocks` ((keys, values), each [rows, heads, at most `columns`, dim]) stacked
            by rows, each aligned right in `columns` columns with zeros on its left (left padding), written straight
            into a buffer with spare room. The blocks may be views of this layer's own tensors."""
            rows = sum(keys.size(0) for keys, _ in blocks)
            rooms = []
            for which in (0, 1):
                first = blocks[0][which]
                room = first.new_empty((rows, first.size(1), with_room(columns), first.size(3)))
                at = 0
                for block in blocks:
                    tensor = block[which]
                    count, width = tensor.size(0), tensor.size(2)
                    room[at : at + count, :, : columns - width] = 0
                    room[at : at + count, :, columns - width : columns] = tensor
                    at += count
                rooms.append(room)
            self.key_room, self.value_room = rooms
            self.keys, self.values = rooms[0][:, :, :columns], rooms[1][:, :, :columns]

        def reset(self) -> None:
            self.key_room = self.value_room = None
            super().reset()

    return GrowingLayer


def nucleus(scores, top_p: float):
    """Scores outside the smallest set of tokens whose probability reaches top_p set to -inf."""
    import torch

    ordered, order = torch.sort(scores, descending=True)
    cumulative = torch.softmax(ordered, dim=-1).cumsum(-1)
    cut = cumulative - torch.softmax(ordered, dim=-1) >= top_p  # tokens after the mass is reached
    ordered = ordered.masked_fill(cut, float("-inf"))
    return torch.full_like(scores, float("-inf")).scatter(0, order, ordered)


@dataclass
class Batch:
    """The rows in flight, their attention mask [rows, columns] and their DynamicCache (keys and values per layer,
    each [rows, heads, columns, head_dim])."""

    rows: list = field(default_factory=list)
    mask: object = None
    cache: object = None

    def join(self, other: "Batch") -> None:
        """`other`'s rows after this batch's, both padded on the left to the longer one's columns."""
        import torch

        if not self.rows:
            self.rows, self.mask, self.cache = other.rows, other.mask, other.cache
            return
        width = max(self.mask.size(1), other.mask.size(1))

        def left(tensor, dim):
            missing = width - tensor.size(dim)
            if not missing:
                return tensor
            shape = list(tensor.shape)
            shape[dim] = missing
            return torch.cat([tensor.new_zeros(shape), tensor], dim=dim)

        self.mask = torch.cat([left(self.mask, 1), left(other.mask, 1)])
        for layer, joining in zip(self.cache.layers, other.cache.layers):
            layer.restack([(layer.keys, layer.values), (joining.keys, joining.values)], width)
        self.rows = self.rows + other.rows

    def row_cache(self, index: int) -> list:
        """Row `index`'s (keys, values) per layer over its own columns (its padding left out), copied: [1, heads,
        columns, head_dim] each."""
        columns = int(self.mask[index].sum())
        return [
            (layer.keys[index : index + 1, :, -columns:].clone(), layer.values[index : index + 1, :, -columns:].clone())
            for layer in self.cache.layers
        ]

    def drop_done(self) -> None:
        """The finished rows out of the batch (their answers were handed back), padding-only columns cut."""
        keep = [i for i, row in enumerate(self.rows) if not row.done.is_set()]
        if len(keep) == len(self.rows):
            return
        if not keep:
            self.rows, self.mask, self.cache = [], None, None
            return
        import torch

        index = torch.tensor(keep, device=self.mask.device)
        mask = self.mask.index_select(0, index)
        start = int(mask.any(0).nonzero()[0])
        self.rows = [self.rows[i] for i in keep]
        self.mask = mask[:, start:]
        columns = self.mask.size(1)
        runs = []  # the kept rows as runs of neighbours [first, last + 1): a block each
        for i in keep:
            if runs and runs[-1][1] == i:
                runs[-1][1] = i + 1
            else:
                runs.append([i, i + 1])
        for layer in self.cache.layers:
            layer.restack([(layer.keys[a:b, :, start:], layer.values[a:b, :, start:]) for a, b in runs], columns)
