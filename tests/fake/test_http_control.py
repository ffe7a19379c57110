"""The ``/_fake/`` control API: arm and clear faults, swap the token, read the journal, reset."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from .http_support import Fake, call, ping, start_fake


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fake]:
    fake = start_fake(tmp_path_factory.mktemp("http-control"))
    yield fake
    fake.stop()


@pytest.fixture
def fake(server: Fake) -> Fake:
    assert server.control("POST", "reset").status_code == 200
    server.control("POST", "token", {"token": None})
    return server


def test_arming_one_fault_or_a_list_returns_their_ids(fake: Fake) -> None:
    one = fake.control("POST", "faults", {"id": "mine", "action": "accept_202",
                                          "on": {"method": "ping"}})
    assert one.json() == {"armed": ["mine"]}
    many = fake.control("POST", "faults", [{"action": "delay", "ms": 1},
                                           {"action": "stall", "on": {"method": "tools/list"}}])
    assert many.status_code == 200
    assert len(many.json()["armed"]) == 2 and "mine" not in many.json()["armed"]
    typo = fake.control("POST", "faults", {"action": "stall", "on": {"method": "tool/call"}})
    assert typo.status_code == 400 and "did you mean 'tools/call'?" in typo.text
    plan = fake.control("POST", "faults", {"faults": [{"id": "p1", "action": "delay", "ms": 1}]})
    assert plan.json() == {"armed": ["p1"]}


@pytest.mark.parametrize(("body", "needle"), [
    ({"action": "explode"}, "unknown action 'explode'"),
    ({"action": "stall", "colour": "red"}, "takes ['ms']"),
    ({"action": "http_status"}, "http_status needs 'status'"),
    ({"action": "startup_fail", "on": {"method": "$startup"}}, "$startup"),
    ({"action": "stall", "on": {"method": "ping", "transport": "stdio"}}, "stdio"),
    ("not-a-fault", "expected an object"),
])
def test_a_bad_fault_is_a_400_with_one_line(fake: Fake, body: object, needle: str) -> None:
    answer = fake.control("POST", "faults", body)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert needle in error and "\n" not in error
    assert fake.post(ping()).status_code == 200  # nothing half-armed


def test_a_bad_fault_in_a_list_arms_none_of_them(fake: Fake) -> None:
    answer = fake.control("POST", "faults", [{"action": "accept_202", "on": {"method": "ping"}},
                                             {"action": "nope"}])
    assert answer.status_code == 400
    assert fake.post(ping()).status_code == 200


def test_a_duplicate_id_is_refused(fake: Fake) -> None:
    fake.arm({"id": "twin", "action": "delay", "ms": 1})
    answer = fake.control("POST", "faults", {"id": "twin", "action": "delay", "ms": 1})
    assert answer.status_code == 400 and "already armed" in answer.json()["error"]


def test_clearing_disarms_everything(fake: Fake) -> None:
    fake.arm({"action": "accept_202", "on": {"method": "ping"}, "times": None})
    assert fake.post(ping()).status_code == 202
    assert fake.control("DELETE", "faults").json() == {"cleared": 1}
    assert fake.post(ping()).status_code == 200


def test_the_token_can_be_set_and_removed(fake: Fake) -> None:
    assert fake.control("POST", "token", {"token": "tok-1"}).status_code == 200
    assert fake.post(ping()).status_code == 401
    assert fake.post(ping(), headers={"Authorization": "Bearer tok-1"}).status_code == 200
    assert fake.control("GET", "journal").status_code == 200  # control needs no token
    assert fake.control("POST", "token", {"token": None}).status_code == 200
    assert fake.post(ping()).status_code == 200
    assert fake.control("POST", "token", {"tok": 1}).status_code == 400
    assert "tok-1" not in fake.journal_path.read_text()


def test_the_journal_endpoint_returns_the_records_and_control_calls_are_their_own_kind(
        fake: Fake) -> None:
    fake.post(ping("via-http"))
    records = fake.control("GET", "journal").json()
    assert isinstance(records, list)
    assert any(r["kind"] == "recv" and r.get("id") == "via-http" for r in records)
    assert records == fake.records()[: len(records)]
    controls = [r for r in fake.records() if r["kind"] == "control"]
    last = controls[-1]
    assert (last["method"], last["path"], last["status"]) == ("GET", "/_fake/journal", 200)
    assert not any(r["kind"] == "http_request" and r["path"].startswith("/_fake/")
                   for r in fake.records())


def test_reset_empties_the_palace_and_disarms_faults(fake: Fake) -> None:
    write = call("mempalace_diary_write", {"agent_name": "ctl", "entry": "remember me"})
    assert fake.post(write).status_code == 200
    read = call("mempalace_diary_read", {"agent_name": "ctl"})
    assert "remember me" in fake.post(read).text
    fake.arm({"action": "accept_202", "on": {"method": "ping"}})
    assert fake.control("POST", "reset").json()["reset"] is True
    assert "remember me" not in fake.post(read).text
    assert fake.post(ping()).status_code == 200


def test_unknown_control_paths_and_methods(fake: Fake) -> None:
    assert fake.control("GET", "nothing").status_code == 404
    assert fake.control("PUT", "faults").status_code == 405
    bad = fake.http.post(f"{fake.base}/_fake/faults", content=b"{nope")
    assert bad.status_code == 400 and "not JSON" in bad.json()["error"]


def test_control_still_checks_host_and_origin(fake: Fake) -> None:
    url = f"{fake.base}/_fake/journal"
    assert fake.http.get(url, headers={"Host": "evil.example"}).status_code == 403
    assert fake.http.get(url, headers={"Origin": "https://evil.example"}).status_code == 403


def test_no_control_turns_the_api_off(tmp_path: Path) -> None:
    fake = start_fake(tmp_path, "--no-control", "--token", "t")
    try:
        assert fake.http.get(f"{fake.base}/_fake/journal").status_code == 404
        assert fake.http.post(f"{fake.base}/_fake/reset").status_code == 401
        auth = {"Authorization": "Bearer t"}
        assert fake.http.post(f"{fake.base}/_fake/reset", headers=auth).status_code == 404
        assert json.loads(fake.post(ping(), headers=auth).content)["result"] == {}
    finally:
        fake.stop()
