"""The fake's truth table: what mempalace answers a fixed set of probe calls, per tool.

``palace-conformance fake catalog --from-real`` starts the real server (isolated world, offline
embedding stub), reads its ``tools/list`` and, on a fresh, an initialised-but-empty and a
populated palace, calls every tool with the probes of :func:`probe_plan` (no arguments,
wrong-typed ones, blank strings, minimal valid ones; the populated palace is first filled and
then probed for what it holds). The answers are normalised (ids, timestamps, replica ids, scores,
paths) and written beside the catalogue as reviewable JSON, so a new release is one command and a
reviewed diff. The default test suite replays the same probes against the fake (:func:`record`
with :func:`fake_command`) and asserts equal answers: the fake's fidelity is pinned in CI without
the real server.

Probes run in one session per palace state, tool after tool (read-only tools first, then the
rest, writers that take the palace lock last, so a fresh palace stays fresh for as long as
possible), each tool's probes in the order of :data:`KINDS`. The fake replays the same order, so
the state a probe leaves behind is part of what is pinned.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from palace_conformance import processes as procs
from palace_conformance.errors import PalaceError
from palace_conformance.resources import CATALOGUES, fixtures_dir

SCHEMA_VERSION = 1
TRUTH_FILE = "mempalace-3.11.0-answers.json"
CATALOGUE_FILE = "mempalace-3.11.0-tools.json"
STATES = ("fresh", "initialised", "populated")
KINDS = ("none", "wrong", "blank", "valid")
#: arguments every probe of a tool carries (event_wait would otherwise block for 60 s)
PROBE_EXTRAS: dict[str, dict[str, Any]] = {"mempalace_event_wait": {"timeout_ms": 0}}
#: a wrong value for each schema type (integers and numbers are coerced, so they get text)
WRONG = {"string": ["x"], "array": "x", "object": "x", "integer": "x", "number": "x",
         "boolean": "x"}
VALID = {"string": "x", "array": ["x"], "object": {}, "integer": 1, "number": 0.5,
         "boolean": False}
SETUP_DRAWER = {"wing": "probe_setup", "room": "probe_setup", "content": "probe setup drawer"}
#: what the populated palace is filled with (recorded like any probe), then calls that hit it;
#: ``$ref:N:a.b`` is the value at ``a.b`` in the answer to the session's probe N
POPULATED_SEED: list[tuple[str, dict[str, Any]]] = [
    ("mempalace_add_drawer", {"wing": "probe", "room": "notes",
                              "content": "lighthouse storms notebook"}),
    ("mempalace_diary_write", {"agent_name": "Probe Agent", "entry": "probe diary entry"}),
    ("mempalace_kg_add", {"subject": "probe", "predicate": "knows", "object": "palace",
                          "valid_from": "2020-01-01"}),
    ("mempalace_event_append", {"type": "note", "stream": "probe", "room": "r",
                                "from_agent": "probe@x", "to_agent": "*", "body": "hello"}),
    ("mempalace_artifact_put", {"kind": "note", "content": "artifact text\n",
                                "created_by": "probe"}),
    ("mempalace_create_tunnel", {"source_wing": "probe", "source_room": "notes",
                                 "target_wing": "wing_probe_agent", "target_room": "diary"}),
    ("mempalace_get_drawer", {"drawer_id": "$ref:0:drawer_id"}),
    ("mempalace_get_drawers", {"drawer_ids": ["$ref:0:drawer_id", "x"]}),
    ("mempalace_list_drawers", {"wing": "probe"}),
    ("mempalace_list_rooms", {"wing": "probe"}),
    ("mempalace_search", {"query": "lighthouse storms", "wing": "probe"}),
    ("mempalace_check_duplicate", {"content": "lighthouse storms notebook"}),
    ("mempalace_diary_read", {"agent_name": "Probe Agent"}),
    ("mempalace_kg_query", {"entity": "probe"}),
    ("mempalace_kg_timeline", {"entity": "probe"}),
    ("mempalace_event_list", {"stream": "probe"}),
    ("mempalace_event_wait", {"stream": "probe", "timeout_ms": 0}),
    ("mempalace_artifact_get", {"artifact_id": "$ref:4:artifact.id"}),
    ("mempalace_traverse", {"start_room": "notes"}),
    ("mempalace_follow_tunnels", {"wing": "probe", "room": "notes"}),
    ("mempalace_list_tunnels", {}),
    ("mempalace_event_ack", {"event_id": "$ref:3:event.id", "from_agent": "probe@y"}),
    ("mempalace_mine", {"source": "mine_src", "dry_run": True}),
    ("mempalace_delete_drawer", {"drawer_id": "$ref:0:drawer_id"}),
]
MINE_SOURCE = {"mine_src/notes.md": "A mined note about the lighthouse and its keeper.\n" * 8}
CALL_TIMEOUT_S = 90.0
START_TIMEOUT_S = 120.0
PROTOCOL_VERSION = "2025-06-18"

#: result keys whose values depend on the embedder, the host or prose the fake abridges
MASKED_KEYS = {
    "similarity": "<SCORE>", "distance": "<SCORE>", "effective_distance": "<SCORE>",
    "bm25_score": "<SCORE>", "embedding_device": "<EMBEDDER>", "protocol": "<TEXT>",
    "aaak_dialect": "<TEXT>", "aaak_spec": "<TEXT>", "sqlite_version": "<SQLITE>",
    "hardware": "<PLATFORM>", "embedder": "<EMBEDDER>", "output": "<REPORT>",
}
_MASKS = [
    (re.compile(r"\d{13}-\d{6}-rep_[0-9a-f]{32}"), "<HLC>"),
    (re.compile(r"rep_[0-9a-f]{32}"), "<REPLICA>"),
    (re.compile(r"evt_\d{8}T\d{6}_[0-9a-f]{12}"), "<EVENT_ID>"),
    (re.compile(r"art_\d{8}T\d{6}_[0-9a-f]{12}"), "<ARTIFACT_ID>"),
    (re.compile(r"\d{8}_\d{12}_[0-9a-f]{12}"), "<STAMP>"),
    (re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?"), "<TS>"),
    (re.compile(r"\b\d{4}-\d\d-\d\d\b"), "<DATE>"),
    (re.compile(r"_[0-9a-f]{24}\b"), "_<hex24>"),
    (re.compile(r"_[0-9a-f]{12}\b"), "_<hex12>"),
    (re.compile(r"\b[0-9a-f]{16}\b"), "<hex16>"),
    (re.compile(r"\b[0-9a-f]{64}\b"), "<sha256>"),
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:<PORT>"),
]


class TruthTableError(PalaceError):
    """A probe session could not run: the message says which server, what failed and the fix."""


def catalogue_path() -> Path:
    return fixtures_dir() / "catalogue" / CATALOGUE_FILE


def light_path() -> Path:
    return fixtures_dir() / "catalogue" / CATALOGUES["light"]


def truth_path() -> Path:
    return fixtures_dir() / "catalogue" / TRUTH_FILE


def load_truth(path: Path | None = None) -> dict[str, Any]:
    """The checked-in truth table."""
    data: dict[str, Any] = json.loads((path or truth_path()).read_text(encoding="utf-8"))
    return data


# -- the probes ---------------------------------------------------------------------------------


def _arguments(tool: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """One probe's arguments, or None when the probe would repeat another of the same tool."""
    schema = tool.get("inputSchema", {})
    properties: dict[str, Any] = schema.get("properties", {})
    required = [name for name in schema.get("required", []) if name in properties]
    extras = PROBE_EXTRAS.get(tool["name"], {})

    def kind_of(name: str) -> str:
        spec = properties.get(name)
        return str(spec.get("type", "string")) if isinstance(spec, dict) else "string"

    valid = {name: VALID.get(kind_of(name), "x") for name in required}
    if kind == "none":
        return dict(extras)
    if kind == "valid":
        return {**valid, **extras} if required else None
    if kind == "wrong":
        names = required or [n for n in properties if kind_of(n) == "string"]
        if not names:
            return None
        return {**valid, **{n: WRONG.get(kind_of(n), ["x"]) for n in names}, **extras}
    blanks = [name for name in required if kind_of(name) == "string"]
    if not blanks:
        return None
    return {**valid, **{name: "" for name in blanks}, **extras}


def probe_plan(catalogue: dict[str, Any], state: str = "fresh") -> list[tuple[str, dict[str, Any]]]:
    """Every probe of one session, in order: ``(tool, arguments)``; a populated palace's
    session starts with :data:`POPULATED_SEED`."""
    tools: list[dict[str, Any]] = catalogue["tools"]
    lease_taking = set(catalogue.get("policies", {}).get("lease_taking", []))

    def writer_rank(tool: dict[str, Any]) -> int:
        if (tool.get("annotations") or {}).get("readOnlyHint"):
            return 0
        return 2 if tool["name"] in lease_taking else 1

    listed = {tool["name"] for tool in tools}
    plan: list[tuple[str, dict[str, Any]]] = [
        (name, arguments) for name, arguments in POPULATED_SEED
        if state == "populated" and name in listed]
    for tool in sorted(tools, key=writer_rank):
        for kind in KINDS:
            arguments = _arguments(tool, kind)
            if arguments is not None:
                plan.append((tool["name"], arguments))
    return plan


# -- normalisation ------------------------------------------------------------------------------


def normalise(value: Any, places: Mapping[str, str]) -> Any:
    """``value`` with volatile parts masked; ``places`` maps a path to its placeholder."""
    if isinstance(value, dict):
        masked = {normalise(key, places): (MASKED_KEYS[key] if key in MASKED_KEYS
                                          and item is not None else normalise(item, places))
                  for key, item in value.items()}
        if "replica_id" in value and isinstance(value.get("name"), str):
            masked["name"] = "<HOSTNAME>"  # mesh_peers' self: the host's name
        return masked
    if isinstance(value, list):
        return [normalise(item, places) for item in value]
    if isinstance(value, str):
        for path, placeholder in sorted(places.items(), key=lambda p: -len(p[0])):
            value = value.replace(path, placeholder)
        for pattern, replacement in _MASKS:
            value = pattern.sub(replacement, value)
        return value
    return value


def answer_of(reply: dict[str, Any], places: Mapping[str, str]) -> dict[str, Any]:
    """A JSON-RPC reply as the table holds it: the error, or the result's decoded text."""
    if "error" in reply:
        return {"error": normalise(reply["error"], places)}
    result = reply.get("result") or {}
    content = result.get("content")
    answer: dict[str, Any]
    if (isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict)
            and content[0].get("type") == "text"):
        try:
            answer = {"result": normalise(json.loads(content[0]["text"]), places)}
        except ValueError:
            answer = {"text": normalise(content[0]["text"], places)}
    else:
        answer = {"raw_result": normalise(result, places)}
    if result.get("isError"):
        answer["isError"] = True
    return answer


# -- one stdio session --------------------------------------------------------------------------


class StdioSession:
    """A server process spoken to over pipes, one request at a time, every wait bounded."""

    def __init__(self, command: Sequence[str], env: Mapping[str, str], cwd: Path,
                 label: str) -> None:
        self.label = label
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.stderr_tail: list[bytes] = []
        self.next_id = 0
        try:
            self.proc = subprocess.Popen(list(command), stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         env=dict(env), cwd=cwd, start_new_session=True)
        except OSError as exc:
            raise TruthTableError(f"{label}: cannot start {command[0]}: {exc}") from None
        threading.Thread(target=self._pump, daemon=True).start()
        threading.Thread(target=self._drain, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in iter(self.proc.stdout.readline, b""):
            self.lines.put(line)

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in iter(self.proc.stderr.readline, b""):
            self.stderr_tail = [*self.stderr_tail[-20:], line]

    def request(self, method: str, params: dict[str, Any], timeout: float) -> dict[str, Any]:
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError:
            raise TruthTableError(f"{self.label}: the server closed its stdin ({self._why()})"
                                  ) from None
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TruthTableError(f"{self.label}: no answer to {method} within {timeout:.0f}"
                                      f" s ({self._why()})")
            try:
                line = self.lines.get(timeout=min(left, 1.0))
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    raise TruthTableError(f"{self.label}: the server exited "
                                          f"({self._why()})") from None
                continue
            try:
                reply = json.loads(line)
            except ValueError:
                continue  # not a JSON-RPC line
            if isinstance(reply, dict) and reply.get("id") == self.next_id:
                return reply

    def _why(self) -> str:
        tail = b"".join(self.stderr_tail[-3:]).decode("utf-8", "replace").strip()
        return f"exit {self.proc.poll()}; stderr: {tail[-300:]!r}"

    def close(self) -> None:
        if not procs.ended_by_eof(self.proc, 10):
            self.proc.kill()
            self.proc.wait(10)


Plan = list[tuple[str, dict[str, Any]]]


def run_session(command: Sequence[str], env: Mapping[str, str], cwd: Path,
                plan_for: Callable[[list[dict[str, Any]]], Plan], setup: bool,
                places: Mapping[str, str], label: str) -> Session:
    """Handshake, tools/list, the optional setup (one drawer filed and deleted again) and every
    probe ``plan_for`` makes of the listed tools."""
    session = StdioSession(command, env, cwd, label)
    try:
        hello = session.request("initialize", {
            "protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "palace-conformance-probe", "version": "1"}}, START_TIMEOUT_S)
        server_info = (hello.get("result") or {}).get("serverInfo")
        tools = _tools_of(session.request("tools/list", {}, CALL_TIMEOUT_S).get("result"))
        plan = plan_for(tools)
        if setup:
            added = session.request("tools/call", {"name": "mempalace_add_drawer",
                                                   "arguments": SETUP_DRAWER}, CALL_TIMEOUT_S)
            drawer_id = _drawer_id(added, label)
            deleted = session.request("tools/call", {"name": "mempalace_delete_drawer",
                                                     "arguments": {"drawer_id": drawer_id}},
                                      CALL_TIMEOUT_S)
            answer = _payload(deleted)
            if not isinstance(answer, dict) or answer.get("success") is not True:
                raise TruthTableError(f"{label}: the setup drawer was not deleted: {deleted}")
        answers: list[dict[str, Any]] = []
        payloads: list[Any] = []
        for tool, arguments in plan:
            reply = session.request("tools/call", {"name": tool,
                                                   "arguments": resolve(arguments, payloads)},
                                    CALL_TIMEOUT_S)
            answers.append(answer_of(reply, places))
            payloads.append(_payload(reply))
        return Session(plan, answers, tools, server_info)
    finally:
        session.close()


class Session:
    """What one probe session gave: the plan, its normalised answers, the listed tools and the
    server's ``serverInfo``."""

    def __init__(self, plan: Plan, answers: list[dict[str, Any]], tools: list[dict[str, Any]],
                 server_info: Any) -> None:
        self.plan = plan
        self.answers = answers
        self.tools = tools
        self.server_info = server_info


def _payload(reply: dict[str, Any]) -> Any:
    try:
        return json.loads(reply["result"]["content"][0]["text"])
    except (KeyError, IndexError, TypeError, ValueError):
        return None


def resolve(value: Any, payloads: list[Any]) -> Any:
    """``value`` with each ``$ref:N:a.b`` replaced by the value at ``a.b`` in answer N (None
    when that answer has none: the probe then shows what the server says to null)."""
    if isinstance(value, dict):
        return {key: resolve(item, payloads) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve(item, payloads) for item in value]
    if isinstance(value, str) and value.startswith("$ref:"):
        _, index, path = value.split(":", 2)
        found: Any = payloads[int(index)] if int(index) < len(payloads) else None
        for key in path.split("."):
            found = found.get(key) if isinstance(found, dict) else None
        return found
    return value


def _drawer_id(reply: dict[str, Any], label: str) -> str:
    try:
        found = json.loads(reply["result"]["content"][0]["text"])["drawer_id"]
    except (KeyError, IndexError, TypeError, ValueError):
        found = None
    if not isinstance(found, str):
        raise TruthTableError(f"{label}: the setup add_drawer filed nothing: {reply}; is the "
                              "embedding stub reachable?")
    return found


# -- recording ----------------------------------------------------------------------------------


def fake_command() -> list[str]:
    """The fake's stdio server, as this Python runs it."""
    return [sys.executable, "-c",
            "from palace_conformance.fake.cli import fake_mcp_main; fake_mcp_main()"]


class Recording:
    """What one recording gave: the probe table, the tools the server listed and its
    ``serverInfo``, and (real server only) the light server's ``serverInfo`` and tools."""

    def __init__(self, table: dict[str, Any], tools: list[dict[str, Any]], server_info: Any,
                 light: Session | None = None) -> None:
        self.table = table
        self.tools = tools
        self.server_info = server_info
        self.light = light


def record(server: str, real_python: str | None = None) -> Recording:
    """Run every probe against ``server`` (``real`` or ``fake``) on both palace states.

    The probes are planned from the tools the server lists, with the checked-in per-tool
    policies (which tools take the writer lock)."""
    if server == "real":
        from palace_conformance.real.embedding import environment, running_stub
        from palace_conformance.real.install import isolated_environment, locate

        installed = locate(real_python)
        with running_stub() as url:
            def real_env(home: Path, palace: Path) -> dict[str, str]:
                return isolated_environment(home, palace, environment(url))

            recording = _record_all(installed.stdio_command(), real_env, "real")
            with tempfile.TemporaryDirectory(prefix="palace-probe-light-") as root:
                base = Path(root).resolve()
                (base / "home").mkdir()
                recording.light = run_session(
                    [str(installed.bin_dir / "mempalace-light-mcp")],
                    real_env(base / "home", base / "palace"), base, lambda tools: [], False, {},
                    "real/light")
            return recording
    if server != "fake":
        raise ValueError(f"server must be 'real' or 'fake', not {server!r}")

    def fake_env(home: Path, palace: Path) -> dict[str, str]:
        state = home / "fake-state.json"
        state.write_text('{"initialised": false}', encoding="utf-8")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PALACE_FAKE_", "MEMPALACE_", "MEMPAL_"))}
        env.update({"HOME": str(home), "MEMPALACE_PALACE_PATH": str(palace),
                    "PALACE_FAKE_STATE": str(state)})
        return env

    return _record_all([*fake_command(), "--palace", "{palace}"], fake_env, "fake")


def _record_all(command: list[str], make_env: Callable[[Path, Path], dict[str, str]],
                label: str) -> Recording:
    policies = json.loads(catalogue_path().read_text(encoding="utf-8")).get("policies", {})
    probes: list[dict[str, Any]] = []

    for state in STATES:
        def plan_for(tools: list[dict[str, Any]], state: str = state) -> Plan:
            return probe_plan({"tools": tools, "policies": policies}, state)

        with tempfile.TemporaryDirectory(prefix=f"palace-probe-{state}-") as root:
            base = Path(root).resolve()
            home, palace, cwd = base / "home", base / "palace", base / "cwd"
            for directory in (home, cwd):
                directory.mkdir()
            for name, text in MINE_SOURCE.items():
                (cwd / name).parent.mkdir(parents=True, exist_ok=True)
                (cwd / name).write_text(text, encoding="utf-8")
            places = {str(palace): "<PALACE>", str(home): "<HOME>", str(cwd): "<CWD>"}
            argv = [part.replace("{palace}", str(palace)) for part in command]
            session = run_session(argv, make_env(home, palace), cwd, plan_for,
                                  state == "initialised", places, f"{label}/{state}")
            for (tool, arguments), answer in zip(session.plan, session.answers, strict=True):
                probes.append({"state": state, "tool": tool, "arguments": arguments,
                               "answer": answer})
    return Recording({"schema_version": SCHEMA_VERSION, "probes": probes}, session.tools,
                     session.server_info)


def _tools_of(tools_result: Any) -> list[dict[str, Any]]:
    tools = tools_result.get("tools") if isinstance(tools_result, dict) else None
    if not isinstance(tools, list):
        raise TruthTableError(f"tools/list gave no tool list: {tools_result!r}")
    return tools


# -- the command -------------------------------------------------------------------------------

_MISSING = re.compile(r"^Missing required parameters? (.*) for tool (\S+)$")


def derived_extra_required(table: dict[str, Any], tools: list[dict[str, Any]]) -> dict[str, Any]:
    """Arguments a tool demands beyond its schema's ``required`` (3.11's diary_write wants
    ``entry``), read off the -32602 its minimal valid probe got."""
    schema_required = {t["name"]: set(t.get("inputSchema", {}).get("required", []))
                       for t in tools}
    extra: dict[str, list[str]] = {}
    for probe in table["probes"]:
        error = probe["answer"].get("error") or {}
        message = str(error.get("message", "")) if error.get("code") == -32602 else ""
        found = _MISSING.match(message)
        if found is None or not set(probe["arguments"]) >= schema_required.get(found[2], set()):
            continue
        names = [n.strip().strip("'") for n in found[1].split(",")]
        if set(names) - set(probe["arguments"]):
            extra[found[2]] = [n for n in names if n not in probe["arguments"]]
    return dict(sorted(extra.items()))


def updated_catalogue(recording: Recording) -> dict[str, Any]:
    """The checked-in catalogue with the recorded tools and the policies read off the probes."""
    catalogue: dict[str, Any] = json.loads(catalogue_path().read_text(encoding="utf-8"))
    catalogue["server"] = recording.server_info
    catalogue["tools"] = recording.tools
    catalogue["policies"]["extra_required"] = derived_extra_required(recording.table,
                                                                     recording.tools)
    return catalogue


def updated_light_catalogue(recording: Recording) -> dict[str, Any]:
    """The checked-in light catalogue with the light server's recorded serverInfo and tools."""
    catalogue: dict[str, Any] = json.loads(light_path().read_text(encoding="utf-8"))
    if recording.light is not None:
        catalogue["server"] = recording.light.server_info
        catalogue["tools"] = recording.light.tools
    return catalogue


def run_catalog(from_real: bool, real_python: str | None, check: bool) -> int:
    """``palace-conformance fake catalog``: record the real server (``--from-real``) and write or
    ``--check`` the checked-in data; without ``--from-real``, check the fake against it."""
    if not from_real:
        recording = record("fake")
        lines = differences(load_truth(), recording.table)
        what = "the fake"
    else:
        recording = record("real", real_python)
        catalogues = [(catalogue_path(), updated_catalogue(recording)),
                      (light_path(), updated_light_catalogue(recording))]
        if not check:
            for path, catalogue in catalogues:  # as checked in: 2-space indent, same ending
                ending = "\n" if path.read_text(encoding="utf-8").endswith("\n") else ""
                path.write_text(json.dumps(catalogue, ensure_ascii=False, indent=2) + ending,
                                encoding="utf-8")
            truth_path().write_text(dump(recording.table), encoding="utf-8")
            print(f"wrote {catalogue_path().name} ({len(recording.tools)} tools), "
                  f"{light_path().name} and {truth_path().name} "
                  f"({len(recording.table['probes'])} probes); review them with git diff, then "
                  "make the fake answer alike (palace-conformance fake catalog --check)")
            return 0
        lines = differences(load_truth(), recording.table)
        for path, catalogue in reversed(catalogues):
            if json.loads(path.read_text(encoding="utf-8")) != catalogue:
                lines.insert(0, f"{path.name}: the real server's serverInfo, tools or policies "
                                "differ")
        what = "the real server"
    if lines:
        print("\n".join(lines))
        print(f"{len(lines)} difference(s) between {truth_path().name} and {what}")
        return 1
    print(f"{what} answers all {len(recording.table['probes'])} probes of {truth_path().name}")
    return 0


# -- comparing ----------------------------------------------------------------------------------


def differences(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """One entry per probe whose answers differ."""
    lines: list[str] = []
    want, got = expected.get("probes", []), actual.get("probes", [])
    if len(want) != len(got):
        lines.append(f"probes: {len(want)} expected, {len(got)} answered")
    for old, new in zip(want, got, strict=False):
        head = f"{old['state']} {old['tool']} {json.dumps(old['arguments'], sort_keys=True)}"
        if (old["tool"], old["arguments"]) != (new["tool"], new["arguments"]):
            lines.append(f"{head}: probe differs ({new['tool']} {new['arguments']})")
        elif _canonical(old["answer"]) != _canonical(new["answer"]):
            lines.append(f"{head}:\n  expected {_canonical(old['answer'])}\n"
                         f"  answered {_canonical(new['answer'])}")
    return lines


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def dump(table: dict[str, Any]) -> str:
    """The table as checked in: sorted keys, one probe per block, a trailing newline."""
    return json.dumps(table, sort_keys=True, ensure_ascii=False, indent=1) + "\n"
