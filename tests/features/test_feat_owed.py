"""MAIL-02..04: the owed-ness derivation, by example and against an independently written model."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from palace_bridge.features.mailbox import owed

ME = "pi@tor-ms22"
OTHERS = ["pi@laptop", "opencode@tor-ms22", "claude@server"]
STATUSES = ["open", "claimed", "ready", "applied", "superseded", "failed", "blocked", None]


def ev(id_: str, seq: int, *, frm: str = "pi@laptop", to: str | None = ME,
       status: str | None = "open", corr: str | None = None, ack_of: str | None = None) -> dict:
    return {"id": id_, "seq": seq, "from_agent": frm, "to_agent": to, "status": status,
            "correlation_id": corr, "metadata": {"ack_of": ack_of} if ack_of else {}}


def ids(events: list[dict]) -> list[str]:
    return [e["id"] for e in events]


# --- examples ---------------------------------------------------------------------------------


def test_an_open_directed_event_is_owed() -> None:
    ask = ev("a", 1)
    assert ids(owed(ME, [ask], [])) == ["a"]


def test_a_terminal_ack_of_mine_answers_it() -> None:
    ask = ev("a", 1)
    ack = ev("r", 2, frm=ME, to="pi@laptop", status="applied", ack_of="a")
    assert owed(ME, [ask], [ack]) == []


def test_a_shared_correlation_answers_it() -> None:
    ask = ev("a", 1, corr="task-9")
    reply = ev("r", 5, frm=ME, to="pi@laptop", status="failed", corr="task-9")
    assert owed(ME, [ask], [reply]) == []


def test_the_reply_must_come_later_seq_is_load_bearing() -> None:
    # one terminal reply must not suppress every later ask on that correlation forever
    old_reply = ev("r", 5, frm=ME, to="pi@laptop", status="applied", corr="task-9")
    later_ask = ev("a2", 7, corr="task-9")
    same_seq = ev("a3", 5, corr="task-9")
    assert ids(owed(ME, [later_ask, same_seq], [old_reply])) == ["a3", "a2"]


def test_a_non_terminal_reply_does_not_close() -> None:
    ask = ev("a", 1, corr="c")
    for status in ("open", "claimed", "ready", None):
        reply = ev("r", 2, frm=ME, to="pi@laptop", status=status, corr="c", ack_of="a")
        assert ids(owed(ME, [ask], [reply])) == ["a"], status


def test_a_reply_from_someone_else_does_not_close() -> None:
    ask = ev("a", 1, corr="c")
    reply = ev("r", 2, frm="pi@laptop", status="applied", corr="c", ack_of="a")
    assert ids(owed(ME, [ask], [reply])) == ["a"]


def test_broadcasts_are_never_owed() -> None:
    assert owed(ME, [ev("b", 1, to="*")], []) == []


def test_fields_are_checked_not_the_query() -> None:
    # a server may return more than asked (3.11's to_agent filter matches '*' too)
    noise = [ev("x1", 1, to="pi@laptop"), ev("x2", 2, status="applied"), ev("b", 3, to="*")]
    assert owed(ME, noise, noise) == []


def test_a_null_correlation_joins_nothing() -> None:
    ask = ev("a", 1, corr=None)
    reply = ev("r", 2, frm=ME, status="applied", corr=None)
    assert ids(owed(ME, [ask], [reply])) == ["a"]


def test_result_is_ordered_by_seq_without_duplicates() -> None:
    events = [ev("c", 30), ev("a", 10), ev("b", 20)]
    assert ids(owed(ME, events, events)) == ["a", "b", "c"]


# --- property: the derivation equals a small model on random logs ----------------------------

TERMINAL_STATUSES = {"applied", "superseded", "failed", "blocked"}


def model_owed(me: str, log: list[dict[str, Any]]) -> list[str]:
    """Written from the rule text alone: pairs (reply closes ask), then the open asks left."""
    closes: set[str] = set()
    for reply in log:
        if reply["from_agent"] != me or reply["status"] not in TERMINAL_STATUSES:
            continue
        meta = reply.get("metadata")
        acked = meta.get("ack_of") if isinstance(meta, dict) else None
        for ask in log:
            if not reply["seq"] > ask["seq"]:
                continue
            by_ack = acked is not None and acked == ask["id"]
            by_corr = ask["correlation_id"] not in (None, "") and \
                reply["correlation_id"] == ask["correlation_id"]
            if by_ack or by_corr:
                closes.add(ask["id"])
    asks = [e for e in log if e["to_agent"] == me and e["status"] == "open"]
    left = [e for e in asks if e["id"] not in closes]
    left.sort(key=lambda e: (e["seq"], e["id"]))
    return [e["id"] for e in left]


_raw_event = st.fixed_dictionaries({
    # small pools, so ties, joins and near misses are common rather than rare
    "seq": st.integers(1, 6),  # gaps, ties and disorder relative to list order
    "from_agent": st.sampled_from([ME, ME, ME, *OTHERS]),
    "to_agent": st.sampled_from([ME, ME, ME, "*", None, OTHERS[0]]),
    "status": st.sampled_from(["open", "open", *STATUSES]),
    "correlation_id": st.sampled_from([None, "", "c1", "c1", "c2"]),
    "meta": st.sampled_from(["none", "empty", "bad", 0, 1, 2, 3, 4, 99]),  # int: ack_of index
})


def _build_log(raw: list[dict[str, Any]]) -> list[dict[str, Any]]:
    log = []
    for index, fields in enumerate(raw):
        event = {k: v for k, v in fields.items() if k != "meta"}
        event["id"] = f"evt_{index}"
        meta = fields["meta"]
        if isinstance(meta, int):
            event["metadata"] = {"ack_of": f"evt_{meta}"}  # may point nowhere (evt_99)
        elif meta == "empty":
            event["metadata"] = {}
        elif meta == "bad":
            event["metadata"] = "not-a-dict"
        log.append(event)
    return log


event_logs = st.lists(_raw_event, max_size=14).map(_build_log)


def server_inbox(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What 3.11 answers to {to_agent: me, status: open}: broadcasts included."""
    return [e for e in log if e["to_agent"] in (ME, "*") and e["status"] == "open"]


def server_mine(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What 3.11 answers to {writer: me}."""
    return [e for e in log if e["from_agent"] == ME]


@settings(max_examples=300, deadline=None)
@given(log=event_logs, seed=st.integers(0, 2**16))
def test_owed_matches_the_model(log: list[dict[str, Any]], seed: int) -> None:
    expected = model_owed(ME, log)
    inbox, mine = server_inbox(log), server_mine(log)
    rng = random.Random(seed)
    rng.shuffle(inbox)
    rng.shuffle(mine)  # list order (asc/desc) must not matter
    assert ids(owed(ME, inbox, mine)) == expected
    # a sloppy server that ignores both filters changes nothing: fields are what count
    assert ids(owed(ME, log, log)) == expected


@settings(max_examples=150, deadline=None)
@given(log=event_logs)
def test_owed_items_are_open_directed_and_unanswered(log: list[dict[str, Any]]) -> None:
    result = owed(ME, server_inbox(log), server_mine(log))
    for item in result:
        assert item["to_agent"] == ME and item["status"] == "open"
    # adding a later terminal ack of mine for each owed item empties the owed set
    top = max((e["seq"] for e in log), default=0)
    acks = [{"id": f"ack_{i}", "seq": top + 1 + i, "from_agent": ME, "to_agent": "x",
             "status": "applied", "correlation_id": None, "metadata": {"ack_of": e["id"]}}
            for i, e in enumerate(result)]
    assert owed(ME, server_inbox(log), server_mine(log) + acks) == []
