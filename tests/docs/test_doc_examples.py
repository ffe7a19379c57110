"""Every command the Markdown documents show in a shell block is run, in a temp dir with a temp
HOME, and exits as documented; the few that cannot run as written are in explicit tables
(doc_commands.py), each with a reason. A wrong command is fixed in its document, not here."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from .doc_commands import (
    EXPECTED_STATUS,
    KIT_PROGRAMS,
    REPO,
    REWRITTEN,
    SKIPPED,
    SKIPPED_SECTIONS,
    DocCommand,
    commands_of,
    documented_commands,
    documents,
    fenced_blocks,
    runs_a_kit_program,
    skip_reason,
    strip_comment,
)

BIN = Path(sys.executable).parent
COMMAND_DEADLINE_S = 90


def runnable_blocks() -> dict[str, list[DocCommand]]:
    """The commands that run, grouped by their block (a block's commands share one dir)."""
    blocks: dict[str, list[DocCommand]] = defaultdict(list)
    for command in documented_commands():
        if skip_reason(command) is None:
            blocks[f"{command.doc}:{command.block}"].append(command)
    return dict(blocks)


def counts() -> dict[str, int]:
    """How many documented commands were found, run (rewritten ones among them) and skipped."""
    commands = documented_commands()
    skipped = [c for c in commands if skip_reason(c) is not None]
    return {"found": len(commands), "run": len(commands) - len(skipped),
            "rewritten": sum(c.text in REWRITTEN for c in commands if c not in skipped),
            "skipped": len(skipped), "kit": sum(runs_a_kit_program(c.text) for c in commands),
            "kit_run": sum(runs_a_kit_program(c.text) for c in commands if c not in skipped)}


def clean_env(home: Path) -> dict[str, str]:
    """The caller's env without the kit's knobs or pytest's; HOME and --lf records in ``home``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PALACE_", "MEMPALACE_", "PYTEST_"))}
    env.update(HOME=str(home), PATH=f"{BIN}{os.pathsep}{env.get('PATH', os.defpath)}",
               PALACE_CONFORMANCE_LAST_FAILED_DIR=str(home / "last-failed"))
    return env


def test_the_documents_show_kit_commands(record_property: pytest.RecordProperty) -> None:
    """The extraction finds the documents' commands (a broken parser would find none)."""
    commands = documented_commands()
    docs = {c.doc for c in commands}
    assert {"README.md", "docs/runner.md", "docs/baselines.md", "docs/drift.md"} <= docs
    assert sum(runs_a_kit_program(c.text) for c in commands) >= 40
    joined = [c.text for c in commands if c.doc == "docs/baselines.md"]
    assert joined[1].startswith("palace-conformance baseline update --from report.json")
    assert joined[1].endswith("--expires 2027-06-30")  # three lines, continuations joined
    tally = counts()
    record_property("documented_commands", tally)  # tests/conftest.py prints it in the summary
    assert tally["found"] == tally["run"] + tally["skipped"] and tally["run"] >= 25


def test_a_block_splits_into_its_commands() -> None:
    """Prompts, comments, continuations, open quotes and a synopsis's wrapped options."""
    block = ["# a comment line", "$ palace-conformance run \\", "    --select 'a.*'  # narrowed",
             "output of the run, not a command", "$ curl -d '{\"a\": 1,", '  "b": 2}\' # two lines',
             "$ palace-conformance fake faults # a # in 'quotes' is not a comment: '#x'",
             "$ palace-conformance profile init --bridge B", "      [--out FILE]"]
    assert commands_of(list(enumerate(block, start=1))) == [
        (2, "palace-conformance run --select 'a.*'"),
        (5, 'curl -d \'{"a": 1,\n"b": 2}\''),
        (7, "palace-conformance fake faults"),
        (8, "palace-conformance profile init --bridge B [--out FILE]")]
    assert strip_comment("echo '#not' \"# nor\" # yes") == "echo '#not' \"# nor\""


def test_no_command_hides_in_an_unlabelled_block() -> None:
    """A block of commands must say it is shell, or this test would never see it."""
    hidden = [f"{path.relative_to(REPO)}:{number}"
              for path in documents()
              for language, _, _, lines in fenced_blocks(path) if not language
              for number, text in lines
              if text.lstrip().startswith(("palace-conformance ", "palace-bridge "))]
    assert not hidden, f"label these blocks ```sh: {hidden}"


def test_every_table_entry_names_a_documented_command() -> None:
    """A stale skip, rewrite or status entry would hide nothing and mislead."""
    commands = documented_commands()
    texts = {c.text for c in commands}
    assert not [s for s in SKIPPED if not any(t.startswith(s) for t in texts)]
    assert not [r for r in REWRITTEN if r not in texts]
    assert not [r for r in REWRITTEN if any(c.text == r and skip_reason(c) for c in commands)]
    assert not [e for e in EXPECTED_STATUS if e not in texts]
    sections = {(c.doc, c.section) for c in commands}
    assert set(SKIPPED_SECTIONS) <= sections


def test_every_kit_command_is_run_or_skipped_with_a_reason() -> None:
    for command in documented_commands():
        reason = skip_reason(command)
        assert reason is None or len(reason) > 10, command.where


@pytest.mark.docs
@pytest.mark.timeout(300)
@pytest.mark.parametrize("block", sorted(runnable_blocks()))
def test_a_documented_block_runs_as_written(tmp_path: Path, block: str) -> None:
    """Each command of the block, in order, in one temp dir, exits as its document says."""
    env = clean_env(tmp_path)
    for command in runnable_blocks()[block]:
        script = REWRITTEN.get(command.text, (command.text, ""))[0].replace("{repo}", str(REPO))
        expected = EXPECTED_STATUS.get(command.text, (0, ""))[0]
        status, output = run_in_group(script, tmp_path, env)
        assert status is not None, (
            f"{command.where}: `{script}` still running after {COMMAND_DEADLINE_S} s\n{output}")
        assert status == expected, (
            f"{command.where}: `{script}` exited {status}, documented {expected}\n{output}")


def run_in_group(script: str, cwd: Path, env: dict[str, str]) -> tuple[int | None, str]:
    """(exit status, output tail) of ``script`` under bash; at the deadline its whole process
    group is killed (a server it started must not outlive the test) and the status is None."""
    process = subprocess.Popen(["bash", "-c", f"set -o pipefail\n{script}"], cwd=cwd, env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=COMMAND_DEADLINE_S)
        status: int | None = process.returncode
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        status = None
    return status, output[-4000:]


def subcommand_of(text: str) -> list[str]:
    """``palace-conformance fake ctl --url U status`` -> [palace-conformance, fake, ctl]."""
    words: list[str] = []
    for word in text.split():
        if not re.fullmatch(r"[a-z][a-z-]*", word):
            break
        words.append(word)
    return words


@pytest.mark.docs
def test_a_skipped_command_names_only_options_that_exist(tmp_path: Path) -> None:
    """A command that cannot run (a placeholder, a Node host, a synopsis) still names real
    options: each ``--flag`` it shows is in its sub-command's ``--help``."""
    env = clean_env(tmp_path)
    helps: dict[tuple[str, ...], str] = {}
    unknown = []
    for command in documented_commands():
        if skip_reason(command) is None or command.text.split()[0] not in KIT_PROGRAMS:
            continue
        program = tuple(subcommand_of(command.text))
        if program not in helps:
            helps[program] = subprocess.run([*program, "--help"], env=env, cwd=tmp_path,
                                            capture_output=True, text=True, timeout=60).stdout
        flags = {flag for flag in re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", command.text)}
        unknown += [f"{command.where}: {flag}" for flag in sorted(flags)
                    if not re.search(rf"{re.escape(flag)}(?![\w-])", helps[program])]
    assert len(helps) >= 8, helps.keys()
    assert not unknown, f"options the documents show but --help does not: {unknown}"
