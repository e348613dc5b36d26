"""A migration's two instances tolerate mid-stream TCP (:mod:`sfclab.live.chains.conntrack`):
``copy`` makes connection tracking liberal about TCP windows inside both namespaces and
nowhere else (the root namespace's setting is left as it was)."""

from __future__ import annotations

import secrets

from sfclab.kernel import netns
from sfclab.live.chains import conntrack


def test_copy_makes_both_instances_liberal_and_leaves_the_root_alone() -> None:
    tag = secrets.token_hex(3)
    old, new = f"sfclab:k{tag}:old", f"sfclab:k{tag}:new"
    with open("/proc/sys/" + conntrack.LIBERAL.replace(".", "/")) as f:
        root = f.read().strip()
    netns.create(old, iproute=False)
    try:
        netns.create(new, iproute=False)
        try:
            assert netns.read_sysctl(old, conntrack.LIBERAL) == "0"
            made, _, errors = conntrack.copy(old, new)
            assert (made, errors) == (0, [])  # nothing tracked yet: nothing to make
            assert netns.read_sysctl(old, conntrack.LIBERAL) == "1"
            assert netns.read_sysctl(new, conntrack.LIBERAL) == "1"
        finally:
            netns.delete(new)
    finally:
        netns.delete(old)
    with open("/proc/sys/" + conntrack.LIBERAL.replace(".", "/")) as f:
        assert f.read().strip() == root
    # a namespace that is gone: an error to report, no exception
    assert conntrack.tolerate_midstream(old) != []
