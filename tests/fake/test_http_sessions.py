"""FAKE-07: ``--sessions`` makes the fake a stateful, SDK-style streamable HTTP server."""

from __future__ import annotations

import concurrent.futures
import re
import time
from collections.abc import Iterator

import httpx
import pytest

from .http_support import INITIALIZE, Fake, ping, start_fake

SESSION_ID = re.compile(r"[\x21-\x7e]{1,128}")
MISSING = {"jsonrpc": "2.0", "id": None,
           "error": {"code": -32600, "message": "Bad Request: Missing session ID"}}
UNKNOWN = {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "Session not found"}}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fake]:
    fake = start_fake(tmp_path_factory.mktemp("http-sessions"), "--sessions")
    yield fake
    fake.stop()


@pytest.fixture
def fake(server: Fake) -> Fake:
    assert server.control("POST", "reset").status_code == 200
    return server


def open_session(fake: Fake) -> str:
    answer = fake.post(INITIALIZE)
    assert answer.status_code == 200
    return answer.headers["mcp-session-id"]


def with_id(session_id: str) -> dict[str, str]:
    return {"Mcp-Session-Id": session_id}


def test_initialize_without_an_id_opens_a_session(fake: Fake) -> None:
    mark = fake.mark()
    answer = fake.post(INITIALIZE)
    assert answer.status_code == 200
    session_id = answer.headers["mcp-session-id"]
    assert SESSION_ID.fullmatch(session_id)
    assert answer.json()["result"]["serverInfo"]["name"] == "mempalace"
    [opened] = fake.records("session", mark)
    assert (opened["event"], opened["session"]) == ("opened", session_id)
    assert open_session(fake) != session_id


def test_everything_else_needs_the_id(fake: Fake) -> None:
    mark = fake.mark()
    for message in (ping(), {"jsonrpc": "2.0", "method": "notifications/initialized"}):
        answer = fake.post(message)
        assert answer.status_code == 400
        assert answer.json() == MISSING
    assert fake.records("recv", mark) == []  # refused before the palace saw them


def test_an_unknown_id_is_404(fake: Fake) -> None:
    answer = fake.post(ping(), headers=with_id("deadbeef-not-a-session"))
    assert answer.status_code == 404
    assert answer.json() == UNKNOWN
    initialize = fake.post(INITIALIZE, headers=with_id("deadbeef-not-a-session"))
    assert initialize.status_code == 404


def test_a_live_session_works_and_echoes_its_id(fake: Fake) -> None:
    session_id = open_session(fake)
    answer = fake.post(ping(2), headers=with_id(session_id))
    assert answer.status_code == 200
    assert answer.headers["mcp-session-id"] == session_id
    notified = fake.post({"jsonrpc": "2.0", "method": "notifications/initialized"},
                         headers=with_id(session_id))
    assert notified.status_code == 202


def test_forgetting_through_the_control_api_gives_404(fake: Fake) -> None:
    keep, drop = open_session(fake), open_session(fake)
    forgotten = fake.control("POST", "sessions/forget", {"id": drop})
    assert forgotten.json() == {"forgotten": [drop]}
    assert fake.post(ping(), headers=with_id(drop)).status_code == 404
    assert fake.post(ping(), headers=with_id(keep)).status_code == 200
    assert fake.control("POST", "sessions/forget", {"id": drop}).status_code == 404
    assert fake.control("POST", "sessions/forget").json() == {"forgotten": [keep]}
    assert fake.post(ping(), headers=with_id(keep)).status_code == 404


def test_delete_ends_a_session(fake: Fake) -> None:
    session_id = open_session(fake)
    gone = fake.http.delete(fake.url, headers=with_id(session_id))
    assert (gone.status_code, gone.content) == (200, b"")
    assert fake.post(ping(), headers=with_id(session_id)).status_code == 404
    assert fake.http.delete(fake.url, headers=with_id(session_id)).status_code == 404
    assert fake.http.delete(fake.url).status_code == 400


def test_get_with_a_session_is_405_since_there_is_no_standalone_stream(fake: Fake) -> None:
    session_id = open_session(fake)
    answer = fake.http.get(fake.url, headers={**with_id(session_id), "Accept": "text/event-stream"})
    assert answer.status_code == 405
    assert fake.http.get(fake.url).status_code == 400


def test_the_forget_session_fault_kills_the_session_on_its_request(fake: Fake) -> None:
    session_id = open_session(fake)
    fake.arm({"action": "forget_session", "on": {"method": "tools/list"}})
    assert fake.post(ping(1), headers=with_id(session_id)).status_code == 200
    lost = fake.post({"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                     headers=with_id(session_id))
    assert (lost.status_code, lost.json()) == (404, UNKNOWN)
    assert fake.post(ping(3), headers=with_id(session_id)).status_code == 404
    fresh = open_session(fake)
    assert fake.post(ping(4), headers=with_id(fresh)).status_code == 200
    assert [r["event"] for r in fake.records("session") if r["session"] == session_id] == [
        "opened", "forgotten"]


def test_a_held_forget_session_keeps_the_session_alive_until_it_answers(fake: Fake) -> None:
    """``ms``: the request waits on a live session (others still get through), then the session
    dies and the held request gets its 404: two requests in flight when a session is lost."""
    session_id = open_session(fake)
    fake.arm({"action": "forget_session", "on": {"method": "tools/list"}, "ms": 1500})
    mark = fake.mark()
    with concurrent.futures.ThreadPoolExecutor(1) as pool, httpx.Client(timeout=10) as other:
        held = pool.submit(fake.post, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                           headers=with_id(session_id))
        while not any(r.get("method") == "tools/list" for r in fake.records("recv", mark)):
            assert not held.done(), "the held request was answered before its hold"
            time.sleep(0.02)
        alive = other.post(fake.url, json=ping(3), headers={
            **with_id(session_id), "Accept": "application/json, text/event-stream"})
        assert alive.status_code == 200  # the session is still live while the request is held
        lost = held.result(timeout=10)
    assert (lost.status_code, lost.json()) == (404, UNKNOWN)
    assert fake.post(ping(4), headers=with_id(session_id)).status_code == 404
    kinds = [(r["kind"], r.get("method") or r.get("event") or r.get("status"))
             for r in fake.records(None, mark) if r["kind"] in ("recv", "session")]
    assert kinds.index(("recv", "ping")) < kinds.index(("session", "forgotten"))


def test_reset_forgets_every_session(fake: Fake) -> None:
    session_id = open_session(fake)
    assert session_id in fake.control("POST", "reset").json()["forgotten"]
    assert fake.post(ping(), headers=with_id(session_id)).status_code == 404
