"""Integration tests build real labs as root, each under a unique name, in a state directory of
the test session's own; whatever a test leaves is removed at the end by name (``down --all``
on that state directory), never by pattern.

Every test in this directory is marked ``root`` here, and skipped here, with the reason, when
pytest does not run as root: the one place that says so (test files carry no root skip)."""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import pytest

from . import backlog_rerun

HERE = Path(__file__).resolve().parent
NEEDS_ROOT = "integration tests need root to make namespaces"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark this directory's tests ``root``; without root, skip them with the reason.  (The hook
    sees the whole session's items, the unit tests' too: only ours are marked.)"""
    skip = pytest.mark.skip(reason=NEEDS_ROOT) if os.geteuid() != 0 else None
    for item in items:
        if HERE in item.path.resolve().parents:
            item.add_marker(pytest.mark.root)
            if skip is not None:
                item.add_marker(skip)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
    """A test of this directory not marked serial that fails while the machine's CPU backlogs
    drop frames (another test's flood) is run once more (:mod:`.backlog_rerun`)."""
    if HERE not in item.path.resolve().parents or item.get_closest_marker("serial"):
        return None
    return backlog_rerun.run(item, nextitem, item.config.rootpath / "build" / "tests" /
                             "reruns.txt")


@pytest.fixture(scope="session", autouse=True)
def state_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("sfclab-state")
    old = os.environ.get("SFCLAB_STATE_DIR")
    os.environ["SFCLAB_STATE_DIR"] = str(d)
    yield d
    from sfclab.realize import lifecycle

    lifecycle.down_all()
    if old is None:
        os.environ.pop("SFCLAB_STATE_DIR", None)
    else:
        os.environ["SFCLAB_STATE_DIR"] = old


@pytest.fixture
def lab_name(request):
    """A unique lab name for one test (short: it becomes part of namespace names)."""
    return f"t{secrets.token_hex(3)}"


@pytest.fixture
def running_lab(lab_name):
    """``running_lab(dict) -> Lab``: build a lab that is always removed after the test."""
    from sfclab.api import Lab

    made = []

    def make(d: dict):
        d = {**d, "name": d.get("name", lab_name)}
        lab = Lab.from_dict(d).up()
        made.append(lab)
        return lab

    yield make
    for lab in made:
        lab.down()


@pytest.fixture
def veth_pair(lab_name):
    """Two namespaces joined by one veth: a two-node lab, src 198.18.0.1 and dst 198.18.0.2.
    Yields ``(src_netns, dst_netns)``; afterwards checks that the test left no process in them,
    then removes the lab whatever happened."""
    from sfclab.api import Lab
    from sfclab.kernel import netns

    lab = Lab.from_dict({"name": lab_name, "chain": {"length": 2}}).up()
    try:
        assert (str(lab.address("src")), str(lab.address("dst"))) == ("198.18.0.1", "198.18.0.2")
        spaces = (lab.netns("src"), lab.netns("dst"))
        yield spaces
        left = netns.pids_in(list(spaces))
        assert not left, f"processes left in the test namespaces: {left}"
    finally:
        lab.down()


@pytest.fixture(scope="session")
def sfcgen() -> str:
    """Path of the native generator, built first if this checkout has none."""
    import subprocess

    from sfclab.traffic import native

    if not os.environ.get(native.ENV_BINARY):
        path = native.repo_root() / "native" / "build" / "sfcgen"
        if not path.exists():
            subprocess.run(["make", "-s", "-C", str(native.repo_root() / "native")], check=True)
    return native.sfcgen_binary()


from .kube import kube_cluster, kube_machines  # noqa: E402,F401  (the API server, its Nodes)
