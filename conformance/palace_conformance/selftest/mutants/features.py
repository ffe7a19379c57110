"""Mutants of WAKE, FEED, PROV, MAIL, DIARY, KNOB: the harness features and the knobs."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from palace_conformance.selftest.mutants.model import Mutant
from palace_conformance.selftest.mutants.patching import (
    CONFIG,
    FEEDING,
    MAILBOX,
    answers,
    fields_forced,
    mutant,
    never_caught,
    succeeded_on,
)


def _zero_mine_cap_read_as_no_time(original: Any) -> Any:
    """``FeedSettings.from_config`` with MEMPALACE_FEED_MINE_TIMEOUT_MS=0 read as a 1 ms cap."""
    read = original.__func__

    def from_config(cls: Any, config: Any) -> Any:
        settings = read(cls, config)
        if settings.mine_timeout_ms == 0:
            return dataclasses.replace(settings, mine_timeout_ms=1)
        return settings

    return classmethod(from_config)


def _wakeup_rearmed(original: Any) -> Any:
    async def before_agent_start(self: Any) -> Any:
        armed = self.armed
        try:
            return await original(self)
        finally:
            self.armed = armed

    return before_agent_start


def _error_body_counts_as_memory(original: Any) -> Any:
    def failed(result: Any) -> bool:  # only isError and success: false are failures
        if result.is_error:
            return True
        try:
            body = json.loads(result.text)
        except (TypeError, ValueError):
            return False
        return isinstance(body, dict) and body.get("success") is False

    return failed


def _every_reason_fresh(original: Any) -> Any:
    return frozenset(original) | {"resume", "fork", "reload"}




def _window_forgotten(original: Any) -> Any:
    def settled(self: Any) -> Any:
        self.last_fed = None
        return original(self)

    return settled








def _window_slides(original: Any) -> Any:
    def settled(self: Any) -> Any:
        task = original(self)
        if task is None and self.last_fed is not None and self._running() is None:
            self.last_fed = self.clock.now_ms()  # a skipped settle restarts the window
        return task

    return settled


def _mine_source_split_on_every_equals(original: Any) -> Any:
    def mine_source(stdout: str) -> str | None:
        found = None
        for line in stdout.splitlines():
            if line.strip().startswith("MINE_SOURCE="):
                found = line.strip().split("=")[1] or None
        return found

    return mine_source


def _wakeup_rearmed_on_failure(original: Any) -> Any:
    async def before_agent_start(self: Any) -> Any:
        armed = self.armed
        injected = await original(self)
        if injected is None and armed:
            self.armed = True  # a failed wake-up is retried on the next prompt
        return injected

    return before_agent_start


def _own_events_by_list(original: Any) -> Any:
    def owed(me: str, inbox: Any, mine: Any) -> Any:
        mine = list(mine)
        ids = {e.get("id") for e in mine if isinstance(e, dict)}

        def relabel(events: Any) -> list[Any]:  # in the 'mine' answer, so taken as mine
            return [dict(e, from_agent=me) if isinstance(e, dict) and e.get("id") in ids else e
                    for e in events]

        return original(me, relabel(inbox), relabel(mine))

    return owed


def _owed_by_id(original: Any) -> Any:
    def owed(me: str, inbox: Any, mine: Any) -> Any:
        return sorted(original(me, inbox, mine), key=lambda e: str(e.get("id")))

    return owed


def _mailbox_failure_logged(original: Any) -> Any:
    async def fetch(self: Any) -> Any:
        items = await original(self)
        if items is None:
            self.host.stderr("mempalace: mailbox: event_list failed; nothing delivered")
        return items

    return fetch


def _malformed_knob_crashes_load(original: Any) -> Any:
    read = original.__func__

    def from_env(cls: Any, env: Mapping[str, str]) -> Any:
        config = read(cls, env)
        if config.warnings:  # as `int(raw)` unguarded: the first bad value raises at load
            raise ValueError(config.warnings[0])
        return config

    return classmethod(from_env)


def _remote_skip_silent(original: Any) -> Any:
    def _may_feed(self: Any) -> bool:
        self._skip_reported = True
        return bool(original(self))

    return _may_feed


def _feed_mine_unstamped(original: Any) -> Any:
    async def _mine(self: Any, source: str) -> Any:
        saved = self.stamper
        self.stamper = dataclasses.replace(saved, device=None)
        try:
            return await original(self, source)
        finally:
            self.stamper = saved

    return _mine


def _stamper_without_remote_gate(original: Any) -> Any:
    def stamper_for(device: str | None, shared_palace: bool, harness: str = "pi") -> Any:
        return original(device, bool(device), harness)

    return stamper_for




def _diary_tool_renamed(original: Any) -> Any:
    return f"{original}_unstamped"


def _broadcast_owed(original: Any) -> Any:
    def owed(me: str, inbox: Any, mine: Any) -> Any:
        inbox = [dict(e, to_agent=me) if isinstance(e, dict) and e.get("to_agent") == "*" else e
                 for e in inbox]
        return original(me, inbox, mine)

    return owed


def _seq_ignored(original: Any) -> Any:
    def _answers(reply: dict[str, Any], ask: dict[str, Any]) -> bool:
        seq = ask.get("seq")
        if isinstance(seq, int) and isinstance(reply.get("seq"), int):
            reply = dict(reply, seq=seq + 1)  # any reply counts as later
        return bool(original(reply, ask))

    return _answers


def _ack_of_ignored(original: Any) -> Any:
    def _answers(reply: dict[str, Any], ask: dict[str, Any]) -> bool:
        return bool(original(dict(reply, metadata={}), ask))  # only correlation_id joins

    return _answers


def _ack_of_any_event(original: Any) -> Any:
    def _answers(reply: dict[str, Any], ask: dict[str, Any]) -> bool:
        metadata = reply.get("metadata")
        if isinstance(metadata, dict) and metadata.get("ack_of"):  # acks *something*: enough
            reply = dict(reply, metadata=dict(metadata, ack_of=ask.get("id")))
        return bool(original(reply, ask))

    return _answers


def _claimed_is_terminal(original: Any) -> Any:
    return frozenset(original) | {"claimed"}




def _topic_dropped(original: Any) -> Any:
    def diary_prompt(agent_name: str, topic: str | None) -> str:
        return str(original(agent_name, None))

    return diary_prompt


def _default_respawns_three(original: Any) -> Any:
    read = original.__func__

    def from_env(cls: Any, env: Mapping[str, str]) -> Any:
        config = read(cls, env)
        if not (env.get("MEMPALACE_MCP_MAX_RESPAWNS") or "").strip():
            config = dataclasses.replace(config, max_respawns=3)
        return config

    return classmethod(from_env)


#: patches made by the shared makers (patching.py)
_feed_never_running = answers(None)
_always_unset = answers(True)
_poll_every_settle = answers(True)
_refusal_counts_as_fed = succeeded_on("MINED", "NOTHING", "MINE_REFUSED")
_failed_prepare_counts_as_fed = succeeded_on("MINED", "NOTHING", "PREPARE_FAILED")
_timed_out_prepare_counts_as_fed = succeeded_on("MINED", "NOTHING", "PREPARE_TIMEOUT")


MUTANTS: tuple[Mutant, ...] = (
    # WAKE
    mutant("wake-every-turn", "WAKE-02",
       "the wake-up is injected on every prompt of a fresh session",
       ("palace_bridge.features.wakeup:WakeUp.before_agent_start", _wakeup_rearmed)),
    mutant("wake-retried-after-failure", "WAKE-02",
       "a wake-up whose status call failed is re-armed and retried on the next prompt",
       ("palace_bridge.features.wakeup:WakeUp.before_agent_start", _wakeup_rearmed_on_failure)),
    mutant("wake-on-resume", "WAKE-03",
       "resumed, forked and reloaded sessions get a wake-up too",
       ("palace_bridge.features.wakeup:FRESH_REASONS", _every_reason_fresh)),
    mutant("wake-fresh-palace-as-memory", "WAKE-04",
       "a fresh palace's 'Chroma database missing' answer (an error body without success or "
       "isError) is taken for the palace status and diary and injected as the wake-up",
       ("palace_bridge.features.wakeup:failed", _error_body_counts_as_memory)),
    mutant("wake-failure-escapes", "WAKE-04",
       "a failing wake-up call raises into the host",
       ("palace_bridge.features.wakeup:PalaceError", never_caught)),
    # FEED
    mutant("feed-debounce-ignored", "FEED-02",
       "every agent_settled feeds, whatever the debounce window",
       (f"{FEEDING}:Feeder.settled", _window_forgotten)),
    mutant("feed-mine-source-split-on-every-equals", "FEED-01",
       "the MINE_SOURCE line is split on every '=', so a path containing '=' is cut short",
       (f"{FEEDING}:mine_source", _mine_source_split_on_every_equals)),
    mutant("feed-skipped-settle-restarts-window", "FEED-02",
       "a settle skipped inside the debounce window restarts it (a trailing debounce)",
       (f"{FEEDING}:Feeder.settled", _window_slides)),
    mutant("feed-failed-prepare-charges-window", "FEED-07",
       "a prepare that exits non-zero charges the debounce window like a successful feed",
       (f"{FEEDING}:Outcome.succeeded", _failed_prepare_counts_as_fed)),
    mutant("feed-flag-ignored", "FEED-03",
       "MEMPALACE_FEED=0 does not disable feeding",
       (CONFIG, fields_forced(feed=True))),
    mutant("feed-wing-knob-ignored", "FEED-04",
       "the feed always uses wing_conversations",
       (f"{FEEDING}:FeedSettings.from_config",
        fields_forced(wing="wing_conversations"))),
    mutant("feed-prepare-never-times-out", "FEED-05",
       "the prepare helper runs without its timeout",
       (f"{FEEDING}:FeedSettings.from_config",
        fields_forced(prepare_timeout_ms=0))),
    mutant("feed-timed-out-prepare-charges-window", "FEED-05",
       "a prepare killed at its timeout charges the debounce window like a successful feed",
       (f"{FEEDING}:Outcome.succeeded", _timed_out_prepare_counts_as_fed)),
    mutant("feed-mine-never-times-out", "FEED-06",
       "the feed's mine call runs without its timeout",
       (f"{FEEDING}:FeedSettings.from_config", fields_forced(mine_timeout_ms=0))),
    mutant("feed-mine-zero-caps-at-once", "FEED-06",
       "MEMPALACE_FEED_MINE_TIMEOUT_MS=0 caps the mine at 1 ms instead of leaving it uncapped",
       (f"{FEEDING}:FeedSettings.from_config", _zero_mine_cap_read_as_no_time)),
    mutant("feed-triggers-not-coalesced", "FEED-08",
       "a trigger during a feed starts a second feed instead of joining it",
       (f"{FEEDING}:Feeder._running", _feed_never_running)),
    mutant("feed-remote-skip-silent", "FEED-09",
       "skipping the feed on a remote palace is never reported",
       (f"{FEEDING}:Feeder._may_feed", _remote_skip_silent)),
    mutant("feed-refusal-charges-window", "FEED-10",
       "a mine refused by the writer lock closes the debounce window like a success",
       (f"{FEEDING}:Outcome.succeeded", _refusal_counts_as_fed)),
    # PROV
    mutant("prov-diary-unstamped", "PROV-01",
       "diary entries on a shared palace get no HOST:<device>| prefix",
       ("palace_bridge.features.provenance:DIARY_TOOL", _diary_tool_renamed)),
    mutant("prov-explicit-writer-overwritten", "PROV-02",
       "a writer the caller set is replaced by the device stamp",
       ("palace_bridge.features.provenance:_unset", _always_unset)),
    mutant("prov-stamped-without-remote", "PROV-03",
       "provenance is stamped with a device name alone, without a remote palace",
       ("palace_bridge.extension:stamper_for", _stamper_without_remote_gate)),
    mutant("prov-feed-mine-unstamped", "PROV-04",
       "the feed's own mempalace_mine goes out unstamped",
       (f"{FEEDING}:Feeder._mine", _feed_mine_unstamped)),
    # MAIL
    mutant("mail-flag-ignored", "MAIL-01",
       "MEMPALACE_MAILBOX=0 does not disable the mailbox",
       (CONFIG, fields_forced(mailbox=True))),
    mutant("mail-own-events-by-list", "MAIL-02",
       "every event in the answer to the 'my events' query is taken as this device's own",
       (f"{MAILBOX}:owed", _own_events_by_list)),
    mutant("mail-seq-ignored", "MAIL-03",
       "a reply closes an ask whatever their seq order",
       (f"{MAILBOX}:_answers", _seq_ignored)),
    mutant("mail-ack-of-ignored", "MAIL-03",
       "metadata.ack_of does not join a reply to its ask (only correlation_id does)",
       (f"{MAILBOX}:_answers", _ack_of_ignored)),
    mutant("mail-ack-of-any-event", "MAIL-03",
       "a reply that acks any event closes every ask",
       (f"{MAILBOX}:_answers", _ack_of_any_event)),
    mutant("mail-claimed-closes", "MAIL-03",
       "a 'claimed' reply counts as terminal",
       (f"{MAILBOX}:TERMINAL", _claimed_is_terminal)),
    mutant("mail-broadcasts-owed", "MAIL-04",
       "broadcasts (to_agent '*') are counted as owed",
       (f"{MAILBOX}:owed", _broadcast_owed)),
    mutant("mail-owed-by-id", "MAIL-05",
       "the owed asks are listed in the order of their ids, not their seqs",
       (f"{MAILBOX}:owed", _owed_by_id)),
    mutant("mail-poll-every-settle", "MAIL-05",
       "agent_settled polls the mailbox every time, ignoring the poll floor",
       (f"{MAILBOX}:Mailbox.due", _poll_every_settle)),
    mutant("mail-failure-escapes", "MAIL-06",
       "a failing mailbox query raises instead of staying silent",
       (f"{MAILBOX}:PalaceError", never_caught)),
    mutant("mail-failure-logged", "MAIL-06",
       "a failing mailbox query is reported on stderr instead of staying silent",
       (f"{MAILBOX}:Mailbox.fetch", _mailbox_failure_logged)),
    # DIARY, KNOB
    mutant("diary-topic-dropped", "DIARY-01",
       "/mempalace-diary ignores the topic",
       ("palace_bridge.features.diary:diary_prompt", _topic_dropped)),
    mutant("knob-default-respawns-three", "KNOB-01",
       "the default MEMPALACE_MCP_MAX_RESPAWNS is 3 instead of 2",
       (CONFIG, _default_respawns_three)),
    mutant("knob-malformed-crashes-load", "KNOB-02",
       "a malformed knob raises while the bridge loads instead of warning and using the default",
       (CONFIG, _malformed_knob_crashes_load)),
    mutant("knob-warnings-silenced", "KNOB-02",
       "a malformed knob falls back to its default without a warning",
       (CONFIG, fields_forced(warnings=()))),
)
