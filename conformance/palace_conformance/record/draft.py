"""From relayed traffic to a draft scenario: every ``tools/call`` the bridge made becomes a
``call_tool`` step whose expectation is what the palace answered, kept only where it is stable.

Nothing run-specific may reach the draft: secrets (the kit's :mod:`palace_conformance.redaction`)
are replaced in arguments and never used in matchers; ``$HOME`` and the temp dir become the
run's ``${TMP}/home`` and ``${TMP}``; in results, every value the drift masks
(:mod:`palace_conformance.runner.compare.volatile`: ids, times, pids, ports, session ids, temp
paths, ...) is left out of the matcher instead of being pinned, since a subset matcher that does
not name a key accepts any value there. The draft still needs a person: its ``covers``, title and
what to keep are a reviewer's call, and it becomes a fixture only after ``fixtures validate``
and a passing run on both transports.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from palace_conformance.redaction import Redactor, environment_secrets, mask_token_shapes
from palace_conformance.relay.stdio import FROM_PALACE, TO_PALACE, Message
from palace_conformance.runner.compare.volatile import Masker, run_dates
from palace_conformance.runner.verdict.normalise import parse_text

#: what the recorded calls prove at most: arguments kept (TOOL-02), results and errors kept
#: (TOOL-03, TOOL-04); the reviewer narrows it
DRAFT_COVERS = ("TOOL-02", "TOOL-03")
_DROP = object()  # a value the matcher leaves out


def path_replacements(environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """``(value, placeholder)`` pairs for this machine's paths, longest first: HOME is the run's
    ``${TMP}/home`` (the runner's HOME), the temp dir is ``${TMP}``."""
    environ = os.environ if environ is None else environ
    pairs = []
    home = environ.get("HOME", "").rstrip("/")
    if len(home) > 1:
        pairs.append((home, "${TMP}/home"))
    temp = tempfile.gettempdir().rstrip("/")
    if len(temp) > 1:
        pairs.append((temp, "${TMP}"))
    return sorted(pairs, key=lambda pair: len(pair[0]), reverse=True)


class Cleaner:
    """The draft's view of one machine's values: secrets and paths to replace, volatile ones."""

    def __init__(self, secrets: Iterable[str] = (),
                 paths: Sequence[tuple[str, str]] = ()) -> None:
        self.redactor = Redactor(secrets, shapes=True)  # token-shaped strings too
        self.paths = list(paths)
        self.masker = Masker(days=run_dates())

    def argument(self, value: Any) -> Any:
        """An argument as the draft passes it: secrets marked, paths made the run's own."""
        value = self.redactor.value(value)
        if isinstance(value, str):
            for raw, name in self.paths:
                value = value.replace(raw, name)
            return value
        if isinstance(value, dict):
            return {k: self.argument(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.argument(v) for v in value]
        return value

    def stable(self, value: Any, key: str = "") -> Any:
        """``value`` without its volatile parts (:data:`_DROP` when nothing stable is left)."""
        if isinstance(value, dict):
            kept = {k: self.stable(v, str(k)) for k, v in value.items()}
            return {k: v for k, v in kept.items() if v is not _DROP}
        if isinstance(value, list):  # an array matcher needs every element, so its length
            kept_items = [self.stable(v) for v in value]
            return value if kept_items == value else self.shape(value, key)
        if self.masker.value(value, key) != value or self.redactor.value(value) != value:
            return _DROP
        if isinstance(value, str) and any(raw in value for raw, _ in self.paths):
            return _DROP
        return value


    def shape(self, value: Any, key: str = "") -> Any:
        """A matcher for what a later run can check of a list that is not stable as a whole
        (a search's hits, a listing's drawers): as many elements, each with the same keys,
        stable values kept and volatile ones only required to be there. A recorded search then
        still asserts how much was found, its ids where they are stable, and each hit's shape,
        where leaving the list out would assert nothing about what was found."""
        if isinstance(value, dict):
            return {k: self.shape(v, str(k)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.shape(v, key) for v in value]
        kept = self.stable(value, key)
        return {"$exists": True} if kept is _DROP else kept  # there, whatever it holds


def draft_relevant(item: Message) -> bool:
    """Whether the draft can use ``item``: a ``tools/call`` request, or an answer from the
    palace. A recorder keeps only these, so a palace streaming server requests or
    notifications does not grow what each draft is built from."""
    message = item.message
    if not isinstance(message, dict) or "id" not in message:
        return False
    if item.direction == TO_PALACE:
        return message.get("method") == "tools/call"
    return "method" not in message


def tool_calls(messages: Iterable[Message]) -> list[tuple[Mapping[str, Any], Any]]:
    """Each ``tools/call`` request with its answer (``None`` when none came), in request order.
    Answers pair by id with its JSON type (``1`` is not ``"1"``), as a bridge must pair them."""
    calls: list[tuple[Mapping[str, Any], Any]] = []
    pending: dict[str, int] = {}
    for item in messages:
        message = item.message
        if not isinstance(message, dict) or "id" not in message:
            continue
        key = json.dumps(message["id"], sort_keys=True)
        if item.direction == TO_PALACE and message.get("method") == "tools/call":
            pending[key] = len(calls)
            calls.append((message, None))
        elif item.direction == FROM_PALACE and "method" not in message and key in pending:
            index = pending.pop(key)
            calls[index] = (calls[index][0], message)
    return calls


def expectation(answer: Any, cleaner: Cleaner) -> dict[str, Any] | None:
    """The step's ``expect`` from the palace's answer: an error's kind and code, or the result's
    ``is_error`` and stable JSON (as the judge's result view reads ``content[0]``)."""
    if not isinstance(answer, dict):
        return None
    error = answer.get("error")
    if isinstance(error, dict):
        expect: dict[str, Any] = {"kind": "tool_error"}
        if isinstance(error.get("code"), int) and not isinstance(error.get("code"), bool):
            expect["code"] = error["code"]
        message = cleaner.stable(error.get("message"))
        if isinstance(message, str) and message:
            expect["message_contains"] = message
        return {"error": expect}
    result = answer.get("result")
    if not isinstance(result, dict):
        return {"ok": True}
    view: dict[str, Any] = {"is_error": bool(result.get("isError", False))}
    content = result.get("content")
    content = content if isinstance(content, list) else []
    first = content[0] if content else None
    text = first.get("text") if isinstance(first, dict) else None
    if isinstance(text, str):
        parsed = parse_text(text)
        if isinstance(parsed, dict | list):
            kept = cleaner.stable(parsed)
            if kept is not _DROP:
                view["json"] = kept
            elif isinstance(parsed, dict):
                view["json"] = {}
        elif len(content) == 1 and cleaner.stable(text) is not _DROP:
            view["content"] = [{"type": "text", "text": text}]
    return {"ok": True, "result": view}


def step_label(index: int, tool: str) -> str:
    short = tool.removeprefix("mempalace_").lower().replace(".", "-")
    cleaned = "".join(c if c.isalnum() or c in "_-" else "-" for c in short) or "call"
    return f"call-{index}-{cleaned}"


def build_draft(messages: Sequence[Message], scenario_id: str, *,
                cleaner: Cleaner | None = None,
                memo: dict[tuple[int, int, int], dict[str, Any]] | None = None
                ) -> dict[str, Any]:
    """The draft scenario for the recorded traffic (a JSON object in the fixture format).
    ``memo`` (kept by a caller that rebuilds the draft as traffic comes, with the same cleaner)
    holds each call's step, so a rebuild only builds the calls that are new or newly answered."""
    if cleaner is None:
        cleaner = Cleaner(environment_secrets(), path_replacements())
    steps: list[dict[str, Any]] = [
        {"op": "load"},
        {"op": "event", "name": "session_start", "payload": {"reason": "startup"}},
        {"op": "settle", "quiet_ms": 200, "max_ms": 5000, "until": "tools"},
    ]
    for index, (request, answer) in enumerate(tool_calls(messages), start=1):
        key = (index, id(request), id(answer))  # the messages live as long as the recording
        if memo is not None and key in memo:
            steps.append(memo[key])
            continue
        raw_params = request.get("params")
        params: Mapping[str, Any] = raw_params if isinstance(raw_params, dict) else {}
        name = params.get("name")
        if not isinstance(name, str):
            continue
        arguments = params.get("arguments")
        step: dict[str, Any] = {"op": "call_tool", "as": step_label(index, name), "name": name,
                                "args": cleaner.argument(arguments)
                                if isinstance(arguments, dict) else {},
                                # the recorded call reached the palace: the host must not stop
                                # it on the schema (as pi would) before it does again
                                "validate": False}
        expect = expectation(answer, cleaner)
        if expect is None:
            step["comment"] = "recorded without an answer (the palace never replied)"
        else:
            step["expect"] = expect
        steps.append(step)
        if memo is not None:
            memo[key] = step
    steps.append({"op": "shutdown", "reason": "quit"})
    draft = _draft(scenario_id, steps)
    note = _masked_note(messages)
    if note:
        draft["description"] = f"{draft['description']} {note}"
    return draft


def _masked_note(messages: Sequence[Message]) -> str:
    """Which token-shaped strings the recorded calls held (masked in the arguments as
    ``<redacted-token>``, left out of the expectations); empty when none."""
    calls = json.dumps([[request, answer] for request, answer in tool_calls(messages)],
                       ensure_ascii=False, default=str)
    _, kinds = mask_token_shapes(calls)
    if not kinds:
        return ""
    counts = {kind: kinds.count(kind) for kind in dict.fromkeys(kinds)}
    listed = ", ".join(f"{kind} x{count}" for kind, count in counts.items())
    return (f"Token-shaped strings masked ({listed}): arguments hold <redacted-token>, "
            "expectations leave those values out.")


def _draft(scenario_id: str, steps: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "id": scenario_id,
        "title": "DRAFT recorded by palace-conformance record: review before adding it",
        "description": "Recorded traffic: each tools/call the bridge made, with the palace's "
        "answer as its expectation (volatile values left out, secrets and paths replaced). "
        "Review the covers, title and expectations; it becomes a fixture only after "
        "'palace-conformance fixtures validate' and a passing run on both transports.",
        "covers": list(DRAFT_COVERS),
        "transports": ["stdio", "http"],
        "env": {"MEMPALACE_FEED": "0"},
        "steps": steps,
    }


def write_draft(path: str | os.PathLike[str], draft: Mapping[str, Any]) -> None:
    """Replace ``path`` atomically: a reader (or a killed recorder) never sees half a file."""
    target = os.fspath(path)
    temporary = f"{target}.tmp{os.getpid()}"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(draft, handle, indent=2, ensure_ascii=False)
        handle.write("\n")
    os.replace(temporary, target)


class DraftWriter:
    """Keeps the draft on disk as the traffic comes, off the relay's path: :meth:`changed` only
    sets a flag (a relay thread or the event loop never builds a draft), and one thread of its
    own rebuilds and rewrites the file at most every ``interval_s``. So a palace that streams
    thousands of messages costs the relay nothing per message, and a recorder killed outright
    still leaves a draft at most ``interval_s`` old. :meth:`close` writes the last one."""

    def __init__(self, path: str | os.PathLike[str], build: Callable[[], Mapping[str, Any]],
                 interval_s: float = 0.25) -> None:
        self.path = path
        self.build = build
        self.interval_s = interval_s
        self.writes = 0
        self._dirty = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()  # one write at a time (they share a temporary file)
        self._thread = threading.Thread(target=self._loop, daemon=True, name="draft-writer")
        self._thread.start()

    def changed(self) -> None:
        self._dirty.set()

    def write(self) -> None:
        """Build and write the draft now (from any thread)."""
        with self._lock:
            write_draft(self.path, self.build())
            self.writes += 1

    def _loop(self) -> None:
        import time

        while not self._stop.is_set():
            if not self._dirty.wait(0.2):
                continue
            self._dirty.clear()
            started = time.monotonic()
            self.write()
            # a long session's draft takes longer to build: waiting four times as long as the
            # build took keeps this thread's share of the interpreter under a fifth, however
            # long the recording gets, so the relay's own pace never suffers from it
            self._stop.wait(max(self.interval_s, 4 * (time.monotonic() - started)))

    def close(self) -> None:
        """Stop the thread (it finishes a write in progress) and write the final draft."""
        self._stop.set()
        self._dirty.set()
        self._thread.join(5.0)
        self.write()
