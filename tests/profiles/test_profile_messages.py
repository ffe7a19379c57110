"""A profile's mistakes in the kit's own words: the field, the fix and docs/profiles.md, never
jsonschema's ``oneOf`` text (a knob is one of three shapes; the one the author meant is judged)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from palace_conformance.runner.profile import ProfileError, load_profile


def error_for(tmp_path: Path, knob: object) -> str:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"schema_version": 1, "name": "t", "entry": "reference",
                                "knobs": {"MEMPALACE_MCP_TIMEOUT_MS": knob}}))
    with pytest.raises(ProfileError) as raised:
        load_profile(path)
    return str(raised.value)


def test_a_wrong_unit_names_the_field_the_allowed_values_and_the_doc(tmp_path: Path) -> None:
    message = error_for(tmp_path, {"env": "MY_TIMEOUT_S", "unit": "sec"})
    assert message == (f"profile {tmp_path / 'p.json'} at /knobs/MEMPALACE_MCP_TIMEOUT_MS/unit: "
                       '"sec" is not allowed here; use one of: "ms", "s" '
                       "(every field: docs/profiles.md)")


def test_a_fixed_knob_of_the_wrong_type_is_judged_as_a_fixed_knob(tmp_path: Path) -> None:
    message = error_for(tmp_path, {"fixed": True})
    assert "at /knobs/MEMPALACE_MCP_TIMEOUT_MS/fixed: expected integer or string" in message
    assert "not valid under any" not in message and "docs/profiles.md" in message
