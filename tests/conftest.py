"""How the tests are handed to ``scripts/test.sh``'s workers, which run the tests not marked
``serial`` at once, each worker taking the next test (or group) when it finishes one.

- Order: the tests marked ``long`` (half a minute or more: SSH hosts, the help examples, the API
  fuzzer) go first, so that the phase does not end on one of them while the other workers stand
  idle; the unit tier's many short tests go last, where they fill the gaps.  Otherwise the order
  is pytest's.
- The unit tier is never marked ``serial`` (refused here): the serial phase collects
  ``tests/integration`` only, so it does not import the unit tier's modules again.
- Groups: the tests of a module that has a module-scoped fixture (a lab built once for the
  module, a browser, a state directory of the module's own) run on one worker, one after
  another (``xdist_group``, with ``--dist loadgroup``): the fixture is made once, and a lab it
  names is never made twice at the same time."""

from __future__ import annotations

from pathlib import Path

import pytest

UNIT = Path(__file__).resolve().parent / "unit"


def shares_a_module_fixture(item: pytest.Item) -> bool:
    info = getattr(item, "_fixtureinfo", None)
    defs = info.name2fixturedefs.values() if info is not None else []
    return any(fd.scope == "module" for fds in defs for fd in fds)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("serial") is not None and UNIT in item.path.resolve().parents:
            # the serial phase collects tests/integration only: it would run in neither phase
            raise pytest.UsageError(f"{item.nodeid}: a unit test is never marked serial (it "
                                    "times nothing the machine's load changes)")
        if shares_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(item.path.name))
    items.sort(key=lambda item: (item.get_closest_marker("long") is None,
                                 UNIT in item.path.resolve().parents))
