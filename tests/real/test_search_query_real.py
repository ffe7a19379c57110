"""The fake's query guard (``fake/search_query.py``) against 3.11's own ``sanitize_query``.

One process of the real Python reads a corpus of queries and answers what 3.11 makes of each,
and the fake must make the same. The corpus is seeded: the thresholds (200, 250 and 10
characters) and every way out of the guard (passthrough, a question line, a tail line, a cut
line's last sentence, the last 250 characters), quotes, fullwidth marks and lone surrogates.
Then a search of a long query and the CLI-compatible search's refusals, on the real server and
the fake's palace, through the same calls.
"""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Iterator

import pytest
from tests.real.test_half_made_real import run

from palace_conformance.fake.search_query import MAX_LENGTH, SAFE_LENGTH, clean_query
from palace_conformance.real.embedding import running_stub
from palace_conformance.real.install import locate

pytestmark = pytest.mark.real_palace

GUARD = """
import json, sys
from mempalace.query_sanitizer import sanitize_query
for line in sys.stdin:
    print(json.dumps(sanitize_query(json.loads(line))), flush=True)
"""
WORDS = ("palace", "memory", "drawer", "what", "is", "the", "wing", "room", "agent", "why",
         "filed", "x", "ok", "verbatim", "\u00e7", "\u6587")
ENDS = (".", "!", "?", "\u3002", "\uff01", "\uff1f", "", " ", "?\"", "? '", "...")
QUOTES = ("", "'", "\"", "''", "\"'")


def _line(rng: random.Random, words: int) -> str:
    quote = rng.choice(QUOTES)
    body = " ".join(rng.choice(WORDS) for _ in range(words))
    return quote + body + rng.choice(ENDS) + rng.choice(QUOTES)


def corpus(seed: int = 311, count: int = 400) -> list[str]:
    """Queries around each threshold and through each way out of the guard."""
    rng = random.Random(seed)
    queries = ["", "   ", "short", "  padded  ", "a" * SAFE_LENGTH, " " + "a" * SAFE_LENGTH,
               "a" * (SAFE_LENGTH + 1), "b" * (MAX_LENGTH + 40), "\ud800" + "c" * 300,
               "x\n" * 150, "?" * 260, "'" * 230 + "what is the palace?", "\"\"" + "q" * 240]
    for _ in range(count):
        lines = [_line(rng, rng.choice((1, 2, 3, 8, 20, 45, 60, 90)))
                 for _ in range(rng.randint(1, 6))]
        separator = rng.choice(("\n", " ", "\n\n", ". ", "\n  "))
        queries.append(separator.join(lines))
    return queries


def test_the_fake_cuts_every_query_as_3_11_does() -> None:
    queries = corpus()
    assert sum(len(q.strip()) > SAFE_LENGTH for q in queries) > 150  # the guard does work
    real = locate(None)
    done = subprocess.run([str(real.python), "-c", GUARD], input="".join(
        json.dumps(q) + "\n" for q in queries), capture_output=True, text=True, timeout=120,
        check=True)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(answers) == len(queries)
    methods = set()
    for query, answer in zip(queries, answers, strict=True):
        cleaned = clean_query(query)
        methods.add(answer["method"])
        assert (cleaned.text, cleaned.method, cleaned.changed, cleaned.original_length,
                len(cleaned.text)) == (answer["clean_query"], answer["method"],
                                       answer["was_sanitized"], answer["original_length"],
                                       answer["clean_length"]), query
    assert methods == {"passthrough", "question_extraction", "tail_sentence", "tail_truncation"}


@pytest.fixture(scope="module")
def embedder() -> Iterator[str]:
    with running_stub() as url:
        yield url


def test_a_long_query_s_answers_say_how_it_was_cut(embedder: str) -> None:
    prompt = "You are a careful agent. " * 12 + "\nWhat did we file about the palace?"
    search = {"query": prompt, "wing": "elsewhere"}
    answers = run(embedder, [
        ("mempalace_add_drawer", {"wing": "probe", "room": "notes", "content": "A drawer."}),
        ("mempalace_search", search),
        ("mempalace_search", {**search, "query": "x" * 230}),
        ("mempalace_search", {**search, "query": prompt, "include_media": True}),
        ("mempalace_search", {"query": prompt, "cli_compatible": True}),
        ("mempalace_search", {"query": "  the palace ", "cli_compatible": True}),
        ("mempalace_search", {"query": "the palace", "cli_compatible": True,
                              "wing": "elsewhere"})])
    question, tail, refused, cli_long, cli_padded, cli_plain = (a[0] for a in answers[1:])
    assert question["query"] == "What did we file about the palace?"
    assert question["query_sanitized"] is True
    assert question["sanitizer"]["method"] == "question_extraction"
    assert tail["sanitizer"]["method"] == "tail_sentence"
    assert refused["error"].startswith("Media and code task search") and refused["sanitizer"]
    unchanged = {"error": "cli-compatible search requires an unchanged query"}
    assert cli_long == cli_padded == unchanged
    assert "No results found for: \"the palace\"" in cli_plain["cli_output"]
