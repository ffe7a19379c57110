"""Every declared rule masks exactly what it says, and a bad rules file is one line."""

from __future__ import annotations

import pytest

from palace_conformance.fidelity.normalise import RulesError, load_rules, normalise, parse_rules

RULES = load_rules()


def _masked(value: object, world: dict[str, str] | None = None) -> tuple[object, set[str]]:
    return normalise(value, RULES, world)


def test_every_rule_says_what_it_masks_and_why() -> None:
    assert len(RULES) >= 10
    assert all(rule.masks and rule.why for rule in RULES)


@pytest.mark.parametrize(("text", "expected", "rule"), [
    ("is held by PID 4242 (x)", "is held by PID <PID> (x)", "pids"),
    ("http://127.0.0.1:34701/mcp", "http://127.0.0.1:<PORT>/mcp", "ports"),
    ("2026-12-02T00:35:53.957440", "<TIME>", "timestamps"),
    ("2026-12-02T00:37:31Z", "<TIME>", "timestamps"),
    ("diary_wing_probe-agent_20261202_003553957440_59668c7a9825",
     "diary_wing_probe-agent_<STAMP>_<HASH>", "diary-entry-ids"),
    ("drawer_probe_notes_4a989d15e619d112e9029839", "drawer_probe_notes_<HASH>", "drawer-ids"),
    ("t_probe_ran_on_loser_cff4a0b46367", "t_probe_ran_on_loser_<HASH>", "triple-ids"),
    ("evt_20261202T003731_1dc3769a1845", "evt_<STAMP>_<HASH>", "event-ids"),
    ("art_20261202T003756_3a922652d981", "art_<STAMP>_<HASH>", "event-ids"),
    ("rep_d2e605d37d30ddf3afe1ff1a33703dc6", "rep_<REPLICA>", "replica-ids"),
    ("Open MemPalace task task_compare_48da26f8 as", "Open MemPalace task task_compare_<HASH> as",
     "task-ids"),
])
def test_pattern_rules(text: str, expected: str, rule: str) -> None:
    assert _masked(text) == (expected, {rule})


@pytest.mark.parametrize("text", [
    "2026-12-02",  # a date alone is compared
    "drawer_nope", "evt_nope", "t_short_abc",  # ids a probe chose are compared
    "PID file", "port 80",
])
def test_pattern_rules_leave_other_text_alone(text: str) -> None:
    assert _masked(text) == (text, set())


def test_key_rules_mask_values_not_structure() -> None:
    value = {"hits": [{"distance": 0.35, "text": "a", "hlc": "1-0-rep"}], "count": 1}
    assert _masked(value) == ({"hits": [{"distance": "<SCORE>", "text": "a",
                                         "hlc": "<HLC>"}], "count": 1},
                              {"similarity", "hybrid-clocks"})


def test_search_results_keep_their_count_and_keys_not_their_rows() -> None:
    one = {"results": [{"distance": 0.1, "text": "a", "wing": "w"},
                       {"distance": 0.2, "text": "b", "wing": "w"}], "total_before_filter": 12}
    other = {"results": [{"distance": 0.3, "text": "c", "wing": "v"},
                         {"distance": 0.4, "text": "d", "wing": "w"}], "total_before_filter": 21}
    masked, fired = _masked(one)
    assert masked == _masked(other)[0]
    assert fired >= {"search-pool-under-another-ranker", "candidate-pool-size"}
    shorter = {**other, "results": other["results"][:1]}
    assert _masked(shorter)[0] != masked  # how many come back is still compared
    extra = {**one, "results": [{**one["results"][0], "source_file": "x"}, one["results"][1]]}
    assert _masked(extra)[0] != masked  # and each result's keys
    assert _masked({"results": [{"text": "a"}]})[0] == {"results": [{"text": "a"}]}
    assert _masked({"distance": None}) == ({"distance": None}, set())
    assert _masked({"distance": [1]})[0] == {"distance": [1]}


def test_world_paths_longest_first() -> None:
    world = {"<WORLD>": "/tmp/w", "<PALACE>": "/tmp/w/palace"}
    assert _masked("at /tmp/w/palace/chroma.sqlite3 in /tmp/w", world) == (
        "at <PALACE>/chroma.sqlite3 in <WORLD>", {"world-paths"})


@pytest.mark.parametrize(("raw", "problem"), [
    ({"id": "x", "kind": "guess", "masks": "m", "why": "w"}, "kind must be one of"),
    ({"id": "x", "kind": "pattern", "masks": "m"}, "says what it masks and why"),
    ({"id": "x", "kind": "pattern", "pattern": "(", "masks": "m", "why": "w"}, "bad or missing"),
    ({"id": "x", "kind": "keys", "masks": "m", "why": "w"}, "names its 'keys'"),
    ({"id": "x", "kind": "ties-at-cut", "keys": ["m"], "item_keys": ["s"],
      "identity_keys": ["id"], "masks": "m", "why": "w"}, "a whole 'cut' >= 1"),
    ({"id": "x", "kind": "ties-at-cut", "keys": ["m"], "item_keys": ["s", "t"],
      "identity_keys": ["id"], "cut": 5, "masks": "m", "why": "w"}, "names one score"),
    ({"id": "x", "kind": "ties-at-cut", "keys": ["m"], "item_keys": ["s"], "cut": True,
      "identity_keys": ["id"], "masks": "m", "why": "w"}, "a whole 'cut' >= 1"),
])
def test_a_bad_rule_is_one_line(raw: dict[str, object], problem: str) -> None:
    with pytest.raises(RulesError) as exc:
        parse_rules({"rules": [raw]})
    assert problem in str(exc.value) and "\n" not in str(exc.value)


def test_ids_used_as_object_keys_are_masked_like_values() -> None:
    """mesh_peers keys its profiles and version vector by replica id."""
    replica = "rep_" + "0123456789abcdef" * 2
    masked, fired = _masked({"version_vector": {replica: 1},
                             "origin_profiles": {replica: {"roles": ["compute"]}}})
    assert replica not in str(masked)
    assert masked == _masked({"version_vector": {"rep_" + "f" * 32: 1},
                              "origin_profiles": {"rep_" + "f" * 32: {"roles": ["compute"]}}})[0]
    assert "replica-ids" in fired


def test_the_prose_and_host_keys_are_the_ones_the_truth_table_masks() -> None:
    """fake catalog's truth table and fidelity mask the same prose and host keys (two lists, one
    decision: the fake abridges 3.11's prose and embeds with its own model)."""
    from palace_conformance.fidelity.truth_table import MASKED_KEYS

    [rule] = [r for r in RULES if r.id == "prose-and-embedder"]
    prose_and_host = {key for key, mask in MASKED_KEYS.items() if mask != "<SCORE>"}
    assert set(rule.keys) == prose_and_host


def test_a_cli_search_printout_keeps_its_header_and_count_not_its_hits() -> None:
    from palace_conformance.fake.palace import cli_printout

    def hit(wing: str, text: str, score: float) -> dict[str, object]:
        return {"wing": wing, "room": "r", "source_file": "?", "similarity": score,
                "bm25_score": score * 2, "text": text}

    args = {"wing": "w"}
    one = cli_printout("q", args, [hit("w", "a", 0.5), hit("w", "b\nc", 0.25)])
    other = cli_printout("q", args, [hit("v", "d", 0.9), hit("w", "e", 0.1)])
    masked, fired = _masked(one)
    assert masked == _masked(other)[0] and fired == {"cli-search-hits-under-another-embedder"}
    assert isinstance(masked, str) and "[1] <HIT>" in masked and "[2] <HIT>" in masked
    assert 'Results for: "q"\n  Wing: w' in masked
    assert _masked(cli_printout("q", args, [hit("w", "a", 0.5)]))[0] != masked  # the count
    assert _masked(cli_printout("p", args, [hit("w", "a", 0.5), hit("w", "b", 0.5)]))[0] != \
        masked  # the header


def _match(drawer: str, room: str, chunk: int, similarity: float) -> dict[str, object]:
    return {"id": f"drawer_w_{room}_{drawer}_chunk_{chunk:06d}", "wing": "w", "room": room,
            "similarity": similarity, "content": f"text of chunk {chunk}"}


def test_which_equal_rows_a_full_duplicate_answer_names_at_its_cut_is_the_index_s() -> None:
    """Seed 30's point: the same 15,000-character text filed by add_drawer (room "c") and by
    checkpoint (room "notes"); the fifth nearest row is chunk 13 of either drawer."""
    above = [_match("a1", "c", 0, 1.0), _match("b2", "notes", 0, 1.0),
             _match("a1", "c", 16, 0.9996), _match("b2", "notes", 16, 0.9996)]
    fake = {"is_duplicate": True, "matches": [*above, _match("a1", "c", 13, 0.9995)]}
    real = {"is_duplicate": True, "matches": [*above, _match("b2", "notes", 13, 0.9995)]}
    masked, fired = _masked(fake)
    assert masked == _masked(real)[0]
    assert "duplicates-tied-at-the-cut" in fired
    tied = [m for m in masked["matches"] if m["id"] == "<TIED_AT_CUT>"]  # type: ignore[index]
    assert len(tied) == 1 and tied[0]["content"] == "text of chunk 13"
    # the rows above the cut are still named, and the tied row's text is still compared
    swapped_above = {**real, "matches": [_match("b2", "c", 0, 1.0), *real["matches"][1:]]}
    assert _masked(swapped_above)[0] != masked
    other_text = {**real, "matches": [*above, {**_match("b2", "notes", 13, 0.9995),
                                              "content": "text of chunk 12"}]}
    assert _masked(other_text)[0] != masked


def test_a_duplicate_answer_short_of_the_cut_names_every_row() -> None:
    """Under five matches the threshold made the cut, and equal rows pass it together."""
    one = {"matches": [_match("a1", "c", 0, 1.0), _match("a1", "c", 13, 0.9995)]}
    other = {"matches": [_match("a1", "c", 0, 1.0), _match("b2", "notes", 13, 0.9995)]}
    assert _masked(one)[0] != _masked(other)[0]
    assert "duplicates-tied-at-the-cut" not in _masked(one)[1]
    # a full list without numeric scores is left as it is
    unscored = {"matches": [{"id": str(i), "similarity": None} for i in range(5)]}
    assert "<TIED_AT_CUT>" not in str(_masked(unscored)[0])
