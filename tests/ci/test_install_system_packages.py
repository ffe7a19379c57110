""".ci/install-system-packages: what .ci/run installs before the tests, and how it fails.

apt-get is a stub on a PATH of its own (these tests never touch the machine's packages): the
script must skip when Chromium is there, run ``apt-get update`` before the install with a lock
timeout, and turn each failure into one line naming the cause and the fix."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "install-system-packages"
TOOLS = ("bash", "env", "timeout", "mktemp", "tail", "grep", "rm", "cat")


def bin_dir(tmp: Path, **stubs: str) -> Path:
    """A PATH holding only the tools the script needs plus the named stubs (shell bodies)."""
    where = tmp / "bin"
    where.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, f"{tool} is needed by the script under test"
        (where / tool).symlink_to(found)
    stubs = {"id": "echo 0", **stubs}  # as root, whoever runs the tests: apt is a stub anyway
    for name, body in stubs.items():
        stub = where / name
        stub.write_text(f"#!{shutil.which('bash')}\n{body}\n")
        stub.chmod(0o755)
    return where


def run(path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(path / "bash"), str(SCRIPT)], capture_output=True, text=True,
                          timeout=60, check=False,
                          env={"PATH": str(path), "HOME": str(path.parent), **env})


def test_chromium_on_path_installs_nothing(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    path = bin_dir(tmp_path, chromium="exit 0", **{"apt-get": f'echo "$@" >> {calls}'})
    done = run(path)
    assert done.returncode == 0, done.stderr
    assert "already on PATH" in done.stdout
    assert not calls.exists()


def test_update_runs_before_install_both_with_a_lock_timeout(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    # the stub "installs" chromium by creating it next to itself
    made = tmp_path / "bin" / "chromium"
    path = bin_dir(tmp_path, **{"apt-get": f'echo "$@" >> {calls}\n'
                                f'case "$*" in *install*) printf "#!/bin/sh\\n" > {made};'
                                f' {shutil.which("chmod")} +x {made};; esac'})
    done = run(path, PALACE_APT_LOCK_WAIT="7")
    assert done.returncode == 0, done.stderr
    lines = calls.read_text().splitlines()
    assert [line.split()[-1] for line in lines] == ["update", "chromium"]
    assert all("DPkg::Lock::Timeout=7" in line for line in lines)
    assert "install" in lines[1]


@pytest.mark.parametrize(("apt_output", "says"), [
    ("E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 99 (apt-get)",
     "held the package lock for more than 5s (PALACE_APT_LOCK_WAIT)"),
    ("E: dpkg was interrupted, you must manually run 'dpkg --configure -a' to correct the problem.",
     "run 'dpkg --configure -a' as root"),
    ("E: Unable to locate package chromium", "failed (exit 100; apt's output above)"),
])
def test_each_failure_is_one_line_with_its_fix(tmp_path: Path, apt_output: str,
                                               says: str) -> None:
    path = bin_dir(tmp_path, **{"apt-get": f'case "$*" in *install*) echo "{apt_output}" >&2;'
                                f' exit 100;; esac'})
    done = run(path, PALACE_APT_LOCK_WAIT="5")
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(".ci/install-system-packages: apt-get install chromium")
    assert says in last
    assert apt_output in done.stderr  # apt's own words are shown above the line


def test_a_step_past_its_deadline_fails_naming_the_deadline(tmp_path: Path) -> None:
    path = bin_dir(tmp_path, sleep=f'exec {shutil.which("sleep")} "$@"',
                   **{"apt-get": "sleep 30"})
    done = run(path, PALACE_APT_TIMEOUT="1")
    assert done.returncode == 1
    assert "apt-get update did not finish within 1s (PALACE_APT_TIMEOUT)" in done.stderr


def test_no_apt_get_says_what_to_install(tmp_path: Path) -> None:
    done = run(bin_dir(tmp_path))
    assert done.returncode == 1
    assert "no apt-get: install Chromium" in done.stderr


def test_the_browser_test_fails_naming_this_script_instead_of_installing() -> None:
    drift = (Path(__file__).resolve().parents[1] / "ts" / "test_drift.py").read_text()
    run_script = (SCRIPT.parent / "run").read_text()
    assert "apt-get" not in drift.replace("apt-get install chromium); run that script", "")
    assert ".ci/install-system-packages" in drift
    # .ci/run installs before the first test command (the README's: tox run-parallel)
    assert run_script.index(".ci/install-system-packages") < run_script.index("tox run-parallel")


def test_ci_runs_the_readme_s_test_command() -> None:
    readme = (SCRIPT.parents[1] / "README.md").read_text()
    [command] = [line.split("&& ", 1)[1] for line in readme.splitlines()
                 if line.startswith("pip install tox && ")]
    run_script = (SCRIPT.parent / "run").read_text().replace("\\\n    ", "")
    assert command in run_script


def test_without_root_or_sudo_it_says_the_command_to_run(tmp_path: Path) -> None:
    done = run(bin_dir(tmp_path, id="echo 1000", **{"apt-get": "exit 0"}))
    assert done.returncode == 1
    assert done.stderr.strip() == (
        ".ci/install-system-packages: chromium is not on PATH and installing it needs root: run "
        "'sudo apt-get install -y chromium' (or .ci/run as root), then re-run .ci/run")
