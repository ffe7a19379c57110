"""The bridges x scenarios matrix: one status per (scenario, bridge, transport), grouped by area.

Built only from :class:`~.results.RunResult` objects (a run made now or a saved ``run --json``),
so the published matrix can be regenerated from files. A cell is one of
:data:`CELL_STATUSES`; a failing cell carries its failing checks and the normalised trace of the
run (the drill-down). Behaviours roll up from the scenarios that cover them: a behaviour fails
for a bridge when one of its cells failed there on a check that cites it (an expectation's
``cites``, else every behaviour of the scenario: verdict/citations.py). Markdown is for the
docs and pull requests; the HTML page is one self-contained file (inline CSS and script, no
network) whose cells carry ``data-scenario``/``data-bridge``/``data-transport``/``data-status``
so tools and tests can read it.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html.parser import HTMLParser
from importlib import resources
from typing import Any

from palace_conformance.contract import TRANSPORTS
from palace_conformance.runner.compare.sources import Source
from palace_conformance.runner.reports.tally import STATUS_WORDS, Tally
from palace_conformance.runner.results import (
    FAILED,
    FAILURE_STATUSES,
    FROM_OBSERVATION,
    KNOWN_FAILURE,
    NOT_APPLICABLE,
    NOT_TESTABLE,
    PARITY,
    PASSED,
    ScenarioResult,
)
from palace_conformance.scenarios.model import AREAS

ABSENT = "absent"  # the scenario has no such run (it does not run on that transport, or was
# not selected for that bridge)
CELL_STATUSES = (PASSED, FAILED, KNOWN_FAILURE, NOT_APPLICABLE, NOT_TESTABLE, ABSENT)
LABELS = {PASSED: "pass", FAILED: "FAIL", KNOWN_FAILURE: "known failure",
          NOT_APPLICABLE: "n/a", NOT_TESTABLE: "not testable", ABSENT: "—"}
#: a failing cell: its drill-down shows why
RED = frozenset({FAILED, KNOWN_FAILURE, NOT_TESTABLE})
COLUMNS = (*TRANSPORTS, PARITY)
STDERR_TAIL = 20


def cell_status(result: ScenarioResult | None) -> str:
    if result is None:
        return ABSENT
    if result.status in FAILURE_STATUSES and result.baseline is not None:
        return KNOWN_FAILURE
    return result.status


@dataclass
class Cell:
    scenario: str
    bridge: str
    bridge_index: int
    transport: str
    status: str
    result: ScenarioResult | None = None

    @property
    def key(self) -> str:
        """Unique and stable within a page: ids must not depend on a label's punctuation."""
        return f"{self.scenario}--b{self.bridge_index}--{self.transport}"

    @property
    def failures(self) -> list[tuple[str, str]]:
        """(pointer, message) of every failing check."""
        if self.result is None:
            return []
        found = [(c.pointer, c.message) for c in self.result.failures]
        if not found and self.result.reason:
            found = [("/", self.result.reason)]
        return found


@dataclass
class Row:
    scenario: str
    title: str
    covers: tuple[str, ...]
    area: str
    cells: dict[tuple[int, str], Cell] = field(default_factory=dict)
    subject: str = "bridge"  # "fake": a self-test row, never counted as the bridge's

    @property
    def red(self) -> bool:
        return any(c.status in RED for c in self.cells.values())


@dataclass
class Column:
    """One bridge: its label and what its host said about itself."""

    label: str
    origin: str
    bridge: str
    runtime: str
    capabilities: tuple[str, ...]
    stale_baseline: tuple[str, ...] = ()  # baseline entries that no longer hold
    detected: bool = False  # the capabilities were detected by observation (no one stated them)

    def shown_capabilities(self) -> str:
        shown = " ".join(self.capabilities) or "—"
        return f"{shown} (detected)" if self.detected else shown


@dataclass
class Matrix:
    columns: list[Column]
    transports: tuple[str, ...]
    rows: list[Row]
    behaviours: dict[str, str] = field(default_factory=dict)
    areas: dict[str, str] = field(default_factory=dict)
    generated: str = ""
    command: str = ""

    def by_area(self) -> list[tuple[str, list[Row]]]:
        order = {a: i for i, a in enumerate(AREAS)}
        groups: dict[str, list[Row]] = {}
        for row in self.rows:
            groups.setdefault(row.area, []).append(row)
        return sorted(groups.items(), key=lambda g: (order.get(g[0], len(order)), g[0]))

    def counts(self, index: int, subject: str = "bridge") -> dict[str, int]:
        """A column's results per status: the bridge's (``subject="fake"``: the self-tests'),
        as ``run`` counts them (reports/tally.py)."""
        counts = dict.fromkeys(CELL_STATUSES, 0)
        for row in self.rows:
            if row.subject != subject:
                continue
            for (bridge, _), cell in row.cells.items():
                if bridge == index:
                    counts[cell.status] += 1
        return counts

    def tally(self, index: int, subject: str = "bridge") -> Tally:
        """A column's scenarios, results and statuses in the words every report uses."""
        counts = self.counts(index, subject)
        ran = [row for row in self.rows if row.subject == subject
               and any(c.status != ABSENT for (b, _), c in row.cells.items() if b == index)]
        return Tally(len(ran), sum(n for s, n in counts.items() if s != ABSENT),
                     {s: n for s, n in counts.items() if s != ABSENT})

    def behaviour_ids(self) -> list[str]:
        """Every behaviour a row covers, in checklist order (unknown ids last, sorted)."""
        covered = {b for row in self.rows for b in row.covers}
        known = [b for b in self.behaviours if b in covered]
        return known + sorted(covered - set(known))

    def behaviour_status(self, index: int, behaviour: str) -> str:
        """A behaviour's roll-up for one bridge over every cell of the rows that cover it."""
        seen = {_status_for(cell, behaviour) for row in self.rows if behaviour in row.covers
                for (bridge, _), cell in row.cells.items() if bridge == index}
        for status in (FAILED, NOT_TESTABLE, KNOWN_FAILURE, PASSED, NOT_APPLICABLE):
            if status in seen:
                return status
        return ABSENT

    def red_cells(self) -> list[Cell]:
        return [cell for _, rows in self.by_area() for row in rows
                for cell in row.cells.values() if cell.status in RED]


def _status_for(cell: Cell, behaviour: str) -> str:
    """A cell's status as far as ``behaviour`` goes: a failed cell fails it only when a failing
    check cites it (a check citing no behaviour stands for all its scenario covers); when every
    failing check cites another behaviour, this one's checks passed there."""
    if cell.status not in (FAILED, KNOWN_FAILURE) or cell.result is None:
        return cell.status
    failures = cell.result.failures
    if not failures:
        return cell.status
    if any(behaviour in (check.covers or cell.result.covers) for check in failures):
        return cell.status
    return PASSED


def _behaviour_titles() -> tuple[dict[str, str], dict[str, str]]:
    try:
        from palace_conformance.resources import fixtures_dir
        data = json.loads((fixtures_dir() / "behaviours.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}, {}
    titles = {b["id"]: b["title"] for b in data.get("behaviours", ())
              if isinstance(b, dict) and "id" in b and "title" in b}
    return titles, dict(data.get("areas") or {})


def build(sources: Sequence[Source], command: str = "",
          behaviours: Mapping[str, str] | None = None,
          areas: Mapping[str, str] | None = None) -> Matrix:
    """The matrix of every scenario any source ran, in catalogue area order."""
    if behaviours is None or areas is None:
        found_behaviours, found_areas = _behaviour_titles()
        behaviours = found_behaviours if behaviours is None else behaviours
        areas = found_areas if areas is None else areas
    columns = [Column(s.label, s.origin, s.run.host.bridge, s.run.host.runtime,
                      tuple(s.capabilities), tuple(s.run.stale_baseline),
                      s.run.host.capabilities_source == FROM_OBSERVATION) for s in sources]
    present = {r.transport for s in sources for r in s.run.results}
    transports = tuple(t for t in COLUMNS if t in present)
    rows: dict[str, Row] = {}
    for source in sources:
        for result in source.run.results:
            if result.scenario not in rows:
                rows[result.scenario] = Row(result.scenario, result.title, tuple(result.covers),
                                            result.scenario.split(".", 1)[0],
                                            subject=result.subject)
    for row in rows.values():
        for index, source in enumerate(sources):
            for transport in transports:
                found = source.run.by_id(row.scenario, transport)
                row.cells[(index, transport)] = Cell(row.scenario, source.label, index,
                                                     transport, cell_status(found), found)
    ordered = sorted(rows.values(), key=lambda r: r.scenario)
    return Matrix(columns, transports, ordered, dict(behaviours), dict(areas),
                  generated=datetime.now(UTC).isoformat(timespec="seconds"), command=command)


def trace_lines(result: ScenarioResult | None) -> list[tuple[str, str]]:
    """The run's normalised outcome as (step key, one line of JSON) pairs: the drill-down's
    trace. A parity result holds one outcome per transport; its keys say which."""
    if result is None or not isinstance(result.outcome, dict):
        return []
    outcomes = ({"": result.outcome} if "steps" in result.outcome
                else {f"{t} ": o for t, o in result.outcome.items() if isinstance(o, dict)})
    lines = []
    for prefix, outcome in outcomes.items():
        for key, step in (outcome.get("steps") or {}).items():
            if isinstance(step, dict) and isinstance(step.get("effects"), list):
                step = {**step, "effects": _runs(step["effects"])}
            text = json.dumps(step, ensure_ascii=False, sort_keys=True, default=str)
            lines.append((str(key), f"{prefix}{key}: {text}"))
    return lines


def _runs(effects: list[Any]) -> list[Any]:
    """Repeated effect kinds folded for reading: 47 ``tool_registered`` become one entry
    ``"tool_registered x47"``."""
    out: list[Any] = []
    count = 0
    for index, effect in enumerate(effects):
        count += 1
        if index + 1 < len(effects) and effects[index + 1] == effect:
            continue
        out.append(f"{effect} x{count}" if count > 1 else effect)
        count = 0
    return out


def trace_text(result: ScenarioResult | None) -> str:
    """The trace as plain text, one step per line."""
    return "\n".join(line for _, line in trace_lines(result))


# -- Markdown -----------------------------------------------------------------------------------


def _md(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _md_status(status: str) -> str:
    label = LABELS[status]
    return f"**{label}**" if status in (FAILED, NOT_TESTABLE) else label


def _area_title(matrix: Matrix, area: str) -> str:
    described = matrix.areas.get(area.upper())
    return f"{area.upper()}: {described}" if described else area.upper()


def render_markdown(matrix: Matrix, *, details: bool = True, limit: int = 300) -> str:
    """Bridges, behaviours, scenarios by area, then every failing cell with its checks."""
    out = ["# Conformance matrix", ""]
    if matrix.command:
        out += [f"Generated {matrix.generated} by `{matrix.command}`.", ""]
    out += ["## Bridges", "",
            "| bridge | host | capabilities | scenarios | results | "
            + " | ".join(words for _, words in STATUS_WORDS) + " | self-test results |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for index, column in enumerate(matrix.columns):
        bridge, fake = matrix.tally(index), matrix.tally(index, "fake")
        out.append(f"| `{_md(column.label)}` | {_md(column.bridge)} ({_md(column.runtime)}) | "
                   f"{column.shown_capabilities()} | {bridge.scenarios} | {bridge.results} | "
                   + " | ".join(str(bridge.statuses[s]) for s, _ in STATUS_WORDS)
                   + f" | {fake.results} |")
    out += ["", "A result is one scenario on one transport, or their parity; the self-tests "
            "(the fake's own scenarios, the FAKE rows) are counted apart, as `run` counts them "
            "(docs/runner.md, \"Counting\").", ""]
    for column in matrix.columns:
        out += [f"Baseline entry of `{_md(column.label)}` that no longer holds: {_md(line)}"
                for line in column.stale_baseline]
    if any(c.stale_baseline for c in matrix.columns):
        out.append("")
    labels = [f"`{_md(c.label)}`" for c in matrix.columns]
    out += ["## Behaviours", "", "| behaviour | " + " | ".join(labels) + " |",
            "|---|" + "---|" * len(labels)]
    for behaviour in matrix.behaviour_ids():
        title = matrix.behaviours.get(behaviour, "")
        cells = [_md_status(matrix.behaviour_status(i, behaviour))
                 for i in range(len(matrix.columns))]
        shown = f"{behaviour} {_md(_cut(title, 90))}" if title else behaviour
        out.append(f"| {shown} | " + " | ".join(cells) + " |")
    out += ["", "## Scenarios", ""]
    heads = [f"{_md(c.label)} {t}" for c in matrix.columns for t in matrix.transports]
    for area, rows in matrix.by_area():
        out += [f"### {_area_title(matrix, area)}", "",
                "| scenario | covers | " + " | ".join(heads) + " |",
                "|---|---|" + "---|" * len(heads)]
        for row in rows:
            cells = [_md_status(row.cells[(i, t)].status) for i in range(len(matrix.columns))
                     for t in matrix.transports]
            out.append(f"| `{row.scenario}` | {', '.join(row.covers)} | "
                       + " | ".join(cells) + " |")
        out.append("")
    red = matrix.red_cells()
    if details and red:
        out += ["## Failures", ""]
        for cell in red:
            covers = ", ".join(cell.result.covers) if cell.result else ""
            out += [f"### `{cell.scenario}` [{cell.transport}] on `{cell.bridge}`: "
                    f"{LABELS[cell.status]}", ""]
            if covers:
                out += [f"Covers {covers}.", ""]
            if cell.status == KNOWN_FAILURE and cell.result and cell.result.baseline:
                out += [f"Expected by the baseline: {_md(cell.result.baseline.reason)}", ""]
            out += [f"- `{pointer}`: {_md(_cut(message, limit))}"
                    for pointer, message in cell.failures]
            out.append("")
    return "\n".join(out)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


# -- HTML ---------------------------------------------------------------------------------------


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _inline(text: str) -> str:
    """The checklist's inline Markdown as HTML: escaped, then `code` and **bold** rendered (the
    page showed raw backticks). Nothing else: the titles use no other markup."""
    out = _e(text)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    return re.sub(r"\*\*([^*]+)\*\*", r"<b>\1</b>", out)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "x"


def _data(**attrs: str) -> str:
    return " ".join(f'data-{k.replace("_", "-")}="{_e(v)}"' for k, v in attrs.items())


def _cell_html(cell: Cell) -> str:
    attrs = _data(scenario=cell.scenario, bridge=cell.bridge, transport=cell.transport,
                  status=cell.status)
    label = _e(LABELS[cell.status])
    title = ""
    if cell.result is not None and cell.result.reason:
        title = f' title="{_e(_cut(cell.result.reason, 300))}"'
    body = (f'<a href="#drill-{_e(cell.key)}">{label}</a>' if cell.status in RED else label)
    return (f'<td id="cell-{_e(cell.key)}" class="cell s-{cell.status}" {attrs}{title}>'
            f"{body}</td>")


def _drill_html(cell: Cell) -> str:
    result = cell.result
    attrs = _data(scenario=cell.scenario, bridge=cell.bridge, transport=cell.transport,
                  status=cell.status, cell=f"cell-{cell.key}")
    parts = [f'<details class="drill s-{cell.status}" id="drill-{_e(cell.key)}" {attrs}>',
             f'<summary><span class="badge s-{cell.status}">{_e(LABELS[cell.status])}</span> '
             f"<code>{_e(cell.scenario)}</code> [{_e(cell.transport)}] on "
             f"<b>{_e(cell.bridge)}</b></summary>", '<div class="drill-body">']
    if result is not None and result.covers:
        parts.append(f'<p class="covers">Covers {_e(", ".join(result.covers))}</p>')
    if cell.status == KNOWN_FAILURE and result is not None and result.baseline is not None:
        parts.append(f'<p class="baseline">Expected by the baseline: '
                     f"{_e(result.baseline.reason or result.baseline.source)}</p>")
    parts.append('<ol class="checks">')
    for pointer, message in cell.failures:
        parts.append(f'<li data-pointer="{_e(pointer)}"><code>{_e(pointer)}</code> '
                     f'<span class="msg">{_e(message)}</span></li>')
    parts.append("</ol>")
    trace = trace_lines(result)
    if trace:
        failing = {c.step for c in result.failures} if result is not None else set()
        parts.append('<div class="trace-label">Normalised trace, one step per line (ids, times '
                     "and paths masked; repeated effects folded as <code>kind xN</code>; the "
                     "steps of failing checks marked)</div>")
        shown = "".join(f'<mark data-step="{_e(key)}">{_e(line)}</mark>' if key in failing
                        else _e(line) + "\n" for key, line in trace)  # a mark is a block
        parts.append(f'<pre class="trace">{shown.rstrip()}</pre>')
    if result is not None and result.host_stderr.strip():
        tail = "\n".join(result.host_stderr.rstrip().splitlines()[-STDERR_TAIL:])
        parts.append(f'<div class="trace-label">Host stderr (last {STDERR_TAIL} lines)</div>')
        parts.append(f'<pre class="stderr">{_e(tail)}</pre>')
    parts.append("</div></details>")
    return "\n".join(parts)


def _bridges_html(matrix: Matrix) -> str:
    rows = []
    for index, column in enumerate(matrix.columns):
        counts = matrix.counts(index)
        tallies = "".join(f'<td class="num{f" s-{s}" if counts[s] else ""}" data-count="{s}">'
                          f"{counts[s]}</td>"
                          for s in (PASSED, FAILED, KNOWN_FAILURE, NOT_APPLICABLE, NOT_TESTABLE))
        rows.append(f'<tr {_data(bridge=column.label)}><th><code>{_e(column.label)}</code></th>'
                    f"<td>{_e(column.bridge)}<div class=\"sub\">{_e(column.runtime)}</div></td>"
                    f"<td>{_e(column.shown_capabilities())}</td>{tallies}</tr>")
    heads = "".join(f'<th class="s-{s}">{_e(LABELS[s])}</th>'
                    for s in (PASSED, FAILED, KNOWN_FAILURE, NOT_APPLICABLE, NOT_TESTABLE))
    return ('<table class="bridges"><thead><tr><th>bridge</th><th>host</th><th>capabilities'
            f"</th>{heads}</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def _behaviours_html(matrix: Matrix) -> str:
    heads = "".join(f"<th><code>{_e(c.label)}</code></th>" for c in matrix.columns)
    rows = []
    for behaviour in matrix.behaviour_ids():
        cells = []
        for index, column in enumerate(matrix.columns):
            status = matrix.behaviour_status(index, behaviour)
            cells.append(f'<td class="cell s-{status}" '
                         f"{_data(behaviour=behaviour, bridge=column.label, status=status)}>"
                         f"{_e(LABELS[status])}</td>")
        title = matrix.behaviours.get(behaviour, "")
        rows.append(f'<tr {_data(behaviour=behaviour)}><th><b>{_e(behaviour)}</b> '
                    f'<span class="sub">{_inline(title)}</span></th>{"".join(cells)}</tr>')
    return (f'<table class="behaviours"><thead><tr><th>behaviour</th>{heads}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table>")


def _area_html(matrix: Matrix, area: str, rows: Sequence[Row]) -> str:
    n = len(matrix.transports)
    top = "".join(f'<th colspan="{n}" class="group"><code>{_e(c.label)}</code></th>'
                  for c in matrix.columns)
    sub = "".join(f'<th class="tr">{_e(t)}</th>' for _ in matrix.columns
                  for t in matrix.transports)
    body = []
    drills = []
    for row in rows:
        cells = [row.cells[(i, t)] for i in range(len(matrix.columns)) for t in matrix.transports]
        covers = " ".join(f'<span class="bid">{_e(b)}</span>' for b in row.covers)
        body.append(f'<tr class="row{" red" if row.red else ""}" '
                    f"{_data(scenario=row.scenario, area=area)}>"
                    f'<th class="sid"><code>{_e(row.scenario)}</code> <span class="covers">'
                    f'{covers}</span><div class="sub">{_e(row.title)}</div></th>'
                    + "".join(_cell_html(c) for c in cells) + "</tr>")
        drills += [_drill_html(c) for c in cells if c.status in RED]
    drill_block = (f'<div class="drills"><h3>Why the red cells are red</h3>{"".join(drills)}'
                   "</div>" if drills else "")
    return (f'<section class="area" id="area-{_e(_slug(area))}" {_data(area=area)}>'
            f"<h2>{_e(_area_title(matrix, area))}</h2>"
            f'<table class="matrix"><thead><tr><th rowspan="2">scenario, behaviours covered'
            f"</th>{top}</tr><tr>{sub}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>{drill_block}</section>")


def _template() -> str:
    return (resources.files("palace_conformance.runner") / "templates" / "matrix.html").read_text(
        encoding="utf-8")


def render_html(matrix: Matrix, title: str = "palace-conformance matrix") -> str:
    """One self-contained page: no external stylesheet, script, font or image."""
    legend = "".join(f'<span class="badge s-{s}">{_e(LABELS[s])}</span>'
                     for s in CELL_STATUSES)
    meta = f"Generated {_e(matrix.generated)}"
    if matrix.command:
        meta += f" by <code>{_e(matrix.command)}</code>"
    stale = [f'<li {_data(bridge=c.label)}><code>{_e(c.label)}</code>: {_e(line)}</li>'
             for c in matrix.columns for line in c.stale_baseline]
    body = [f'<p class="meta">{meta}</p>', _bridges_html(matrix),
            (f'<p>Baseline entries that no longer hold:</p><ul class="stale">{"".join(stale)}'
             "</ul>" if stale else ""),
            f'<div class="toolbar"><label><input type="checkbox" id="only-red"> only rows with a '
            f'red cell</label><span class="legend">{legend}</span></div>',
            '<nav class="areas">' + " ".join(
                f'<a href="#area-{_e(_slug(a))}">{_e(a.upper())}</a>'
                for a, _ in matrix.by_area()) + ' <a href="#behaviours">behaviours</a></nav>']
    body += [_area_html(matrix, area, rows) for area, rows in matrix.by_area()]
    body.append(f'<section id="behaviours"><h2>Behaviours</h2><p class="sub">A behaviour is red '
                f"for a bridge when any scenario covering it is red there.</p>"
                f"{_behaviours_html(matrix)}</section>")
    fill = {"TITLE": _e(title), "BODY": "\n".join(body)}
    return re.sub(r"@@([A-Z]+)@@", lambda m: fill.get(m.group(1), m.group(0)), _template())


def statuses(matrix: Matrix) -> Iterable[tuple[str, str, str, str]]:
    """(scenario, bridge, transport, status) for every cell: what a test or tool compares."""
    for row in matrix.rows:
        for cell in row.cells.values():
            yield cell.scenario, cell.bridge, cell.transport, cell.status


class _CellReader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.cells: list[dict[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if "data-status" in found:
            self.cells.append({"tag": tag, **found})


def read_html_cells(text: str) -> list[dict[str, str]]:
    """Every element of a matrix page that carries ``data-status`` (cells, behaviour cells,
    drill-downs), with its attributes plus ``tag``: how a tool or test reads a saved page."""
    reader = _CellReader()
    reader.feed(text)
    reader.close()
    return reader.cells
