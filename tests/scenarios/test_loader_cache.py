"""The validation cache: a file's clean verdict is remembered, and only ever for its exact bytes."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from palace_conformance.scenarios import cache, loader
from palace_conformance.scenarios.behaviours import Behaviour
from palace_conformance.scenarios.cache import NO_CACHE_ENV, cache_dir, fingerprint
from palace_conformance.scenarios.loader import Context, load_catalogue, load_scenario

from .test_loader import BASE, scenario, write


@pytest.fixture
def cache_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private cache directory, as ``XDG_CACHE_HOME`` names it (outside the test's fixtures)."""
    home = tmp_path_factory.mktemp("xdg-cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    monkeypatch.delenv(NO_CACHE_ENV, raising=False)
    return home


@pytest.fixture
def checks_counted(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files the loader really checked (the cache skips the others)."""
    checked: list[Path] = []
    real = loader._checked

    def counting(path: Path, data: Any, context: Context) -> Any:
        checked.append(path)
        return real(path, data, context)

    monkeypatch.setattr(loader, "_checked", counting)
    return checked


def cache_files(home: Path) -> list[Path]:
    return sorted((home / "palace-conformance" / "scenarios").glob("*.json"))


def uncached(paths: list[Path], monkeypatch: pytest.MonkeyPatch) -> list[str]:
    with monkeypatch.context() as patched:
        patched.setenv(NO_CACHE_ENV, "1")
        return [str(p) for p in load_catalogue(paths).problems]


def test_a_valid_file_is_checked_once_then_remembered(
        tmp_path: Path, cache_home: Path, checks_counted: list[Path]) -> None:
    path = write(tmp_path / "fixtures", BASE)
    first = load_catalogue([tmp_path / "fixtures"])
    assert first.ok and checks_counted == [path]
    [stored] = cache_files(cache_home)
    assert list(json.loads(stored.read_text())["valid"]) == ["tool/tool.sample.search-works.json"]
    again = load_catalogue([tmp_path / "fixtures"])
    assert again.ok and checks_counted == [path]  # not checked a second time
    assert again.scenarios == first.scenarios
    assert load_scenario(path) == first.scenarios[0] and checks_counted == [path]


def test_a_changed_fixture_is_checked_again(tmp_path: Path, cache_home: Path,
                                            checks_counted: list[Path],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, BASE)
    assert load_catalogue([tmp_path]).ok
    write(tmp_path, scenario(title="A search still goes through"))
    changed = load_catalogue([tmp_path])
    assert changed.ok and changed.scenarios[0].title == "A search still goes through"
    assert checks_counted == [path, path]
    write(tmp_path, scenario(covers=["TOOL-88"]))  # same name, now broken
    broken = load_catalogue([tmp_path])
    assert not broken.scenarios and checks_counted == [path] * 3
    assert [str(p) for p in broken.problems] == uncached([tmp_path], monkeypatch) == [
        f"{path}: /covers/0: unknown behaviour ID 'TOOL-88' (use an ID from "
        "fixtures/behaviours.json)"]
    assert load_catalogue([tmp_path]).problems == broken.problems  # problems are never cached
    assert checks_counted == [path] * 5  # the uncached load checked it too


def test_the_same_bytes_under_another_name_are_checked_for_that_name(
        tmp_path: Path, cache_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_catalogue([write(tmp_path / "a", BASE)]).ok
    moved = tmp_path / "b" / "stdio" / "tool.sample.search-works.json"
    moved.parent.mkdir(parents=True)
    moved.write_bytes((tmp_path / "a" / "tool" / "tool.sample.search-works.json").read_bytes())
    problems = [str(p) for p in load_catalogue([moved]).problems]
    assert problems == uncached([moved], monkeypatch)
    assert problems == [f"{moved}: /id: file is in stdio/ but its id says area 'tool' "
                        "(move it to scenarios/tool/)"]


@pytest.mark.parametrize("garbage", [
    b"", b"{\"format\": 1, \"valid\": {", b"\x00\xff\xfe", b"[]", b"{\"format\": 1}",
    b"{\"format\": 99, \"fingerprint\": \"x\", \"valid\": {}}",
])
def test_a_corrupted_cache_file_is_ignored_and_rebuilt(
        tmp_path: Path, cache_home: Path, checks_counted: list[Path], garbage: bytes) -> None:
    path = write(tmp_path, BASE)
    assert load_catalogue([tmp_path]).ok
    [stored] = cache_files(cache_home)
    stored.write_bytes(garbage)
    assert load_catalogue([tmp_path]).ok and checks_counted == [path, path]
    assert list(json.loads(stored.read_text())["valid"]) == ["tool/tool.sample.search-works.json"]
    assert load_catalogue([tmp_path]).ok and checks_counted == [path, path]  # rebuilt


def test_an_entry_for_other_bytes_is_not_trusted(tmp_path: Path, cache_home: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, BASE)
    assert load_catalogue([tmp_path]).ok
    [stored] = cache_files(cache_home)
    write(tmp_path, scenario(steps=[{"op": "bogus"}]))
    data = json.loads(stored.read_text())  # an entry under the right name, for the old bytes
    assert data["valid"]["tool/tool.sample.search-works.json"]
    stored.write_text(json.dumps(data))
    problems = [str(p) for p in load_catalogue([tmp_path]).problems]
    assert problems == uncached([tmp_path], monkeypatch)
    assert problems and all(line.startswith(f"{path}: /steps/0/op") for line in problems)


def test_another_context_has_its_own_verdicts(tmp_path: Path, cache_home: Path,
                                              checks_counted: list[Path]) -> None:
    path = write(tmp_path, BASE)
    assert load_catalogue([tmp_path]).ok
    narrow = Context.default([Behaviour("LIFE-01", "only this one")])
    assert [p.message for p in load_catalogue([tmp_path], narrow).problems] == [
        "unknown behaviour ID 'TOOL-02'"]
    assert checks_counted == [path, path] and len(cache_files(cache_home)) == 1


def test_no_cache_env_neither_reads_nor_writes(tmp_path: Path, cache_home: Path,
                                               checks_counted: list[Path],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, BASE)
    assert load_catalogue([tmp_path]).ok and cache_files(cache_home)
    monkeypatch.setenv(NO_CACHE_ENV, "1")
    assert cache_dir() is None
    assert load_catalogue([tmp_path]).ok and checks_counted == [path, path]
    for stored in cache_files(cache_home):
        stored.unlink()
    assert load_catalogue([tmp_path]).ok and cache_files(cache_home) == []
    monkeypatch.setenv(NO_CACHE_ENV, "0")  # "0" means: do cache
    assert cache_dir() == cache_home / "palace-conformance" / "scenarios"


def test_the_cache_lives_under_xdg_cache_home_or_home(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NO_CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "palace-conformance" / "scenarios"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for ignored in ("", "relative/dir"):  # the XDG spec: only an absolute path counts
        monkeypatch.setenv("XDG_CACHE_HOME", ignored)
        assert cache_dir() == tmp_path / "home" / ".cache" / "palace-conformance" / "scenarios"


def test_an_unwritable_cache_directory_only_costs_the_checks(
        tmp_path: Path, cache_home: Path, checks_counted: list[Path]) -> None:
    (cache_home / "palace-conformance").write_text("a file where the directory should be")
    path = write(tmp_path, BASE)
    assert load_catalogue([tmp_path]).ok and load_catalogue([tmp_path]).ok
    assert checks_counted == [path, path]


def test_writers_in_parallel_keep_each_others_entries(tmp_path: Path, cache_home: Path) -> None:
    first = write(tmp_path, BASE)
    second = write(tmp_path, scenario(id="tool.sample.other"))
    context = Context.default()
    one, two = loader.validation_cache(context), loader.validation_cache(context)  # both read
    for verdicts, path in ((one, first), (two, second)):
        _, problems = loader.load_file(path, context, verdicts)
        assert problems == []
    one.save()
    two.save()  # merges what the other wrote since it read the file
    [stored] = cache_files(cache_home)
    assert sorted(json.loads(stored.read_text())["valid"]) == [
        "tool/tool.sample.other.json", "tool/tool.sample.search-works.json"]
    assert [p.name for p in stored.parent.iterdir()] == [stored.name]  # no temporary left


def test_the_fingerprint_covers_rules_schemas_and_context(tmp_path: Path) -> None:
    rules = tmp_path / "rules.py"
    rules.write_text("RULE = 1\n")
    module = ModuleType("rules")
    module.__file__ = str(rules)
    schemas = tmp_path / "schema"
    schemas.mkdir()
    (schemas / "scenario.schema.json").write_text("{}")

    def current(**context: Any) -> str | None:
        cache._static_fingerprint.cache_clear()  # sources are read once per process
        return fingerprint([module], schemas, context.get("behaviours", {"LIFE-01": "x"}),
                           context.get("tools", ["mempalace_status"]))

    seen = {current()}
    rules.write_text("RULE = 2\n")
    seen.add(current())
    (schemas / "scenario.schema.json").write_text('{"type": "object"}')
    seen.add(current())
    seen.add(current(behaviours={"LIFE-01": "y"}))
    seen.add(current(tools=["mempalace_search"]))
    assert len(seen) == 5 and None not in seen
    module.__file__ = str(tmp_path / "gone.py")
    assert current() is None  # a rule whose source cannot be read: nothing is cached
