"""palace_bridge's public face: everything a host or a program needs is importable from the
package, and every error says what happened the same way (a message and a ``detail``)."""

from __future__ import annotations

import inspect

import palace_bridge
from palace_bridge import errors

ERRORS = [cls for _, cls in inspect.getmembers(errors, inspect.isclass)
          if issubclass(cls, errors.PalaceError)]


def test_everything_in_all_is_importable_and_every_error_is_exported() -> None:
    for name in palace_bridge.__all__:
        assert hasattr(palace_bridge, name), name
    assert {cls.__name__ for cls in ERRORS} <= set(palace_bridge.__all__)
    for name in ("create_client", "activate", "BridgeConfig", "Host", "ToolResult", "ToolSpec"):
        assert name in palace_bridge.__all__


def test_every_error_keeps_its_detail_in_one_attribute() -> None:
    made = {
        errors.PalaceTimeout: errors.PalaceTimeout("tools/call", 500, "no reply"),
        errors.PalaceUnavailable: errors.PalaceUnavailable("no reply"),
        errors.PalaceAuthError: errors.PalaceAuthError(401, "no reply"),
        errors.PalaceSessionLost: errors.PalaceSessionLost("no reply"),
        errors.PalaceConnectionClosed: errors.PalaceConnectionClosed("no reply"),
        errors.PalaceProtocolError: errors.PalaceProtocolError("no reply"),
        errors.PalaceHTTPError: errors.PalaceHTTPError(502, None, "no reply"),
    }
    assert set(made) | {errors.PalaceError, errors.PalaceToolError} == set(ERRORS)
    for cls, error in made.items():
        assert error.detail == "no reply", cls.__name__
        assert "no reply" in str(error), cls.__name__
    assert errors.PalaceToolError(-32000, "boom").detail == ""
    assert errors.PalaceSessionLost().detail == ""
