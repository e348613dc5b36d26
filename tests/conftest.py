"""The order tests are handed out in.  ``scripts/test.sh`` runs the tests not marked ``serial``
on several workers, each taking the next test as it finishes one: the tests marked ``long``
(half a minute or more: SSH hosts, the help examples, the API fuzzer) go first, so that the
phase does not end on one of them while the other workers stand idle, and the unit tier's
many short tests go last, where they fill the gaps.  Otherwise the order is pytest's."""

from __future__ import annotations

from pathlib import Path

import pytest

UNIT = Path(__file__).resolve().parent / "unit"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: (item.get_closest_marker("long") is None,
                                 UNIT in item.path.resolve().parents))
