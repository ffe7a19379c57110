"""The commands the Markdown documents show, read out of their fenced shell blocks, and the
explicit tables that say which of them a test may not run as written (and why)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHELL_FENCES = ("sh", "bash", "console", "shell")
KIT_PROGRAMS = ("palace-conformance", "palace-bridge", "palace-fake-mcp")
NOT_DOCS = {".git", ".venv", ".tox", "node_modules", ".pytest_cache", "build", "dist"}
FENCE = re.compile(r"^```(\S*)\s*$")


@dataclass(frozen=True)
class DocCommand:
    """One command line of a shell block: continuations joined, prompt and comment dropped."""

    doc: str       # path relative to the checkout, e.g. docs/runner.md
    line: int      # 1-based line of the command's first physical line
    section: str   # the nearest heading above it, e.g. "## Quick start"
    block: int     # 1-based line of the block's opening fence (commands of a block share a dir)
    text: str

    @property
    def where(self) -> str:
        return f"{self.doc}:{self.line}"


def documents() -> list[Path]:
    """Every Markdown file of the checkout (not of its venvs, caches or npm trees: a directory
    holding ``pyvenv.cfg`` is a venv whatever its name, such as .ci/run's ``.ci-mempalace``)."""
    venvs = {cfg.parent.relative_to(REPO).parts for cfg in REPO.glob("*/pyvenv.cfg")}
    return sorted(p for p in REPO.rglob("*.md")
                  if not NOT_DOCS.intersection(p.relative_to(REPO).parts[:-1])
                  and p.relative_to(REPO).parts[:1] not in venvs)


def strip_comment(line: str) -> str:
    """``line`` without a shell comment: a ``#`` at a word start, outside quotes."""
    quote = ""
    for index, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].rstrip()
    return line.rstrip()


def open_quote(text: str) -> bool:
    """Whether ``text`` ends inside a quoted string (the command goes on on the next line)."""
    quote = ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"":
            quote = char
    return bool(quote)


def fenced_blocks(path: Path) -> list[tuple[str, int, str, list[tuple[int, str]]]]:
    """(fence language, opening line, section, [(line number, text)]) of every fenced block."""
    blocks: list[tuple[str, int, str, list[tuple[int, str]]]] = []
    section = ""
    current: tuple[str, int, str, list[tuple[int, str]]] | None = None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        fence = FENCE.match(line)
        if current is None:
            if fence:
                current = (fence.group(1), number, section, [])
            elif line.startswith("#"):
                section = line.strip()
        elif fence and not fence.group(1):
            blocks.append(current)
            current = None
        else:
            current[3].append((number, line))
    return blocks


def commands_of(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Split a shell block into commands: ``$ `` prompts dropped (in a prompted block, a line
    without one is output), comments dropped, ``\\`` continuations, lines inside an open quote
    and a synopsis's indented ``[...]`` option lines joined to their command."""
    prompted = any(text.lstrip().startswith("$ ") for _, text in lines)
    found: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, raw in lines:
        text = raw.strip()
        if pending is None and found and raw[:1].isspace() and text.startswith("["):
            pending = found.pop()
        if pending is None:
            if prompted:
                if not text.startswith("$ "):
                    continue
                text = text[2:]
            if not strip_comment(text):
                continue
            pending = (number, strip_comment(text))
        else:
            glue = "\n" if open_quote(pending[1]) else " "
            pending = (pending[0], strip_comment(f"{pending[1]}{glue}{text}"))
        if pending[1].endswith("\\"):
            pending = (pending[0], pending[1][:-1].rstrip())
        elif not open_quote(pending[1]):
            found.append(pending)
            pending = None
    if pending is not None:
        found.append(pending)
    return found


def documented_commands() -> list[DocCommand]:
    """Every command of every shell block of every Markdown file, in document order."""
    found: list[DocCommand] = []
    for path in documents():
        doc = path.relative_to(REPO).as_posix()
        for language, opening, section, lines in fenced_blocks(path):
            if language in SHELL_FENCES:
                found += [DocCommand(doc, number, section, opening, text)
                          for number, text in commands_of(lines)]
    return found


def runs_a_kit_program(text: str) -> bool:
    """Whether the command starts one of the kit's programs (or its pytest plugin)."""
    words = re.split(r"[\s;&|()]+", text)
    return any(word in KIT_PROGRAMS for word in words) or "--palace-bridge" in text


# --- the tables ----------------------------------------------------------------------------

# Sections whose blocks another test runs as written.
SKIPPED_SECTIONS: dict[tuple[str, str], str] = {
    ("docs/fake.md", "## Reproduce a palace fault locally"):
        "tests/test_readme_recipes.py runs these recipes as written",
    ("docs/record.md", "## Record real traffic as a fixture"):
        "tests/record/test_round_trip.py runs this recipe as written (a heredoc included)",
    ("docs/record.md", "## Record an HTTP palace as a fixture"):
        "tests/record/test_round_trip.py runs this recipe as written (background servers)",
    ("reference/pi/README.md", "# `reference/pi`: the pi extension copy of the MemPalace bridge"):
        "tests/ts/test_pi_copy.py runs these in reference/pi (npm ci, typecheck, node --test, "
        "the bundle and the whole catalogue at seed level)",
}

# A command is skipped when its text starts with one of these (the fewest words that name it).
SKIPPED: dict[str, str] = {
    # installs, or runs the whole suite / CI
    "python3 -m venv": "installs the kit (pip install)",
    "pip install": "installs packages",
    "tox": "runs CI environments (installs them)",
    "python -m pytest": "the test suite itself",
    "ruff check": "lint; tox -e lint runs it on the checkout",
    "palace-conformance hosts install": "downloads Node and npm packages",
    "python benchmarks/": "a benchmark: minutes of timing, figures in BENCHMARKS.md",
    "python -m palace_conformance.real.provision": "installs the real mempalace (525 MB); "
                                                   "tests/real/test_provision.py tests it",
    "PALACE_REAL_PYTHON=": "needs the real mempalace installed (tox -e real-palace runs it)",
    "python -m mutation": "runs from the checkout with cosmic-ray installed (tox -e mutation, "
                          "tox -e mutation-sample); tests/mutation_tool tests its parts",
    # placeholders that name no real file, URL or tool
    "palace-conformance fake stdio [": "synopsis: FILE, SPEC placeholders",
    "palace-conformance fake http --port 0 --ready-file F": "synopsis; a long-running server",
    "palace-conformance fake install-shim DIR": "synopsis: DIR placeholder",
    "palace-conformance fake uninstall-shim DIR": "synopsis: DIR placeholder",
    "palace-conformance record --out DRAFT.json [": "synopsis: DRAFT.json, ID, COMMAND "
                                                    "placeholders",
    "palace-conformance record --upstream URL --out DRAFT.json [": "synopsis: URL, DRAFT.json, "
                                                                   "ID, N, MS placeholders",
    "palace-conformance fake ctl --url U": "synopsis: U names no running fake",
    "palace-conformance run --server real --real-python DIR/": "DIR placeholder: needs the real "
                                                               "mempalace (tests/real/"
                                                               "test_real_run.py runs it)",
    "palace-conformance run --server real --transport both": "needs the real mempalace and "
                                                             "minutes (tests/real/"
                                                             "test_real_run.py runs the path)",
    "palace-conformance fake journal [-f] FILE": "synopsis: FILE placeholder",
    "palace-conformance fake hold-lock": "runs until killed; P placeholder",
    "palace-conformance fake catalog --from-real": "needs the real mempalace and rewrites "
                                                   "fixtures/catalogue "
                                                   "(tests/real/test_truth_table_real.py "
                                                   "records it)",
    "palace-bridge call TOOL": "synopsis: TOOL placeholder",
    "palace-conformance run --profile tests/ts/extensions/realworld/NAME.profile.json": (
        "NAME placeholder: one test bridge each (tests/ts/test_realworld_verdicts.py runs them)"),
    "palace-conformance baseline update --from REPORT.json": "synopsis: REPORT.json placeholder",
    "palace-conformance profile init --bridge B": "synopsis: B, FILE placeholders",
    "palace-conformance profile init --bridge pi-extension:mempalace.ts": (
        "mempalace.ts is the reader's own extension (tests/profiles runs profile init)"),
    "palace-conformance run --profile mybridge.profile.json": (
        "the reader's own profile and extension (tests/ts/extensions/realworld runs profiles)"),
    "palace-conformance baseline update --from first.json": (
        "first.json is the reader's own run (tests/reporting/test_baseline.py tests the command)"),
    "curl -s localhost:$PORT": "needs a running fake http on $PORT (tests/fake covers the API)",
    "palace-conformance run --bridge 'node my-host.mjs'": "my-host.mjs is the reader's own host",
    "palace-conformance run --bridge pi-extension:./mempalace.ts":
        "./mempalace.ts is the reader's own extension",
    "palace-conformance run --bridge 'pi-extension:./mempalace.ts'":
        "./mempalace.ts is the reader's own extension",
    "palace-conformance diff --bridge reference --bridge pi-extension:./mempalace.ts":
        "./mempalace.ts is the reader's own extension",
    "pytest --palace-bridge='node host.mjs'": "host.mjs is the reader's own host",
    # needs the Node hosts (palace-conformance hosts install; the `ts` tests drive them)
    "palace-conformance run --bridge pi-extension:tests/ts/": "needs the Node hosts",
    "palace-conformance run --bridge pi-mcp": "needs the Node hosts",
    "palace-conformance diff --bridge reference --bridge pi-mcp": "needs the Node hosts",
    "palace-conformance matrix --bridge reference --bridge pi-mcp": "needs the Node hosts",
    # needs Node >= 22 and the official suite from npm (docs/official-suite.md)
    "palace-conformance official": "installs and runs the official MCP suite (Node, npm); "
                                   "tests/ts/test_official_suite.py and "
                                   "tests/real/test_official_server.py run it",
    # needs the real mempalace (about 525 MB; tox -e real-palace provisions it)
    "palace-conformance fidelity": "needs the real mempalace 3.11.0 (tox -e real-palace runs it; "
                                   "tests/fidelity covers its parts without it)",
    # failure bundles and long runs
    "palace-conformance replay report/bundles/": "needs a failure bundle; the reference passes "
                                                 "(tests/reporting/test_bundle.py replays one)",
    "palace-conformance selftest --full": "the whole catalogue per mutant (minutes)",
    "palace-conformance run --slow --report-dir": "waits out 30-600 s defaults "
                                                  "(tests/runner/test_slow_tier.py: the tier)",
    "PALACE_SM_PROFILE=long python -m pytest": "the state machine's long profile (minutes)",
    "PALACE_FUZZ_FRAMES=50000 python -m pytest": "the fuzz at five times CI's volume (minutes)",
}

NARROW = "--select 'life.handshake.*'"
HOST_STANDS_IN = "host.mjs is the reader's own host: the reference bridge, narrowed, stands in"

SAVED_RUNS = ("mkdir -p runs && palace-conformance run --select 'life.handshake.*' "
              "--select 'http.session.*' --json runs/reference.json >/dev/null 2>&1 && "
              "for name in pi-mcp pi-mcp-wrapped pi-mcp-adapter; "
              "do cp runs/reference.json runs/$name.json; done\n")
SAVED_RUNS_WHY = "the saved runs of Node-host bridges: copies of a reference run stand in"

# Exact command -> (what runs instead, why): narrowed or made to stay inside the temp dir.
REWRITTEN: dict[str, tuple[str, str]] = {
    "palace-conformance run": (f"palace-conformance run {NARROW}", "the whole catalogue"),
    "palace-conformance run path/to/scenarios/ --report-dir report/": (
        "palace-conformance run {repo}/fixtures/scenarios/life/ --report-dir report/ " + NARROW,
        "path/to/scenarios/ is a placeholder: the shipped life/ scenarios stand in"),
    "palace-conformance run --baseline conformance-baseline.json --markdown summary.md": (
        f"palace-conformance run --baseline conformance-baseline.json --markdown summary.md "
        f"{NARROW}", "the whole catalogue"),
    "palace-conformance run --last-failed": (
        f"palace-conformance run --last-failed {NARROW}",
        "nothing failed before it, so it runs the whole catalogue"),
    "palace-conformance run --slow --select 'knob.defaults.*' --slack-factor 2": (
        "palace-conformance run --slow --select 'knob.defaults.*' --slack-factor 2 --list",
        "the slow tier takes minutes: --list names what it would run, flags checked"),
    "palace-conformance run -x -q": (f"palace-conformance run -x -q {NARROW}",
                                     "the whole catalogue"),
    "palace-conformance run --json - | jq .counts": (
        f"palace-conformance run --json - {NARROW} | "
        "python -c 'import json, sys; print(json.load(sys.stdin)[\"counts\"])'",
        "the whole catalogue; python reads .counts, as jq may not be installed"),
    "palace-conformance run --shard 2/4 --json shard-2.json": (
        f"palace-conformance run --shard 2/4 --json shard-2.json {NARROW}", "a quarter catalogue"),
    "palace-conformance merge shard-*.json --junit junit.xml --html matrix.html": (
        "for k in 1 3 4; do palace-conformance run --shard $k/4 --json shard-$k.json "
        f"{NARROW} 2>/dev/null; done\n"
        "palace-conformance merge shard-*.json --junit junit.xml --html matrix.html",
        "merge wants every shard: the other three CI jobs run first"),
    "palace-conformance selftest": ("palace-conformance selftest --mutant http-404-retried-twice",
                                    "every mutant (minutes): one stands in"),
    "palace-conformance selftest --first-kill --jobs 4": (
        "palace-conformance selftest --first-kill --jobs 4 --mutant http-404-retried-twice",
        "every mutant (minutes): one stands in"),
    "palace-conformance selftest --json kill.json --markdown kill.md": (
        "palace-conformance selftest --json kill.json --markdown kill.md "
        "--mutant http-404-retried-twice", "every mutant (minutes): one stands in"),
    "palace-conformance run --bridge 'node host.mjs' --json report.json": (
        f"palace-conformance run --json report.json {NARROW}", HOST_STANDS_IN),
    "palace-conformance run --bridge 'node host.mjs' --baseline conformance-baseline.json": (
        f"palace-conformance run --baseline conformance-baseline.json {NARROW}", HOST_STANDS_IN),
    "palace-conformance hosts status [--json]": (
        "palace-conformance hosts status --json", "synopsis: [--json] is optional"),
    "palace-conformance fake install-shim /tmp/shim": (
        "palace-conformance fake install-shim shim", "keeps the shim inside the temp dir"),
    "PATH=/tmp/shim:$PATH PALACE_FAKE_JOURNAL=/tmp/j.jsonl "
    "PALACE_FAKE_FAULT='stall@mempalace_search' MEMPALACE_MCP_TIMEOUT_MS=500 "
    "palace-bridge call mempalace_search '{\"query\": \"x\"}'": (
        "PATH=$PWD/shim:$PATH PALACE_FAKE_JOURNAL=j.jsonl "
        "PALACE_FAKE_FAULT='stall@mempalace_search' MEMPALACE_MCP_TIMEOUT_MS=500 "
        "palace-bridge call mempalace_search '{\"query\": \"x\"}'",
        "keeps the shim and journal inside the temp dir"),
    "palace-bridge tools": (
        "palace-conformance fake install-shim shim >/dev/null && PATH=$PWD/shim:$PATH "
        "palace-bridge tools", "needs the reader's palace: the fake's shim stands in"),
    "palace-conformance diff --from ref=reference.json --from ts=ts-bridge.json --json drift.json "
    "--markdown drift.md": (
        SAVED_RUNS + "cp runs/reference.json reference.json && cp reference.json ts-bridge.json\n"
        "palace-conformance diff --from ref=reference.json --from ts=ts-bridge.json "
        "--json drift.json --markdown drift.md", SAVED_RUNS_WHY),
    "palace-conformance matrix --from runs/reference.json --from runs/pi-mcp.json "
    "--html matrix.html": (
        SAVED_RUNS + "palace-conformance matrix --from runs/reference.json "
        "--from runs/pi-mcp.json --html matrix.html", SAVED_RUNS_WHY),
    "palace-conformance matrix --from reference=runs/reference.json --from pi-mcp=runs/pi-mcp.json "
    "--from pi-mcp:wrapped=runs/pi-mcp-wrapped.json "
    "--from pi-mcp-adapter=runs/pi-mcp-adapter.json --html matrix.html": (
        SAVED_RUNS + "palace-conformance matrix --from reference=runs/reference.json "
        "--from pi-mcp=runs/pi-mcp.json --from pi-mcp:wrapped=runs/pi-mcp-wrapped.json "
        "--from pi-mcp-adapter=runs/pi-mcp-adapter.json --html matrix.html", SAVED_RUNS_WHY),
}

# Exact command -> (exit status the document promises, where it says so).
EXPECTED_STATUS: dict[str, tuple[int, str]] = {
    "PATH=/tmp/shim:$PATH PALACE_FAKE_JOURNAL=/tmp/j.jsonl "
    "PALACE_FAKE_FAULT='stall@mempalace_search' MEMPALACE_MCP_TIMEOUT_MS=500 "
    "palace-bridge call mempalace_search '{\"query\": \"x\"}'":
        (4, "docs/fake.md: a stalled search times out, exit status 4"),
    "palace-conformance hosts status [--json]": (
        1, "typescript-hosts.md: exit 1 when not installed (a fresh HOME has no hosts)"),
}


def skip_reason(command: DocCommand) -> str | None:
    """Why ``command`` is not run, or None when it is."""
    section = SKIPPED_SECTIONS.get((command.doc, command.section))
    if section is not None:
        return section
    for start, reason in SKIPPED.items():
        if command.text.startswith(start):
            return reason
    return None
