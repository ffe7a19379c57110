"""The second generator's operators (mutation/author_ops.py): each writes the mistake it names,
spares what is never evaluated, and lists the same mutants every time."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from mutation.anchors import Anchor, anchor_of, resolve
from mutation.author import sample
from mutation.author_ops import OPERATORS, check, generate

BRIDGE = Path(__file__).resolve().parents[2] / "reference" / "palace_bridge"

SNIPPET = '''"""Module docstring, never mutated."""
from __future__ import annotations


def feed(host: str | None, window_ms: int = 600, *, quiet: bool = False) -> dict[str, str]:
    """Docstring, never mutated."""
    argv = ["helper", "--prepare"]
    headers = {"Accept": "application/json", "MCP-Session-Id": "abc"}
    if host and window_ms < 10:
        raise ValueError("bad")
    host.exec(argv, timeout_ms=window_ms, env=headers)
    count = 0
    count += 1
    if kind in ("a", "b"):
        pass
    return headers


async def run(client):
    await client.close()
'''


def _mutated(operator: str) -> list[str]:
    return [m.apply(SNIPPET) for m in generate("x.py", SNIPPET)
            if m.operator.split("#")[0] == operator]


def test_every_operator_writes_its_mistake() -> None:
    assert any('["--prepare", "helper"]' in m for m in _mutated("SwapItems"))
    assert any('{"MCP-Session-Id": "abc"}' in m for m in _mutated("DropKey"))
    assert any("host.exec(argv, env=headers)" in m for m in _mutated("DropKeyword"))
    assert any("host.exec(argv, timeout_ms=headers, env=window_ms)" in m
               for m in _mutated("SwapArgs"))
    assert any("'MCP-Ses'" in m for m in _mutated("CutString"))
    assert any("'accept'" in m for m in _mutated("AlterString"))
    assert any("window_ms: int = 1200" in m for m in _mutated("ChangeDefault"))
    assert any("quiet: bool = True" in m for m in _mutated("ChangeDefault"))
    assert any("    pass\n    count = 0" in m for m in _mutated("DeleteStatement"))
    assert any("if not (host) and window_ms < 10" in m for m in _mutated("InvertGate"))
    assert any("window_ms <= 10" in m for m in _mutated("OffByOne"))
    assert any("window_ms < 11" in m for m in _mutated("OffByOne"))
    assert any("count += 2" in m for m in _mutated("OffByOne"))
    assert any("\n    client.close()" in m for m in _mutated("DropAwait"))
    assert any("        pass\n    host.exec" in m for m in _mutated("SwallowRaise"))
    assert {m.operator.split("#")[0] for m in generate("x.py", SNIPPET)} == set(OPERATORS)


def test_docstrings_annotations_and_unordered_sequences_are_spared() -> None:
    for mutant in generate("x.py", SNIPPET):
        mutated = mutant.apply(SNIPPET)
        assert '"""Module docstring, never mutated."""' in mutated
        assert '"""Docstring, never mutated."""' in mutated
        assert "-> dict[str, str]" in mutated and "host: str | None" in mutated
        assert "(\"b\", \"a\")" not in mutated, mutant  # membership: order cannot matter


def test_the_list_is_deterministic_and_keys_unique() -> None:
    first = generate("x.py", SNIPPET)
    assert first == generate("x.py", SNIPPET)
    assert len({m.key for m in first}) == len(first)


def test_sample_grows_without_changing_what_it_chose() -> None:
    keys = [f"m.py:{n}:0:SwapArgs" for n in range(50)]
    small, large = sample(keys, 5, 27), sample(keys, 20, 27)
    assert large[:5] == small and len(set(large)) == 20
    assert sample(list(reversed(keys)), 5, 27) == small


@pytest.mark.parametrize("module", sorted(json.loads(
    (Path(__file__).resolve().parents[2] / "mutation" / "modules.json").read_text())["modules"]))
def test_every_bridge_mutant_parses_changes_and_has_a_resolving_anchor(module: str) -> None:
    source = (BRIDGE / module).read_text(encoding="utf-8")
    mutants = generate(module, source)
    assert mutants, f"{module}: no mutant"
    assert [why for _, why in check(mutants, source) if why] == []
    anchors = set()
    for mutant in mutants:
        ast.parse(mutant.apply(source))
        anchor = anchor_of(module, source, mutant.operator, mutant.start, mutant.end)
        assert resolve(Anchor.parse(str(anchor)), source) == mutant.start
        anchors.add(str(anchor))
    assert len(anchors) == len(mutants)  # one name per mutant


def test_the_checked_in_triage_resolves_in_the_checkout() -> None:
    """Every entry of mutation/triage_author.json names a current mutant's place, a known
    scenario or behaviour, and a reason (what a run checks before it starts)."""
    from mutation.author import TRIAGE_PATH
    from mutation.module_map import BRIDGE_DIR, load_catalogue_facts, shipped_scenario_ids
    from mutation.report import REPO_ROOT, load_triage

    known, _ = load_catalogue_facts()
    verdicts = load_triage(TRIAGE_PATH, known=known, scenarios=shipped_scenario_ids(),
                           tests_root=REPO_ROOT, bridge_dir=BRIDGE_DIR)
    assert verdicts
    operators = {Anchor.parse(anchor).operator.split("#")[0] for anchor in verdicts}
    assert operators <= set(OPERATORS)
