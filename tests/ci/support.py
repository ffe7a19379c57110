"""The GitHub Actions environment, simulated: the files and variables a runner gives a step."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

KIT = Path(sys.executable).parent / "palace-conformance"
CHECKOUT = Path(__file__).resolve().parents[2]


@dataclass
class Runner:
    """One job's simulated runner: a workspace, RUNNER_TEMP, the summary and output files."""

    root: Path

    @property
    def workspace(self) -> Path:
        return self.root / "workspace"

    @property
    def temp(self) -> Path:
        return self.root / "runner-temp"

    @property
    def summary(self) -> Path:
        return self.root / "step-summary.md"

    @property
    def output(self) -> Path:
        return self.root / "github-output"

    def env(self, workspace: Path | None = None, **extra: str) -> dict[str, str]:
        for where in (self.workspace, self.temp):
            where.mkdir(parents=True, exist_ok=True)
        base = {k: v for k, v in os.environ.items()
                if not k.startswith(("MEMPALACE_", "PALACE_", "GITHUB_", "RUNNER_"))}
        return {**base, "GITHUB_ACTIONS": "true",
                "GITHUB_WORKSPACE": str(workspace or self.workspace),
                "RUNNER_TEMP": str(self.temp), "GITHUB_STEP_SUMMARY": str(self.summary),
                "GITHUB_OUTPUT": str(self.output), "HOME": str(self.root), **extra}

    def outputs(self) -> dict[str, str]:
        """$GITHUB_OUTPUT's name=value lines (the delimiter form is not used for these)."""
        if not self.output.exists():
            return {}
        return dict(line.split("=", 1) for line in self.output.read_text().splitlines())


def run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False,
                          env=env, cwd=cwd)
