"""The remote session rules: headers, 404 -> renew + one retry, 401, 5xx, keep-alive 404."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from palace_bridge.connect import UNAVAILABLE_LINE, ConnectRetries
from palace_bridge.session import SESSION_HEADER, VERSION_HEADER, HttpSession, Verdict


def opened(session_id: str | None = "s-1", version: str = "2025-11-25") -> HttpSession:
    session = HttpSession()
    session.begin_initialize()
    session.on_initialized(session_id, version)
    return session


def test_no_session_headers_on_initialize_and_both_after():
    session = HttpSession()
    assert session.headers("initialize") == {}
    session.on_initialized("abc", "2025-06-18")
    assert session.headers("initialize") == {}, "never on initialize, even with a session"
    assert session.headers("tools/call") == {SESSION_HEADER: "abc", VERSION_HEADER: "2025-06-18"}
    assert session.headers("notifications/initialized")[SESSION_HEADER] == "abc"
    assert session.sent("initialize").session_id is None


def test_stateless_server_gets_only_the_version_header():
    session = opened(None)
    assert session.headers("ping") == {VERSION_HEADER: "2025-11-25"}
    assert session.session_id is None and not session.needs_init


def test_404_with_a_session_renews_and_retries_once_then_fails():
    session = opened("s-1")
    first = session.sent("tools/call")
    assert session.judge(404, first, attempt=0) is Verdict.RENEW_AND_RETRY
    assert session.session_id is None and session.needs_init
    session.begin_initialize()
    session.on_initialized("s-2", "2025-11-25")
    retry = session.sent("tools/call")
    assert retry.session_id == "s-2"
    assert session.judge(404, retry, attempt=1) is Verdict.SESSION_LOST
    assert session.needs_init, "the next call starts a new session; this one does not loop"


def test_404_without_a_session_is_an_http_error_not_a_session_loss():
    session = opened(None)
    assert session.judge(404, session.sent("tools/call"), 0) is Verdict.HTTP_ERROR
    assert not session.needs_init


def test_404_for_a_session_someone_already_replaced_retries_on_the_current_one():
    session = opened("s-1")
    stale = session.sent("tools/call")
    other = session.sent("tools/call")
    assert session.judge(404, other, 0) is Verdict.RENEW_AND_RETRY
    session.on_initialized("s-2", "2025-11-25")
    assert session.judge(404, stale, 0) is Verdict.RETRY_ON_CURRENT
    assert session.session_id == "s-2", "a late 404 must not drop the new session"


def test_401_is_auth_and_never_a_renewal():
    session = opened("s-1")
    assert session.judge(401, session.sent("tools/call"), 0) is Verdict.AUTH
    assert session.session_id == "s-1" and not session.needs_init


def test_5xx_fails_the_request_and_keeps_the_session():
    session = opened("s-1")
    for status in (500, 502, 503, 400, 403, 405):
        assert session.judge(status, session.sent("tools/call"), 0) is Verdict.HTTP_ERROR
    assert session.session_id == "s-1" and not session.needs_init


def test_keepalive_404_marks_the_session_for_replacement():
    session = opened("s-1")
    sent = session.sent("ping")
    assert session.on_ping_not_found(sent)
    assert session.needs_init and session.session_id is None
    assert not session.on_ping_not_found(sent), "only once per session"


def test_generation_counts_sessions():
    session = opened("a")
    session.on_initialized("b", "2025-11-25")
    assert session.generation == 2


@settings(max_examples=250, deadline=None)
@given(statuses=st.lists(st.sampled_from([200, 202, 401, 404, 500, 503]), min_size=1,
                         max_size=6),
       stateful=st.booleans())
def test_any_status_sequence_gives_at_most_one_retry_and_one_renewal_per_call(statuses,
                                                                              stateful):
    """Simulate the engine's call loop over scripted statuses: no loops, ever."""
    session = opened("s-0" if stateful else None)
    answers = iter(statuses)
    posts = renewals = 0
    attempt = 0
    while True:
        if session.needs_init:
            renewals += 1
            session.begin_initialize()
            session.on_initialized(f"s-{renewals}" if stateful else None, "2025-11-25")
        sent = session.sent("tools/call")
        status = next(answers, 200)
        posts += 1
        verdict = session.judge(status, sent, attempt)
        if verdict in (Verdict.RENEW_AND_RETRY, Verdict.RETRY_ON_CURRENT):
            attempt += 1
            continue
        break
    assert posts <= 2 and renewals <= 1
    if status in (500, 503, 401):
        assert posts == 1 or statuses[0] == 404, "5xx and 401 are never replayed"
    if not stateful:
        assert posts == 1, "without a session id a 404 is just an error"


def test_connect_retries_back_off_then_give_up():
    retries = ConnectRetries(retries=2, backoff_ms=250)
    assert retries.on_failure("refused") == 250
    assert retries.on_failure("refused") == 500
    assert retries.on_failure("401") is None
    assert retries.attempts == 3 and retries.last_failure == "401"
    assert ConnectRetries(0, 250).on_failure("x") is None
    assert UNAVAILABLE_LINE == ("mempalace-mcp unavailable after retries; "
                                "continuing without palace tools")
