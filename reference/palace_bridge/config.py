"""Every environment knob of the seed bridge, with the seed's default, read once at load.

A malformed value (not an integer, negative) falls back to the default with one warning naming the
variable (KNOB-02). The transport choice is made here, once: ``MEMPALACE_REMOTE_URL`` set means the
remote HTTP palace and no local child, ever (LIFE-02, LIFE-03).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class BridgeConfig:
    # transport (LIFE-01/02)
    remote_url: str | None = None
    remote_token: str | None = None
    server_command: str = "mempalace-mcp"
    # stdio hardening (STDIO-*)
    timeout_ms: int = 60000
    init_timeout_ms: int = 300000
    max_respawns: int = 2
    respawn_backoff_ms: int = 1000
    debug: bool = False
    # choice: SIGTERM -> SIGKILL grace (and stdin-close -> SIGTERM wait on stop); SDKs use 2 s
    kill_grace_ms: int = 2000
    # HTTP session (HTTP-*; ADR-044). choice: knobs named in the seed's style
    keepalive_ms: int = 0
    session_preamble: str | None = None  # JSON: {"tool": name, "arguments": {...}}
    connect_retries: int = 2
    connect_backoff_ms: int = 250  # choice: small, doubled per retry (250, 500, ...)
    # identity and provenance (DIARY-01, PROV-*)
    agent_name: str = "pi"
    device: str | None = None
    harness: str = "pi"
    # feeding (FEED-*)
    feed: bool = True
    feed_bin: str = "mempalace-pi-session"
    feed_wing: str = "wing_conversations"
    feed_debounce_ms: int = 600000
    feed_prepare_timeout_ms: int = 120000
    feed_mine_timeout_ms: int = 30000
    ssh_target: str | None = None
    # mailbox (MAIL-*)
    mailbox: bool = True
    mailbox_poll_ms: int = 300000
    warnings: tuple[str, ...] = field(default=(), compare=False)

    @property
    def preamble(self) -> tuple[str, dict[str, Any]] | None:
        """The session preamble as (tool, arguments), or ``None`` when not configured."""
        return parse_preamble(self.session_preamble) if self.session_preamble else None

    @property
    def remote(self) -> bool:
        return bool(self.remote_url)

    @property
    def shared_palace(self) -> bool:
        """Both provenance gates hold: a device name and a shared (remote) palace."""
        return bool(self.device) and self.remote

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> BridgeConfig:
        warnings: list[str] = []
        defaults = cls()

        def integer(name: str, default: int) -> int:
            raw = env.get(name)
            if raw is None or raw.strip() == "":
                return default
            try:
                value = int(raw.strip())
            except ValueError:
                value = -1
            if value < 0:
                warnings.append(
                    f"mempalace: ignoring {name}={raw!r} (expected a non-negative integer); "
                    f"using the default {default}"
                )
                return default
            return value

        def text(name: str) -> str | None:
            raw = env.get(name)
            return raw if raw not in (None, "") else None

        def flag(name: str, default: bool) -> bool:
            raw = env.get(name)
            if raw is None or raw.strip() == "":
                return default
            return raw.strip() not in ("0", "false", "no", "off")

        def preamble(name: str) -> str | None:
            raw = text(name)
            if raw is None:
                return None
            if parse_preamble(raw) is None:
                warnings.append(
                    f"mempalace: ignoring {name} (expected JSON "
                    '{"tool": "<name>", "arguments": {...}}); no session preamble'
                )
                return None
            return raw

        return cls(
            remote_url=text("MEMPALACE_REMOTE_URL"),
            remote_token=text("MEMPALACE_REMOTE_TOKEN"),
            server_command=text("MEMPALACE_MCP_BIN") or defaults.server_command,
            timeout_ms=integer("MEMPALACE_MCP_TIMEOUT_MS", defaults.timeout_ms),
            init_timeout_ms=integer("MEMPALACE_MCP_INIT_TIMEOUT_MS", defaults.init_timeout_ms),
            max_respawns=integer("MEMPALACE_MCP_MAX_RESPAWNS", defaults.max_respawns),
            respawn_backoff_ms=integer("MEMPALACE_MCP_RESPAWN_BACKOFF_MS",
                                       defaults.respawn_backoff_ms),
            debug=env.get("MEMPALACE_EXT_DEBUG") == "1",
            kill_grace_ms=integer("MEMPALACE_MCP_KILL_GRACE_MS", defaults.kill_grace_ms),
            keepalive_ms=integer("MEMPALACE_MCP_KEEPALIVE_MS", defaults.keepalive_ms),
            session_preamble=preamble("MEMPALACE_SESSION_PREAMBLE"),
            connect_retries=integer("MEMPALACE_REMOTE_CONNECT_RETRIES", defaults.connect_retries),
            connect_backoff_ms=integer("MEMPALACE_REMOTE_CONNECT_BACKOFF_MS",
                                       defaults.connect_backoff_ms),
            agent_name=text("MEMPALACE_AGENT_NAME") or defaults.agent_name,
            device=text("MEMPALACE_PI_DEVICE"),
            feed=flag("MEMPALACE_FEED", defaults.feed),
            feed_bin=text("MEMPALACE_FEED_BIN") or defaults.feed_bin,
            feed_wing=text("MEMPALACE_FEED_WING") or defaults.feed_wing,
            feed_debounce_ms=integer("MEMPALACE_FEED_DEBOUNCE_MS", defaults.feed_debounce_ms),
            feed_prepare_timeout_ms=integer("MEMPALACE_FEED_PREPARE_TIMEOUT_MS",
                                            defaults.feed_prepare_timeout_ms),
            feed_mine_timeout_ms=integer("MEMPALACE_FEED_MINE_TIMEOUT_MS",
                                         defaults.feed_mine_timeout_ms),
            ssh_target=text("MEMPALACE_PI_SSH_TARGET"),
            mailbox=flag("MEMPALACE_MAILBOX", defaults.mailbox),
            mailbox_poll_ms=integer("MEMPALACE_MAILBOX_POLL_MS", defaults.mailbox_poll_ms),
            warnings=tuple(warnings),
        )


def parse_preamble(raw: str) -> tuple[str, dict[str, Any]] | None:
    """``{"tool": name, "arguments": {...}}`` as (name, arguments); ``None`` if malformed."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, nested too deeply or too long a number
        return None
    if not isinstance(data, dict) or not isinstance(data.get("tool"), str) or not data["tool"]:
        return None
    arguments = data.get("arguments", {})
    if not isinstance(arguments, dict):
        return None
    return data["tool"], arguments
