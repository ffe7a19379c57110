"""The fake ``mempalace`` package and the light server: ``python -m mempalace.mcp_server``,
``python -m mempalace``, ``import mempalace``, ``mempalace-light-mcp``, and the Python in the
shims' shebangs, all landing on the fake."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from palace_conformance.fake.shims import install_shim, python_path, shim_python
from palace_conformance.resources import tool_catalogue

from .stdio_harness import FakeProcess, clean_env, payload

#: the light server's initialize answer, as captured from mempalace-light-mcp 3.11.0
LIGHT_INIT = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
              "serverInfo": {"name": "mempalace-light", "version": "3.11.0"}}
LIGHT_TOOLS = ["palace_query", "palace_exec", "palace_coordinate"]


def shims(tmp_path: Path) -> Path:
    directory = tmp_path / "shims"
    install_shim(directory, python_package=True)
    return directory


def pythonpath(directory: Path) -> dict[str, str]:
    return {"PYTHONPATH": str(python_path(directory))}


def test_python_m_mcp_server_is_the_fake_and_journals_its_real_argv(tmp_path: Path) -> None:
    directory = shims(tmp_path)
    command = [sys.executable, "-m", "mempalace.mcp_server"]
    home, palace = tmp_path / "home", tmp_path / "palace"
    shared = {"home": home, "palace": palace, "journal": tmp_path / "journal.jsonl"}
    with FakeProcess(tmp_path / "a", command=command, env=pythonpath(directory), **shared) as a, \
            FakeProcess(tmp_path / "b", command=[str(directory / "mempalace-mcp")],
                        **shared) as b:
        init = a.request("initialize", {"protocolVersion": "2025-06-18"})
        assert init["result"]["serverInfo"] == {"name": "mempalace", "version": "3.11.0"}
        assert len(a.request("tools/list")["result"]["tools"]) == 47
        assert payload(a.call("mempalace_diary_write", {"agent_name": "a", "entry": "x"}))
        reason = b.call("mempalace_diary_write", {"agent_name": "b", "entry": "y"})["error"][
            "data"]["reason"]
        [start] = [r for r in a.records("process_start") if r["pid"] == a.pid]
    main = python_path(directory) / "mempalace" / "mcp_server" / "__main__.py"
    assert start["argv"] == [str(main), "--palace", str(palace)]
    assert f"is held by PID {a.pid} ({main} --palace {palace});" in reason  # the lock holder


def test_python_m_mempalace_is_the_fake_cli(tmp_path: Path) -> None:
    directory = shims(tmp_path)
    journal = tmp_path / "journal.jsonl"
    env = clean_env(tmp_path, PALACE_FAKE_JOURNAL=str(journal), **pythonpath(directory))
    done = subprocess.run([sys.executable, "-m", "mempalace", "repair", "x"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "only --version, mine, status, search" in done.stderr
    [run] = [json.loads(line) for line in journal.read_text().splitlines()]
    assert run["kind"] == "cli_run" and run["command"] == "repair"
    assert run["argv"] == [str(python_path(directory) / "mempalace" / "__main__.py"), "repair",
                           "x"]


def test_the_shebang_python_imports_mempalace_without_any_environment(tmp_path: Path) -> None:
    directory = shims(tmp_path)
    first = (directory / "mempalace-mcp").read_text().splitlines()[0]
    python = first.removeprefix("#!")
    assert python == shim_python(directory) != sys.executable
    env = clean_env(tmp_path)  # no PYTHONPATH: the venv itself has mempalace installed
    env.pop("PYTHONPATH", None)
    probe = subprocess.run([python, "-c", "import mempalace; print(mempalace.__version__)"],
                           env=env, capture_output=True, text=True, timeout=60, check=False)
    assert probe.stdout == "3.11.0\n", probe.stderr
    bare = subprocess.run([sys.executable, "-c", "import mempalace"], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert bare.returncode == 1 and "No module named 'mempalace'" in bare.stderr
    with FakeProcess(tmp_path, command=[python, "-m", "mempalace.mcp_server"], env=env) as fake:
        assert fake.request("ping", request_id=7) == {"jsonrpc": "2.0", "id": 7, "result": {}}


def test_the_light_server_answers_as_captured(tmp_path: Path) -> None:
    directory = shims(tmp_path)
    for index, command in enumerate(([str(directory / "mempalace-light-mcp")],
                                     [sys.executable, "-m", "mempalace.mcp_light_server"])):
        with FakeProcess(tmp_path / str(index), command=command,
                         env=pythonpath(directory)) as light:
            init = light.request("initialize", {"protocolVersion": "2025-06-18",
                                                "capabilities": {}})
            assert init["result"] == LIGHT_INIT
            tools = light.request("tools/list")["result"]["tools"]
            assert [t["name"] for t in tools] == LIGHT_TOOLS
            assert tools == tool_catalogue("light")["tools"]
            assert light.request("ping")["result"] == {}
            result = payload(light.call("palace_query", {"query": "STATUS"}))
            assert result["fake_unmodelled"] is True and result["success"] is False
            unknown = light.call("palace_query", {"nope": 1})["error"]
            assert unknown == {"code": -32602,
                               "message": "Unknown parameter 'nope' for tool palace_query"}
            assert light.call("mempalace_status")["error"]["code"] == -32601
            [start] = light.records("process_start")
        assert start["argv"][0].endswith(("/mempalace-light-mcp", "/mcp_light_server.py"))


def test_the_catalogue_is_chosen_by_environment_and_checked(tmp_path: Path) -> None:
    directory = shims(tmp_path)
    with FakeProcess(tmp_path, command=[str(directory / "mempalace-mcp")],
                     env={"PALACE_FAKE_CATALOGUE": "light"}) as fake:
        assert fake.request("initialize")["result"]["serverInfo"]["name"] == "mempalace-light"
    bad = subprocess.run([str(directory / "mempalace-mcp")], input="",
                         env=clean_env(tmp_path, PALACE_FAKE_CATALOGUE="huge"),
                         capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines()[-1] == (
        "palace-fake-mcp: unknown catalogue 'huge' (--catalogue or PALACE_FAKE_CATALOGUE); "
        "use one of full, light")


def test_the_package_refuses_the_http_transport_in_one_line(tmp_path: Path) -> None:
    directory = shims(tmp_path)
    done = subprocess.run([sys.executable, "-m", "mempalace.mcp_server", "--transport", "http"],
                          env=clean_env(tmp_path, **pythonpath(directory)), input="",
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert "--transport http is not modelled by the fake package" in line


def test_a_shim_directory_too_deep_for_a_shebang_still_runs(tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*["d" * 60] * 5, "shims")
    install_shim(deep, python_package=True)
    launcher = deep / "mempalace-mcp"
    assert launcher.read_text().startswith("#!/bin/sh\n")  # pip's trampoline
    with FakeProcess(tmp_path, command=[str(launcher)]) as fake:
        assert fake.request("initialize")["result"]["serverInfo"]["name"] == "mempalace"
        [start] = fake.records("process_start")
    assert start["argv"][0] == str(launcher)


def test_importing_the_package_loads_nothing_else(tmp_path: Path) -> None:
    directory = shims(tmp_path)
    code = ("import sys, mempalace; "
            "print(mempalace.__version__, [m for m in sys.modules if 'palace_conformance' in m])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=clean_env(tmp_path, **pythonpath(directory)), timeout=60,
                          check=False)
    assert done.stdout == "3.11.0 []\n", done.stderr


def test_mcp_server_exposes_tools_in_process_from_the_runs_palace(tmp_path: Path) -> None:
    """An in-process fallback (``from mempalace.mcp_server import TOOLS``) gets the catalogue's
    tools, each a handler that answers from the fake palace, not an AttributeError; importing
    the module alone still loads nothing of the kit."""
    directory = shims(tmp_path)
    code = ("import sys, json; import mempalace.mcp_server as m; "
            "print([x for x in sys.modules if 'palace_conformance' in x]); "
            "from mempalace.mcp_server import TOOLS; "
            "print(len(TOOLS), sorted(TOOLS['mempalace_search'])); "
            "print(json.dumps(TOOLS['mempalace_search']['handler'](query='harbour')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=clean_env(tmp_path, **pythonpath(directory)), timeout=60,
                          check=False)
    lines = done.stdout.splitlines()
    assert lines[:2] == ["[]", "47 ['description', 'handler', 'input_schema']"], done.stderr
    assert json.loads(lines[2])["query"] == "harbour"
