"""The real-world test bridges (``extensions/realworld/``) load under the extension host and talk
to the fake palace: each registers its tools and answers a call with its arguments intact.

These are the happy paths only. Each bridge also carries planted defects (listed in its header)
that the conformance catalogue, not this file, is meant to catch; see ``realworld/README.md``.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from palace_conformance.resources import tool_catalogue

from .support import CATALOGUE_TOOLS, EXTENSIONS, Host, host, of_kind, palace, payload

REALWORLD = EXTENSIONS / "realworld"
SEARCH = {"query": "real world", "limit": 3}
REGISTER_WAIT_S = 20.0


def spec(name: str) -> str:
    return f"pi-extension:{REALWORLD / name}"


def catalogue_schema(tool: str) -> dict[str, Any]:
    [found] = [t["inputSchema"] for t in tool_catalogue()["tools"] if t["name"] == tool]
    return found


def wait_for_tools(h: Host, count: int) -> list[dict[str, Any]]:
    """The registered tools once there are ``count`` of them (bridges may register late)."""
    deadline = time.monotonic() + REGISTER_WAIT_S
    while True:
        tools = h.ok("list_tools").result
        if len(tools) >= count or time.monotonic() > deadline:
            return tools
        h.ok("settle", quiet_ms=200, max_ms=2000)


def search_call(fake: Any, since: int = 0) -> dict[str, Any]:
    [call] = fake.calls("mempalace_search", since=since)
    return call["message"]["params"]["arguments"]


def test_knobs_registers_every_tool_and_searches(tmp_path: Path) -> None:
    with palace(tmp_path / "palace", "stdio") as fake, \
            host(spec("knobs.ts"), tmp_path / "host") as h:
        effects = h.start_session(fake.bridge_env(PALACE_TOOL_TIMEOUT_S="2.5"), tmp_path)
        registered = of_kind(effects, "tool_registered")
        assert len(registered) == CATALOGUE_TOOLS
        assert {e["name"]: e["parameters"] for e in registered}["mempalace_search"] == \
            catalogue_schema("mempalace_search")
        found = h.ok("call_tool", name="mempalace_search", args=SEARCH)
        assert found.result["is_error"] is False and payload(found.result)["query"] == "real world"
        assert search_call(fake) == SEARCH
        assert h.ok("shutdown", reason="quit").result == {"children_alive": 0}
    assert [r["reason"] for r in fake.records("process_exit")] == ["stdin EOF"]


def test_pyspawn_without_the_package_fails_in_one_line(tmp_path: Path) -> None:
    with palace(tmp_path / "palace", "stdio") as fake, \
            host(spec("pyspawn.ts"), tmp_path / "host") as h:
        started = time.monotonic()
        effects = h.start_session(fake.bridge_env(), tmp_path)
        assert time.monotonic() - started < 15
        [line] = [e["line"] for e in of_kind(effects, "stderr")]
        assert "cannot import mempalace" in line and "continuing without palace tools" in line
        assert of_kind(effects, "tool_registered") == []
        missing = h.op("call_tool", name="mempalace_status", args={})
        assert not missing.ok and missing.error["kind"] == "no_such_tool"
        assert h.ok("shutdown", reason="quit").result == {"children_alive": 0}
    assert fake.records("process_start") == []


def install_python_package(root: Path) -> tuple[Path, Path]:
    """A stand-in ``mempalace`` package serving the fake, and a pipx-style ``mempalace-mcp``
    whose shebang names this interpreter (which pyspawn must then pick)."""
    package = root / "site" / "mempalace"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "mcp_server.py").write_text(
        "from palace_conformance.fake.cli import fake_mcp_main as main\n\n"
        "if __name__ == '__main__':\n    main()\n")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    script = bin_dir / "mempalace-mcp"
    script.write_text(f"#!{sys.executable}\nfrom mempalace.mcp_server import main\nmain()\n")
    script.chmod(0o755)
    return root / "site", bin_dir


def test_pyspawn_runs_the_module_with_the_shebang_python(tmp_path: Path) -> None:
    site, bin_dir = install_python_package(tmp_path / "py")
    with palace(tmp_path / "palace", "stdio") as fake, \
            host(spec("pyspawn.ts"), tmp_path / "host") as h:
        env = fake.bridge_env(PYTHONPATH=str(site), PYSPAWN_TIMEOUT_MS="5000")
        env["PATH"] = f"{bin_dir}:{env['PATH']}"
        effects = h.start_session(env, tmp_path)
        assert len(of_kind(effects, "tool_registered")) == CATALOGUE_TOOLS
        [child] = [c for c in h.ok("introspect").result["children"] if c["alive"]]
        assert child["argv"] == [sys.executable, "-m", "mempalace.mcp_server"]
        found = h.ok("call_tool", name="mempalace_search", args=SEARCH)
        assert payload(found.result)["query"] == "real world"
        assert search_call(fake) == SEARCH
        assert h.ok("shutdown", reason="quit").result == {"children_alive": 0}


def test_configfile_reads_its_settings_file_not_the_environment(tmp_path: Path) -> None:
    with palace(tmp_path / "palace", "http", token="tok-file-7c1e") as fake, \
            host(spec("configfile.ts"), tmp_path / "host") as h:
        settings = fake.home / ".pi" / "agent" / "mempalace.json"
        settings.parent.mkdir(parents=True)
        settings.write_text(json.dumps({"url": fake.url, "timeoutMs": "5000"}))
        token = fake.home / ".mempalace" / "token"
        token.parent.mkdir(exist_ok=True)  # the HTTP fake keeps its palace there
        token.write_text("tok-file-7c1e\n")
        # decoys: a bridge that read the seed's variables would talk to a closed port
        env = fake.bridge_env(MEMPALACE_REMOTE_URL="http://127.0.0.1:1/mcp",
                              MEMPALACE_REMOTE_TOKEN="tok-decoy")
        effects = h.start_session(env, tmp_path)
        assert len(of_kind(effects, "tool_registered")) == CATALOGUE_TOOLS
        found = h.ok("call_tool", name="mempalace_search", args=SEARCH)
        assert payload(found.result)["query"] == "real world"
        assert search_call(fake) == SEARCH
        requests = fake.records("http_request")
        assert requests and all(r["headers"].get("authorization") == "Bearer <redacted>"
                                for r in requests)
        assert h.ok("introspect").result["children"] == []
        assert h.ok("shutdown", reason="quit").result == {"children_alive": 0}


def test_curated_offers_three_renamed_tools_and_a_local_one(tmp_path: Path) -> None:
    with palace(tmp_path / "palace", "http", token="tok-curated-2b") as fake, \
            host(spec("curated.ts"), tmp_path / "host") as h:
        effects = h.start_session(fake.bridge_env(), tmp_path)
        registered = {e["name"]: e["parameters"] for e in of_kind(effects, "tool_registered")}
        assert sorted(registered) == ["palace_save", "palace_search", "palace_status",
                                      "palace_where"]
        assert registered["palace_save"] == catalogue_schema("mempalace_add_drawer")
        drawer = {"wing": "wing_rw", "room": "notes", "content": "curated ✓"}
        saved = h.ok("call_tool", name="palace_save", args=drawer)
        assert saved.result["is_error"] is False and payload(saved.result)["success"] is True
        [call] = fake.calls("mempalace_add_drawer")
        assert call["message"]["params"]["arguments"] == drawer
        mark = fake.mark()
        where = h.ok("call_tool", name="palace_where", args={})
        [part] = where.result["content"]
        assert fake.url in part["text"] and "tok-curated-2b" not in part["text"]
        assert fake.calls(since=mark) == []  # answered locally
        assert h.ok("shutdown", reason="quit").result == {"children_alive": 0}


def test_agentshapes_registers_late_and_answers_in_agent_shapes(tmp_path: Path) -> None:
    with palace(tmp_path / "palace", "stdio") as fake, \
            host(spec("agentshapes.ts"), tmp_path / "host") as h:
        h.ok("load", env=fake.bridge_env(), cwd=str(tmp_path))
        started = h.ok("event", name="session_start", payload={"reason": "startup"})
        assert of_kind(started.effects, "notify") == [
            {"kind": "notify", "level": "info", "message": "MemPalace: connecting to your palace…"}]
        assert len(wait_for_tools(h, CATALOGUE_TOOLS)) == CATALOGUE_TOOLS
        found = h.ok("call_tool", name="mempalace_search", args=SEARCH)
        assert payload(found.result)["query"] == "real world"
        assert search_call(fake) == SEARCH
        refused = h.ok("call_tool", name="mempalace_diary_read", args={"agent": "pi"},
                       validate=False)
        assert refused.result["is_error"] is True
        assert refused.result["details"]["error"]["code"] == -32602
        prompt = h.ok("event", name="before_agent_start",
                      payload={"prompt": "hi", "systemPrompt": "You are pi."}).result
        assert prompt["messages"] == []
        assert prompt["system_prompt"].startswith("You are pi.\n\n## MemPalace wake-up")
        assert "total_drawers" in prompt["system_prompt"]
        assert h.ok("shutdown", reason="quit").result == {"children_alive": 0}
