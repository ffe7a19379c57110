"""Repro bundles: everything needed to see, serve and replay one failure, in one directory.

``run --report-dir DIR`` writes ``DIR/bundles/<scenario>--<transport>/`` for every failing result:
the fixture, the fault plan and the seeded palace state the fake started from, the normalised
trace, the raw journal, the host's stderr, the result, and a README with the exact commands to
serve the fake standalone and to replay the run (``palace-conformance replay BUNDLE``). A parity
failure's bundle holds both transports' runs in ``stdio/`` and ``http/``.

Bundles travel (CI artifacts, issues), so no secret is written: see :mod:`.redact`.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from palace_conformance import __version__
from palace_conformance.contract import TRANSPORTS
from palace_conformance.errors import ConformanceError
from palace_conformance.runner.execution.world import REMOTE_TOKEN, REMOTE_URL, StartParts
from palace_conformance.runner.reports import trace as traces
from palace_conformance.runner.reports.redact import Redactor, environment_secrets, scenario_secrets
from palace_conformance.runner.results import FAILURE_STATUSES, PARITY, RunResult, ScenarioResult
from palace_conformance.scenarios.model import Scenario
from palace_conformance.scenarios.palace_state import initial_state

BUNDLE_FORMAT = 1
MANIFEST = "bundle.json"
SCENARIO_FILE = "scenario.json"
PLACEHOLDER_VARS = ("FAKE_URL", "FAKE_TOKEN", "TMP")
_SHELL_SAFE = re.compile(r"\$(?!\{(?:FAKE_URL|FAKE_TOKEN|TMP)\})")


class BundleLeak(ConformanceError, RuntimeError):
    """A secret survived redaction: the bundle is removed rather than kept (a bug, not a user
    mistake)."""


def bundle_name(scenario: str, transport: str) -> str:
    return f"{scenario}--{transport}"


def _dq(value: str) -> str:
    """A double-quoted shell word that still expands ``${FAKE_URL}``, ``${FAKE_TOKEN}``, ``${TMP}``
    (the fixture's placeholders are shell variables in the README's recipes)."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("`", "\\`")
    return '"' + _SHELL_SAFE.sub(lambda _: "\\$", escaped) + '"'


def _dump(value: Any) -> str:
    return json.dumps(value, indent=1, ensure_ascii=False, default=str) + "\n"


@dataclass
class _Writer:
    """Writes redacted files and remembers them for the final leak check."""

    root: Path
    redactor: Redactor

    def __post_init__(self) -> None:
        self.written: list[Path] = []

    def text(self, name: str, text: str) -> None:
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.redactor.text(text), encoding="utf-8")
        self.written.append(path)

    def json(self, name: str, value: Any) -> None:
        self.text(name, _dump(self.redactor.value(value)))

    def check(self) -> None:
        for path in self.written:
            leaked = self.redactor.leaks(path.read_text(encoding="utf-8"))
            if leaked:
                raise BundleLeak(f"{path}: still holds {', '.join(leaked)} after redaction")


def _step_line(step: Any) -> str:
    params = {k: v for k, v in step.params.items() if k != "comment"}
    main = ""
    for field_name in ("name", "action"):
        if field_name in params:
            main = f" {params.pop(field_name)}"
            break
    rest = json.dumps(params, ensure_ascii=False, separators=(",", ":")) if params else ""
    if len(rest) > 90:
        rest = rest[:89] + "…"
    where = f" ({step.transport} only)" if step.transport else ""
    label = f" as {step.label!r}" if step.label else ""
    return f"`{step.op}{main}`{label}{where}" + (f" `{rest}`" if rest else "")


def _env_lines(scenario: Scenario, transport: str) -> list[str]:
    """The bridge's environment as the runner sets it (shell lines, placeholders as variables)."""
    env: dict[str, str | None] = {}
    if transport == "http":
        env[REMOTE_URL] = "${FAKE_URL}"
        if scenario.http.token is not None:
            env[REMOTE_TOKEN] = "${FAKE_TOKEN}"
    env.update(scenario.env)
    lines = []
    for name, value in env.items():
        lines.append(f"unset {name}" if value is None else f"export {name}={_dq(value)}")
    return lines


def _fake_recipe(scenario: Scenario, transport: str, redactor: Redactor) -> list[str]:
    head = ['export TMP="$(mktemp -d)"  # this run\'s own directory, like the runner\'s ${TMP}',
            'export HOME="$TMP/home"  # private: the writer lock lives under $HOME/.mempalace',
            'mkdir -p "$HOME" && cp palace-state.json "$TMP/palace-state.json"  # the fake '
            'writes to its state: keep the bundle\'s copy']
    if transport == "stdio":
        return ["```sh", *head,
                'palace-conformance fake install-shim "$TMP/bin"  # mempalace-mcp is the fake',
                'export PATH="$TMP/bin:$PATH"',
                'export PALACE_FAKE_PLAN="$PWD/faults.json" '
                'PALACE_FAKE_STATE="$TMP/palace-state.json" '
                'PALACE_FAKE_JOURNAL="$TMP/journal.jsonl"',
                *_env_lines(scenario, transport),
                "# now start the bridge from this shell: the mempalace-mcp it spawns is the fake",
                "# with this plan; or talk to the fake yourself, one JSON-RPC message per line:",
                'palace-conformance fake stdio --plan faults.json --state '
                '"$TMP/palace-state.json" --journal "$TMP/journal.jsonl"', "```"]
    token = scenario.http.token
    serve = ("palace-conformance fake http --port 0 --plan faults.json --state "
             '"$TMP/palace-state.json" --journal "$TMP/journal.jsonl" '
             '--ready-file "$TMP/ready.json"' + (" --sessions" if scenario.http.sessions else ""))
    lines = ["```sh", *head]
    if token is not None:
        shown = shlex.quote(redactor.text(token))  # quoted as written: a marker has '<'
        lines += [f"export FAKE_TOKEN={shown}  # any value works: the fake and the "
                  "bridge only need the same one",
                  f'MEMPALACE_MCP_HTTP_TOKEN="$FAKE_TOKEN" {serve} &']
    else:
        lines.append(f"{serve} &")
    lines += ['until [ -s "$TMP/ready.json" ]; do sleep 0.1; done',
              'export FAKE_URL="$(python3 -c \'import json,sys; print(json.load(open(sys.argv[1]))'
              '["url"])\' "$TMP/ready.json")"',
              *_env_lines(scenario, transport),
              "# now start the bridge from this shell; stop the fake with: kill %1", "```"]
    return lines


def _readme(scenario: Scenario, result: ScenarioResult, bridge: str, server: str,
            shown: str, transports: Sequence[str], redactor: Redactor) -> str:
    lines = [f"# Repro: `{scenario.id}` on {result.transport}", "", scenario.title, ""]
    status = result.status.replace("_", " ")
    lines += [f"- **Status:** {status}" + (" (known failure: baseline)" if result.baseline
                                           else ""),
              f"- **Behaviours:** {', '.join(scenario.covers) or '-'}",
              f"- **Bridge:** `{bridge}`",
              f"- **Palace:** the {server} server",
              f"- **Recorded with:** palace-conformance {__version__}", ""]
    if result.failures:
        lines += ["## Failed checks", ""]
        for check in result.failures:
            where = f" (step `{check.step}`)" if check.step is not None else ""
            lines.append(f"- `{check.pointer}`{where}: {' '.join(check.message.split())}")
        lines.append("")
    # a failure seen against the real palace is replayed against it (the fake is the default)
    replay = f"palace-conformance replay {shlex.quote(shown)}" + (
        f" --server {server}" if server != "fake" else "")
    lines += ["## Replay", "",
              "Re-runs this scenario on " + " and ".join(transports) + " against a bridge and "
              "reports like `palace-conformance run` (exit 0 passed, 1 failed, 2 usage problem):",
              "", "```sh",
              f"{replay} --bridge {shlex.quote(bridge)}  # the bridge recorded here",
              f"{replay} --bridge reference    # the reference bridge",
              f"{replay} --bridge 'node host.mjs'  # any driver host (DRIVER.md)", "```", ""]
    lines += ["## Files", "",
              "| file | what |", "|---|---|",
              f"| `{SCENARIO_FILE}` | the fixture (secrets replaced by `<redacted-secret-N>`) |",
              f"| `{MANIFEST}` | what was run, against which bridge and server |",
              "| `result.json` | the result: every check record, step and effect |"]
    prefix = [f"{t}/" for t in transports] if len(transports) > 1 else [""]
    for p in prefix:
        lines += [f"| `{p}faults.json` | the fault plan the fake started with |",
                  f"| `{p}palace-state.json` | the seeded palace, before the run |",
                  f"| `{p}trace.json` | the normalised trace: steps, replies, effects, journal |",
                  f"| `{p}journal.jsonl` | the fake's raw wire journal |",
                  f"| `{p}host-stderr.txt` | what the host and bridge wrote to stderr |"]
    lines.append("")
    for transport in transports:
        where = f"`{transport}/`: " if len(transports) > 1 else ""
        lines += [f"## Serve the fake on its own ({transport})", "",
                  f"{where}From the bundle directory; the fixture's `${{TMP}}`, `${{FAKE_URL}}` "
                  "and `${FAKE_TOKEN}` are the shell variables below.", ""]
        if len(transports) > 1:
            lines += [f"```sh\ncd {transport}\n```", ""]
        lines += [*_fake_recipe(scenario, transport, redactor), ""]
        steps = scenario.steps_for(transport)
        lines += [f"The runner then drives the bridge through {len(steps)} step(s):", ""]
        lines += [f"{i}. {_step_line(step)}" for i, step in enumerate(steps, 1)]
        lines.append("")
        if any(s.op == "server" for s in steps):
            lines += ["`server` steps act on the fake during the run (kill it, or arm faults "
                      "through its `/_fake` control API): `faults.json` holds only the faults "
                      "armed from the start.", ""]
    return "\n".join(lines)


def _transport_files(writer: _Writer, prefix: str, scenario: Scenario,
                     result: ScenarioResult | None, transport: str,
                     secrets: Iterable[str]) -> None:
    early = StartParts.of(scenario, {})
    writer.json(f"{prefix}faults.json", early.faults.for_transport(transport).to_json())
    writer.json(f"{prefix}palace-state.json", initial_state(early.palace))
    if result is None:
        return
    trace = traces.build_trace(result, secrets, fixture=scenario.raw)
    writer.text(f"{prefix}trace.json", traces.dumps(trace))
    writer.text(f"{prefix}journal.jsonl", "".join(
        json.dumps(record, ensure_ascii=False, default=str) + "\n" for record in result.journal))
    writer.text(f"{prefix}host-stderr.txt", result.host_stderr)
    if prefix:
        writer.json(f"{prefix}result.json", result.to_json())


def write_bundle(run: RunResult, result: ScenarioResult, scenario: Scenario, target: Path, *,
                 bridge: str, shown: str | None = None,
                 environ: Mapping[str, str] | None = None) -> Path:
    """One bundle for ``result`` under ``target`` (replaced if it exists); returns its path.

    ``bridge`` is the ``--bridge`` spec the run used (recorded and shown; replay runs only the
    bridge its user names); ``shown`` is how the
    README names the bundle's path (default: the path itself)."""
    secrets = [*scenario_secrets(scenario.raw), *environment_secrets(environ)]
    redactor = Redactor(secrets, shapes=True)
    root = target / bundle_name(result.scenario, result.transport)
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    writer = _Writer(root, redactor)
    transports = (tuple(t for t in TRANSPORTS if t in scenario.transports)
                  if result.transport == PARITY else (result.transport,))
    try:
        writer.json(SCENARIO_FILE, dict(scenario.raw))
        writer.json("result.json", result.to_json())
        if result.transport == PARITY:
            for transport in transports:
                _transport_files(writer, f"{transport}/", scenario,
                                 run.by_id(result.scenario, transport), transport, secrets)
        else:
            _transport_files(writer, "", scenario, result, result.transport, secrets)
        manifest = {"format": BUNDLE_FORMAT, "scenario": result.scenario,
                    "transport": result.transport, "transports": list(transports),
                    "status": result.status, "reason": result.reason, "level": result.level,
                    "covers": list(result.covers), "bridge": bridge, "server": run.server,
                    "host": run.host.to_json(), "started_at": run.started_at,
                    "palace_conformance": __version__,
                    "redacted_secrets": len(redactor.markers)}
        writer.json(MANIFEST, manifest)
        writer.text("README.md", _readme(scenario, result, bridge, run.server, shown or str(root),
                                         transports, redactor))
        writer.check()
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return root


def shown_path(path: Path) -> str:
    """How a report names ``path``: relative to the working directory when under it."""
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return str(path)
    return relative if not relative.startswith("..") else str(path.resolve())


def write_bundles(run: RunResult, scenarios: Mapping[str, Scenario], target: Path, *,
                  bridge: str, environ: Mapping[str, str] | None = None) -> list[Path]:
    """A bundle for every failing result (known failures included) whose scenario is known."""
    written = []
    for result in run.results:
        scenario = scenarios.get(result.scenario)
        if result.status not in FAILURE_STATUSES or scenario is None:
            continue
        root = target / bundle_name(result.scenario, result.transport)
        written.append(write_bundle(run, result, scenario, target, bridge=bridge,
                                    shown=shown_path(root), environ=environ))
    return written
