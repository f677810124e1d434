"""A dependency-light `Encoder` for the tests of the hybrid ranker and the benches' vector cache.

Hashed character trigrams (numpy): it relates a misspelt request to the skill it means,
spelling, not meaning. The MiniLM encoder itself is measured on the findability bench
(tests/test_bench_findability.py, slow, with the `embeddings` extra).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["TrigramEncoder"]


class TrigramEncoder:
    """Unit vectors of hashed character trigrams (256 dimensions), recording every text asked."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def encode(self, texts: Sequence[str]) -> Any:
        self.texts.extend(texts)
        rows = np.zeros((len(texts), 256), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                padded = f" {word} "
                for j in range(len(padded) - 2):
                    rows[i, hashlib.blake2b(padded[j : j + 3].encode(), digest_size=2).digest()[0]] += 1.0
            norm = float(np.linalg.norm(rows[i]))
            rows[i] /= norm or 1.0
        return rows
