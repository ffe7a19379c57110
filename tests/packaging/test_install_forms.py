"""The install lines the README and docs/ci.md give users (``tox -e wheel``): from a git URL at
a tag, and the sdist, each build the same wheel, holding the fixtures and the Node hosts' lockfiles.

A fresh ``git clone`` of this checkout, tagged, stands in for the published repository, so a file
that is not in git (generated, ignored) cannot hide from the check."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.wheel
CHECKOUT = Path(__file__).resolve().parents[2]
README = CHECKOUT / "README.md"


def _sh(*argv: str, cwd: Path) -> str:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600,
                          check=False)
    assert done.returncode == 0, f"{' '.join(argv)}: {done.stdout[-1500:]}{done.stderr[-1500:]}"
    return done.stdout


@pytest.fixture(scope="module")
def tagged_clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (CHECKOUT / ".git").exists():
        pytest.fail(f"{CHECKOUT} is not a git checkout: these tests clone it (run from a clone)")
    repo = tmp_path_factory.mktemp("published") / "palace-conformance"
    _sh("git", "clone", "-q", str(CHECKOUT), str(repo), cwd=repo.parent)
    _sh("git", "tag", "v0.0.0-test", cwd=repo)
    return repo


def _names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def test_readme_install_lines_name_each_form() -> None:
    """The README's shortest path installs from a clone and links the other forms, which
    docs/ci.md ("Installing the kit") gives line by line."""
    readme = README.read_text()
    assert "pip install ./palace-conformance" in readme
    assert "docs/ci.md#installing-the-kit" in readme
    text = (CHECKOUT / "docs" / "ci.md").read_text()
    assert "## Installing the kit" in text
    # the git form at a tag, with OWNER the one thing to fill in; a local path; a wheel file
    assert re.search(r'pip install "palace-conformance @ '
                     r'git\+https://github\.com/OWNER/palace-conformance@v[0-9.]+"', text)
    assert "pip install ./palace-conformance" in text
    assert re.search(r"pip install \S*palace_conformance-\S+-py3-none-any\.whl", text)


def test_git_url_at_a_tag_and_the_sdist_build_the_same_complete_wheel(
        tagged_clone: Path, tmp_path: Path) -> None:
    url = f"palace-conformance @ git+file://localhost{tagged_clone}@v0.0.0-test"
    _sh(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "git"),
        url, cwd=tmp_path)
    (from_git,) = (tmp_path / "git").glob("palace_conformance-*.whl")
    _sh(sys.executable, "-m", "build", "--sdist", "--outdir", str(tmp_path / "sdist"),
        str(tagged_clone), cwd=tmp_path)
    (sdist,) = (tmp_path / "sdist").glob("palace_conformance-*.tar.gz")
    _sh(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
        str(tmp_path / "from-sdist"), str(sdist), cwd=tmp_path)
    (from_sdist,) = (tmp_path / "from-sdist").glob("palace_conformance-*.whl")
    names = _names(from_git)
    assert names == _names(from_sdist), "the sdist loses or adds files: pyproject's sdist include"
    for needed in ("palace_conformance/fixtures/schema/scenario.schema.json",
                   "palace_conformance/hosts/pi/package-lock.json",
                   "palace_conformance/hosts/pi/runtime/package-lock.json",
                   "palace_bridge/__init__.py"):
        assert needed in names, needed
    assert sum(n.startswith("palace_conformance/fixtures/") for n in names) >= 80
