"""The driver vocabulary is defined once (``palace_conformance.contract``); these keep the schema,
DRIVER.md and every host saying the same thing, so a new kind cannot be added in one place only."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest

from palace_conformance import contract
from palace_conformance.hosts import reference
from palace_conformance.resources import fixtures_dir

ROOT = Path(__file__).resolve().parents[2]
HOSTS = ROOT / "conformance" / "palace_conformance" / "hosts" / "pi"


def _schema() -> dict:
    return json.loads((fixtures_dir() / "schema" / "scenario.schema.json").read_text())


def _driver_table(heading: str) -> list[str]:
    """The first column of the table under ``heading`` in DRIVER.md (back-quoted names)."""
    text = (ROOT / "DRIVER.md").read_text()
    section = text.split(heading, 1)[1].split("\n#", 1)[0]
    names: list[str] = []
    for row in re.findall(r"^\| (`[^|]+`) \|", section, flags=re.M):
        names += re.findall(r"`([^`]+)`", row)
    return names


def test_capabilities_agree_with_the_schema_the_docs_and_every_host() -> None:
    assert tuple(_schema()["properties"]["requires"]["items"]["enum"]) == contract.CAPABILITIES
    assert tuple(_driver_table("### Capabilities")) == contract.CAPABILITIES
    hello = asyncio.run(reference.ReferenceHost().hello({}))
    assert hello["capabilities"] == list(contract.CAPABILITIES)
    assert hello["protocol"] == contract.DRIVER_PROTOCOL
    node = (HOSTS / "extension-host.mjs").read_text()
    listed = re.search(r"ALL_CAPABILITIES = \[([^\]]*)\]", node)
    assert listed is not None
    harness = re.search(r"HARNESS_CAPABILITIES = \[([^\]]*)\]", node)
    assert harness is not None
    assert tuple(re.findall(r'"([^"]+)"', harness.group(1))) == contract.HARNESS_CAPABILITIES
    # the host's list spreads its harness capabilities after the bridge's own
    assert "...HARNESS_CAPABILITIES" in listed.group(1)
    names = re.findall(r'"([^"]+)"', listed.group(1)) + list(contract.HARNESS_CAPABILITIES)
    assert tuple(names) == contract.CAPABILITIES
    # the extension host marks that list as a placeholder, the reference host's is its own
    assert f'"{contract.CAPABILITIES_PLACEHOLDER}"' in node and "capabilities_source" in node
    assert "capabilities_source" not in hello
    assert '"capabilities_source": "default"' in (ROOT / "DRIVER.md").read_text()


def test_error_kinds_agree_with_the_schema_and_the_docs() -> None:
    kinds = _schema()["$defs"]["error_expect"]["properties"]["kind"]["enum"]
    assert tuple(kinds) == contract.ERROR_KINDS
    assert tuple(_driver_table("### Error kinds")) == contract.ERROR_KINDS
    assert set(contract.ERROR_KINDS) >= contract.HOST_ERROR_KINDS


def test_effect_kinds_agree_with_the_docs() -> None:
    assert tuple(_driver_table("### Effects")) == contract.EFFECT_KINDS


def test_transports_agree_with_the_schema() -> None:
    schema = _schema()
    assert tuple(schema["properties"]["transports"]["items"]["enum"]) == contract.TRANSPORTS


@pytest.mark.parametrize("name", ["DRIVER_PROTOCOL", "DEFAULT_OP_TIMEOUT_MS"])
def test_numbers_are_what_driver_md_says(name: str) -> None:
    text = (ROOT / "DRIVER.md").read_text()
    if name == "DRIVER_PROTOCOL":
        assert f"# Driver protocol v{contract.DRIVER_PROTOCOL}" in text
    else:  # the runner's default is below the host's own default deadline, so the host answers
        host_default = int(re.search(r"default (\d+)\) that the host enforces", text).group(1))
        assert contract.DEFAULT_OP_TIMEOUT_MS < host_default == reference.DEFAULT_TIMEOUT_MS


def test_every_op_in_driver_md_is_served_by_the_reference_and_extension_hosts() -> None:
    documented = set(_driver_table("## Ops"))
    assert {"load", "reload", "shutdown", "exit"} <= documented
    assert set(reference.ReferenceHost().ops) == documented
    # every Node host's ops table is lib/common-ops.mjs's opsOf (a host's methods, op by op)
    extension = (HOSTS / "extension-host.mjs").read_text()
    assert "opsOf(new ExtensionOps(recorder), recorder)" in extension
    node = (HOSTS / "lib" / "common-ops.mjs").read_text()
    block = re.search(r"ops: \{(.*?)\n    \},", node, re.S)
    assert block is not None
    served = set(re.findall(r"(?:^|,)\s*(\w+):", block.group(1)))
    assert served | {"exit", "abandon"} == documented  # lib/server.mjs answers both itself
    server = (HOSTS / "lib" / "server.mjs").read_text()
    assert 'op === "exit"' in server and 'op === "abandon"' in server
