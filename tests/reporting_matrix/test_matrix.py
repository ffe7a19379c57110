"""The bridges x scenarios matrix from synthetic results: statuses, roll-ups, Markdown, HTML."""

from __future__ import annotations

import re
from dataclasses import replace

from palace_conformance.runner.compare.matrix import (
    ABSENT,
    KNOWN_FAILURE,
    build,
    read_html_cells,
    render_html,
    render_markdown,
    statuses,
)
from palace_conformance.runner.results import BaselineMark

from .support import eager_steps, failing, not_applicable, result, source

WAKE = "wake.fresh-session.inject-once"
TOOL = "tool.register.schemas-passed-through"
LIFE = "life.transport.default-stdio-child"
BEHAVIOURS = {"LIFE-01": "Default transport is stdio", "TOOL-01": "Schemas unchanged",
              "WAKE-01": "Wake-up once", "WAKE-02": "One-shot"}
AREAS = {"LIFE": "transport choice", "TOOL": "tool registration", "WAKE": "wake-up"}


def sources():
    wake_fail = failing(WAKE, "stdio", "/steps/4/expect/effects/0",
                        'effects absent {"kind": "injected"}: record #0 should not be there',
                        step_key="second-prompt")
    wake_fail = replace(wake_fail, covers=("WAKE-01", "WAKE-02"))  # as the judge cites them
    reference = source(
        "reference",
        result(WAKE, "stdio", eager_steps(), covers=("WAKE-01", "WAKE-02")),
        result(WAKE, "http", eager_steps(), covers=("WAKE-01", "WAKE-02")),
        result(TOOL, "stdio", eager_steps(), covers=("TOOL-01",)),
        result(LIFE, "stdio", eager_steps(), covers=("LIFE-01",)))
    other = source(
        "pi-mcp:wrapped",
        result(WAKE, "stdio", eager_steps(), status="failed", checks=[wake_fail],
               covers=("WAKE-01", "WAKE-02"), reason="/steps/4/expect/effects/0: absent"),
        not_applicable(WAKE, "http"),
        result(TOOL, "stdio", eager_steps(), status="failed", covers=("TOOL-01",),
               checks=[replace(failing(TOOL, "stdio", "/expect/tools/registered",
                                       "schema changed"), covers=("TOOL-01",))],
               baseline=BaselineMark("fail", "upstream bug #12", "baseline.json")),
        result(LIFE, "stdio", [], status="not_testable", covers=("LIFE-01",),
               checks=[failing(LIFE, "stdio", "/setup", "Not testable: host did not start")]),
        caps=("stdio", "http"))
    return [reference, other]


def matrix():
    return build(sources(), command="palace-conformance matrix --from a --from b",
                 behaviours=BEHAVIOURS, areas=AREAS)


def test_cells_carry_every_status() -> None:
    found = {(s, b, t): status for s, b, t, status in statuses(matrix())}
    assert found[(WAKE, "reference", "stdio")] == "passed"
    assert found[(WAKE, "pi-mcp:wrapped", "stdio")] == "failed"
    assert found[(WAKE, "pi-mcp:wrapped", "http")] == "not_applicable"
    assert found[(TOOL, "pi-mcp:wrapped", "stdio")] == KNOWN_FAILURE
    assert found[(LIFE, "pi-mcp:wrapped", "stdio")] == "not_testable"
    assert found[(TOOL, "reference", "http")] == ABSENT  # never ran on http
    assert {t for _, _, t, _ in statuses(matrix())} == {"stdio", "http"}  # no parity results


def test_rows_are_grouped_by_area_in_catalogue_order() -> None:
    assert [area for area, _ in matrix().by_area()] == ["life", "tool", "wake"]


def test_behaviours_roll_up_from_the_scenarios_covering_them() -> None:
    built = matrix()
    assert built.behaviour_ids() == ["LIFE-01", "TOOL-01", "WAKE-01", "WAKE-02"]
    assert [built.behaviour_status(0, b) for b in built.behaviour_ids()] == ["passed"] * 4
    assert [built.behaviour_status(1, b) for b in built.behaviour_ids()] == [
        "not_testable", KNOWN_FAILURE, "failed", "failed"]
    assert built.counts(1) == {"passed": 0, "failed": 1, KNOWN_FAILURE: 1, "not_applicable": 1,
                               "not_testable": 1, ABSENT: 2}


def test_a_behaviour_fails_only_on_a_failing_check_that_cites_it() -> None:
    """A scenario covering WAKE-01 and WAKE-02 failed on a check citing WAKE-02 alone: WAKE-01's
    checks passed there, so its roll-up is pass; WAKE-02 fails."""
    only_02 = replace(failing(WAKE, "stdio", "/steps/4/expect/effects/0", "injected twice"),
                      covers=("WAKE-02",))
    bridge = source("b", result(WAKE, "stdio", eager_steps(), status="failed", checks=[only_02],
                                covers=("WAKE-01", "WAKE-02")))
    built = build([bridge], behaviours=BEHAVIOURS, areas=AREAS)
    assert built.behaviour_status(0, "WAKE-01") == "passed"
    assert built.behaviour_status(0, "WAKE-02") == "failed"
    uncited = replace(only_02, covers=())  # a check citing nothing stands for all the covers
    bridge = source("b", result(WAKE, "stdio", eager_steps(), status="failed", checks=[uncited],
                                covers=("WAKE-01", "WAKE-02")))
    built = build([bridge], behaviours=BEHAVIOURS, areas=AREAS)
    assert built.behaviour_status(0, "WAKE-01") == "failed"


def test_markdown_lists_bridges_behaviours_scenarios_and_failures() -> None:
    text = render_markdown(matrix())
    # scenarios, results, passed, failed, known failures, not testable, n/a, self-tests
    assert ("| `pi-mcp:wrapped` | pi-mcp:wrapped (test 1) | stdio http | 3 | 4 | 0 | 1 | 1 | 1 "
            "| 1 | 0 |") in text
    assert "| WAKE-02 One-shot | pass | **FAIL** |" in text
    assert "### WAKE: wake-up" in text
    assert (f"| `{WAKE}` | WAKE-01, WAKE-02 | pass | pass | **FAIL** | n/a |") in text
    assert f"### `{WAKE}` [stdio] on `pi-mcp:wrapped`: FAIL" in text
    assert "- `/steps/4/expect/effects/0`: effects absent" in text
    assert "Expected by the baseline: upstream bug #12" in text
    assert text.index("### LIFE") < text.index("### TOOL") < text.index("### WAKE")


def test_html_cells_are_addressable_and_red_cells_drill_down() -> None:
    page = render_html(matrix())
    cells = read_html_cells(page)
    table = {(c["data-scenario"], c["data-bridge"], c["data-transport"]): c
             for c in cells if c["tag"] == "td" and "data-scenario" in c}
    failed = table[(WAKE, "pi-mcp:wrapped", "stdio")]
    assert failed["data-status"] == "failed"
    assert table[(TOOL, "pi-mcp:wrapped", "stdio")]["data-status"] == KNOWN_FAILURE
    assert table[(WAKE, "pi-mcp:wrapped", "http")]["data-status"] == "not_applicable"
    drills = {c["data-cell"]: c for c in cells if c["tag"] == "details"}
    assert set(drills) == {f"cell-{WAKE}--b1--stdio", f"cell-{TOOL}--b1--stdio",
                           f"cell-{LIFE}--b1--stdio"}  # exactly the red cells
    assert failed["id"] in drills
    drill = page[page.index(f'id="drill-{WAKE}--b1--stdio"'):]
    drill = drill[:drill.index("</details>")]
    assert "record #0 should not be there" in drill
    assert '<mark data-step="second-prompt">' in drill  # the failing step, marked in the trace
    assert "${TMP}" in drill and "/tmp/pc-run-a" not in drill  # the normalised trace
    behaviour = {(c["data-behaviour"], c["data-bridge"]): c["data-status"] for c in cells
                 if "data-behaviour" in c and "data-status" in c}
    assert behaviour[("WAKE-01", "pi-mcp:wrapped")] == "failed"


def test_html_is_self_contained_and_escapes_what_it_shows() -> None:
    hostile = source("<b>x</b>", result(WAKE, "stdio", eager_steps(), status="failed",
                                        checks=[failing(WAKE, "stdio", "/x",
                                                        "<script>alert(1)</script>")],
                                        title="<img src=x onerror=alert(1)>"))
    page = render_html(build([hostile], behaviours=BEHAVIOURS, areas=AREAS))
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)" in page
    assert "<img src=x" not in page and "<b>x</b>" not in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<link" not in page and "@import" not in page and "url(" not in page
    assert page.count("<script>") == 1  # the page's own inline script, nothing else
    assert "default-src 'none'" in page  # and the browser is told to load nothing


def test_behaviour_titles_render_their_inline_markdown_escaped() -> None:
    titles = {**BEHAVIOURS, "LIFE-01": "Default is a `mempalace-mcp` child; **never** `<b>` raw"}
    page = render_html(build(sources(), behaviours=titles, areas=AREAS))
    assert "<code>mempalace-mcp</code>" in page and "<b>never</b>" in page
    assert "`mempalace-mcp`" not in page  # no raw Markdown left
    assert "<code>&lt;b&gt;</code>" in page  # markup inside a code span stays text


def test_detected_capabilities_are_marked_as_detected() -> None:
    found = sources()
    found[1].run.host.capabilities_source = "observation"  # nobody stated them: observed
    built = build(found, behaviours=BEHAVIOURS, areas=AREAS)
    markdown = render_markdown(built)
    assert "| stdio http (detected) |" in markdown
    assert "| stdio http wakeup feeding" in markdown  # the reference's own: no mark
    assert markdown.count("(detected)") == 1
    assert "<td>stdio http (detected)</td>" in render_html(built)
