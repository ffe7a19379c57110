"""The offline embedding stub answers the way mempalace 3.11's openai-compat client needs."""

from __future__ import annotations

import math

import httpx
import pytest

from palace_conformance.real.embedding import DIMENSIONS, MODEL, embed, environment, running_stub


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_vectors_are_deterministic_normalised_and_closer_for_shared_words() -> None:
    first, again = embed("the palace remembers the lock"), embed("the palace remembers the lock")
    assert first == again and len(first) == DIMENSIONS
    assert math.isclose(sum(x * x for x in first), 1.0, rel_tol=1e-9)
    near = embed("the palace remembers")
    far = embed("quantum chromodynamics lattice")
    assert _cosine(first, near) > _cosine(first, far)


def test_serves_rows_indexed_in_order_over_a_real_socket() -> None:
    with running_stub() as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        reply = httpx.post(f"{url}/embeddings", timeout=10,
                           json={"model": MODEL, "input": ["a", "b c"], "encoding_format": "float"})
    assert reply.status_code == 200
    rows = reply.json()["data"]
    assert [row["index"] for row in rows] == [0, 1]
    assert rows[1]["embedding"] == embed("b c")


@pytest.mark.parametrize(("path", "body", "status"), [
    ("/v1/embeddings", {"input": [1, 2]}, 400),
    ("/v1/embeddings", {"model": MODEL}, 400),
    ("/v1/chat", {"input": ["a"]}, 404),
])
def test_refuses_what_it_does_not_serve(path: str, body: dict[str, object], status: int) -> None:
    with running_stub() as url:
        base = url.removesuffix("/v1")
        assert httpx.post(f"{base}{path}", json=body, timeout=10).status_code == status


def test_environment_selects_the_openai_compatible_embedder() -> None:
    env = environment("http://127.0.0.1:9/v1")
    assert env == {"MEMPALACE_EMBEDDING_MODEL": "openai-compat",
                   "MEMPALACE_EMBEDDING_API_URL": "http://127.0.0.1:9/v1",
                   "MEMPALACE_EMBEDDING_API_MODEL": MODEL}
