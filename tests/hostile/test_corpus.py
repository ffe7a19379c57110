"""Issue 25, item 6: the hostile-input regression corpus. Each case in ``cases/*.json`` is data:
the attack, the command that reads the input, how to build the input (a JSON value, raw text or
bytes, nesting, padding, or a FIFO, ``/dev/zero``, a folder, a path under a file, a 5,000-character
path, a missing file), and the safe outcome expected. Every case must end in a one-line refusal
(the expected exit status, no traceback, no line or output past its cap), within its time limit,
with nothing written outside the run and no secret of the environment in any output.

``python tests/hostile/test_corpus.py`` runs them all and prints the counts (cases, tracebacks,
hangs, escapes, leaks)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

HERE = Path(__file__).resolve().parent
CASES = sorted((HERE / "cases").glob("*.json"))
CLI = str(Path(sys.executable).with_name("palace-conformance"))
SECRET = "corpus-Secr3t-9f8e7d6c"
MAX_OUTPUT = 4000  # characters of output a refusal may take, unless the case says otherwise


def secret_forms() -> list[str]:
    return [SECRET, quote(SECRET, safe=""), base64.b64encode(SECRET.encode()).decode()[:-4]]


@dataclass
class Outcome:
    exit: int | None
    seconds: float
    output: str
    problems: list[str] = field(default_factory=list)


def _fill(text: str, outside: Path) -> str:
    return text.replace("{OUTSIDE}", str(outside))


def build(spec: dict[str, Any], path: Path, outside: Path) -> Path:
    """Make the input ``spec`` describes at ``path``; the path to give the command."""
    special = spec.get("special")
    if special == "fifo":
        os.mkfifo(path)
    elif special == "dev_zero":
        return Path("/dev/zero")
    elif special == "directory":
        path.mkdir()
    elif special == "file_under_file":
        path.write_text("{}")
        return path / "inner.json"
    elif special == "long_path":
        return path.parent / ("a" * 5000 + path.suffix)
    elif special == "missing":
        pass
    elif special == "symlink_dev_zero":
        path.symlink_to("/dev/zero")
    elif "files" in spec:
        path.mkdir()
        for name, inner in spec["files"].items():
            build(inner, path / name, outside)
    elif "hex" in spec:
        path.write_bytes(bytes.fromhex(spec["hex"]))
    elif "deep" in spec:
        deep = spec["deep"]
        path.write_text(deep.get("prefix", "") + deep["open"] * deep["depth"]
                        + deep["close"] * deep["depth"] + deep.get("suffix", ""))
    elif "json" in spec:
        text = _fill(json.dumps(spec["json"]), outside)
        if "pad" in spec:
            text = text.replace("@PAD@", "x" * spec["pad"])
        path.write_text(text)
    else:
        path.write_text(_fill(spec["text"], outside))
    return path


def run_case(case: dict[str, Any], base: Path) -> Outcome:
    work, outside = base / "work", base / "outside"
    work.mkdir()
    outside.mkdir()
    spec = case["file"]
    target = work / spec["name"]
    target.parent.mkdir(parents=True, exist_ok=True)
    given = build(spec, target, outside)
    argv = [CLI, *(str(given) if arg == "{FILE}" else arg for arg in case["command"])]
    env = {**os.environ, "HOSTILE_CORPUS_TOKEN": SECRET, "TMPDIR": str(work)}
    started = time.monotonic()
    try:
        done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True,
                              errors="replace", timeout=case["limit_s"] + 30)
        code, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        code, output = None, str(exc.stdout or "") + str(exc.stderr or "")
    took = time.monotonic() - started
    outcome = Outcome(code, took, output)
    expect = case["expect"]
    if code is None or took > case["limit_s"]:
        outcome.problems.append(f"hang: {took:.1f} s (limit {case['limit_s']} s)")
    if "Traceback (most recent call last)" in output:
        outcome.problems.append("traceback")
    elif code not in expect["exit"]:
        outcome.problems.append(f"exit {code}, expected one of {expect['exit']}")
    if len(output) > expect.get("max_output", MAX_OUTPUT):
        outcome.problems.append(f"output of {len(output)} characters")
    lines = [line for line in output.splitlines() if line.strip()]
    if not 1 <= len(lines) <= 3:
        outcome.problems.append(f"{len(lines)} lines of output, not a one-line refusal")
    for word in expect.get("mentions", ()):
        if word not in output:
            outcome.problems.append(f"the refusal does not mention {word!r}")
    if any(outside.iterdir()):
        outcome.problems.append(f"escape: {sorted(p.name for p in outside.iterdir())}")
    leaked = [form for form in [*secret_forms(), *filter(None, [expect.get("secret")])]
              if form in output]
    if leaked:
        outcome.problems.append(f"leak: {leaked}")
    return outcome


@pytest.mark.timeout(180)
@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_a_hostile_input_gets_the_safe_outcome(path: Path, tmp_path: Path) -> None:
    case = json.loads(path.read_text())
    outcome = run_case(case, tmp_path)
    assert outcome.problems == [], (case["attack"], outcome.problems, outcome.output[:600])


def test_the_corpus_covers_every_untrusted_reader() -> None:
    kinds = {json.loads(p.read_text())["id"].split(".")[0] for p in CASES}
    assert kinds == {"profile", "baseline", "result", "fixture", "bundle"} and len(CASES) >= 60


def main() -> None:
    counts = {"cases": 0, "tracebacks": 0, "hangs": 0, "escapes": 0, "leaks": 0, "other": 0}
    slowest = 0.0
    for path in CASES:
        case = json.loads(path.read_text())
        with tempfile.TemporaryDirectory() as base:
            outcome = run_case(case, Path(base))
        counts["cases"] += 1
        slowest = max(slowest, outcome.seconds)
        for problem in outcome.problems:
            key = {"traceback": "tracebacks", "hang": "hangs", "escape": "escapes",
                   "leak": "leaks"}.get(problem.split(":")[0], "other")
            counts[key] += 1
            print(f"{case['id']}: {problem}")
        print(f"{case['id']}: exit {outcome.exit} in {outcome.seconds:.2f} s")
    print(json.dumps({**counts, "slowest_s": round(slowest, 2)}))


if __name__ == "__main__":
    main()
