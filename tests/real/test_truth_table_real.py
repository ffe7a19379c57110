"""The checked-in truth table is what the real mempalace 3.11.0 answers today: re-recording it
(``palace-conformance fake catalog --from-real``) gives no difference."""

from __future__ import annotations

import json

import pytest

from palace_conformance.fidelity.truth_table import (
    catalogue_path,
    differences,
    light_path,
    load_truth,
    record,
    updated_catalogue,
    updated_light_catalogue,
)


@pytest.mark.real_palace
def test_re_recording_the_real_server_changes_nothing() -> None:
    recording = record("real")
    lines = differences(load_truth(), recording.table)
    assert not lines, "\n".join(lines)
    assert updated_catalogue(recording) == json.loads(catalogue_path().read_text("utf-8"))
    assert recording.light is not None and len(recording.light.tools) == 3
    assert updated_light_catalogue(recording) == json.loads(light_path().read_text("utf-8"))
