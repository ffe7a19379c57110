"""One error root (palace_conformance/errors.py): every exception class of the kit derives from
ConformanceError, and no exception name is defined twice."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections import Counter

import palace_conformance
from palace_conformance.errors import ConformanceError


def _exception_classes() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(palace_conformance.__path__, "palace_conformance."):
        module = importlib.import_module(info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if (issubclass(value, BaseException) and value.__module__ == info.name):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return list(found.values())


def test_every_exception_of_the_kit_derives_from_the_root() -> None:
    classes = _exception_classes()
    assert len(classes) > 30  # the walk found the kit's errors
    # interrupts (KeyboardInterrupt's kin) are not errors: they end a run as ^C does
    strays = [f"{c.__module__}.{c.__qualname__}" for c in classes
              if issubclass(c, Exception) and not issubclass(c, ConformanceError)]
    assert strays == []


def test_no_exception_name_is_defined_twice() -> None:
    counts = Counter(c.__qualname__ for c in _exception_classes())
    assert [name for name, count in counts.items() if count > 1] == []
