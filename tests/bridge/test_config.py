"""KNOB-01 (every seed knob has the seed's default) and KNOB-02 (malformed -> default + warning)."""

from __future__ import annotations

import pytest

from palace_bridge.config import BridgeConfig

from .support import bridge_in_process, clean_base_env

SEED_DEFAULTS = {
    # Stall protection
    "timeout_ms": 60000,
    "init_timeout_ms": 300000,
    # Self-heal
    "max_respawns": 2,
    "respawn_backoff_ms": 1000,
    # Debugging
    "debug": False,
    # Transport
    "remote_url": None,
    "remote_token": None,
    "server_command": "mempalace-mcp",
    # Identity
    "agent_name": "pi",
    # Automatic transcript feeding
    "feed": True,
    "feed_bin": "mempalace-pi-session",
    "feed_wing": "wing_conversations",
    "feed_debounce_ms": 600000,
    "feed_prepare_timeout_ms": 120000,
    "feed_mine_timeout_ms": 30000,
    # Mailbox
    "mailbox": True,
    "mailbox_poll_ms": 300000,
}


def test_every_seed_knob_has_the_seed_default():
    config = BridgeConfig.from_env({})
    for name, value in SEED_DEFAULTS.items():
        assert getattr(config, name) == value, name
    assert config.warnings == ()
    assert not config.remote


def test_choices_the_seed_left_open():
    config = BridgeConfig.from_env({})
    assert config.keepalive_ms == 0, "no keep-alive unless asked for (the seed gives no default)"
    assert config.kill_grace_ms == 2000
    assert config.connect_retries == 2
    assert config.preamble is None


@pytest.mark.parametrize(("variable", "attribute", "default"), [
    ("MEMPALACE_MCP_TIMEOUT_MS", "timeout_ms", 60000),
    ("MEMPALACE_MCP_INIT_TIMEOUT_MS", "init_timeout_ms", 300000),
    ("MEMPALACE_MCP_MAX_RESPAWNS", "max_respawns", 2),
    ("MEMPALACE_MCP_RESPAWN_BACKOFF_MS", "respawn_backoff_ms", 1000),
    ("MEMPALACE_MCP_KILL_GRACE_MS", "kill_grace_ms", 2000),
    ("MEMPALACE_MCP_KEEPALIVE_MS", "keepalive_ms", 0),
    ("MEMPALACE_FEED_DEBOUNCE_MS", "feed_debounce_ms", 600000),
])
@pytest.mark.parametrize("bad", ["abc", "-5", "1.5", "60s"])
def test_malformed_value_falls_back_with_one_warning_naming_the_variable(variable, attribute,
                                                                         default, bad):
    config = BridgeConfig.from_env({variable: bad})
    assert getattr(config, attribute) == default
    assert len(config.warnings) == 1
    assert variable in config.warnings[0]


def test_zero_is_a_valid_value_not_a_malformed_one():
    config = BridgeConfig.from_env({"MEMPALACE_MCP_TIMEOUT_MS": "0",
                                    "MEMPALACE_MCP_MAX_RESPAWNS": "0"})
    assert config.timeout_ms == 0 and config.max_respawns == 0 and config.warnings == ()


def test_malformed_preamble_is_ignored_with_a_warning():
    config = BridgeConfig.from_env({"MEMPALACE_SESSION_PREAMBLE": "{not json"})
    assert config.preamble is None
    assert "MEMPALACE_SESSION_PREAMBLE" in config.warnings[0]
    good = BridgeConfig.from_env({"MEMPALACE_SESSION_PREAMBLE":
                                  '{"tool": "mempalace_status", "arguments": {"a": 1}}'})
    assert good.preamble == ("mempalace_status", {"a": 1})


def test_cli_prints_the_warning_exactly_once(tmp_path, monkeypatch, capsys):
    env = clean_base_env()
    env.update(HOME=str(tmp_path), PATH="/nonexistent", MEMPALACE_MCP_TIMEOUT_MS="soon")
    proc = bridge_in_process(monkeypatch, capsys, env, "tools")
    assert proc.stderr.count("MEMPALACE_MCP_TIMEOUT_MS") == 1, proc.stderr
    assert proc.returncode == 3
