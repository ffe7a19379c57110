"""The kit's deterministic embedder: hashed words into a fixed-length, L2-normalised vector.

The kit's real-server worlds point the real mempalace at an OpenAI-compatible stub serving these
vectors (``palace_conformance.real.embedding``), so the fake computes the same ones where 3.11's
answer is a vector similarity (``check_duplicate``): what passes a threshold is then the same on
both sides, not an artefact of two embedders. Standard library only.
"""

from __future__ import annotations

import hashlib
import math

DIMENSIONS = 384


def embed(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    """The vector of ``text``: a hash of the whole text plus one per word, L2-normalised."""
    vector = [0.0] * dimensions
    for weight, token in [(1.0, text)] + [(2.0, w) for w in text.lower().split()]:
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        for i in range(0, len(digest), 2):
            slot = int.from_bytes(digest[i:i + 2], "big") % dimensions
            vector[slot] += weight if digest[i] & 1 else -weight
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


def cosine_similarity(a: list[float], b: list[float]) -> float:
    """3.11's similarity of two normalised vectors in a cosine space: ``max(0, 1 - distance)``,
    the distance being ``1 - a.b``."""
    return max(0.0, sum(x * y for x, y in zip(a, b, strict=True)))
