"""Removing many containers at once stops them side by side.  Containers whose main process
ignores SIGTERM (``sleep`` as PID 1) each take the whole stop timeout (1 s) before SIGKILL;
podman's default (three workers per CPU: six on two cores) stops 12 of them in two rounds, at
least 2 s, where :func:`sfclab.kernel.podman.remove` stops them in one.  Both are timed side by
side on the same machine (its load hits both), and sfclab's must be the faster by at least
half a timeout.  The containers run in a namespace this test makes and carry this test's label;
both are removed after."""

from __future__ import annotations

import subprocess
import time

import pytest

from sfclab.kernel import podman

from .test_containers import image  # noqa: F401

COUNT = 12


@pytest.mark.serial  # times what the machine's load changes (CI with 8 workers: 3.2 s, 3.7 s)
def test_many_containers_that_ignore_sigterm_are_stopped_together(lab_name, image):  # noqa: F811
    ns = f"{lab_name}rm"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    label = {"sfclab.test": lab_name}
    try:
        took = {}
        for way in ("podman's default", "sfclab"):
            ids = [podman.run(podman.Container(
                name=f"{lab_name}-rm{i}", image=image, netns_path=f"/run/netns/{ns}",
                labels=label, cmd=("sleep", "infinity"))) for i in range(COUNT)]
            assert sorted(podman.find(label)) == sorted(ids)
            assert all(s.running for s in podman.inspect(ids).values())
            t0 = time.monotonic()
            if way == "sfclab":
                podman.remove(ids, stop_timeout=1)
            else:
                subprocess.run(["podman", "rm", "--force", "--time", "1", "--", *ids],
                               env=podman.env(), check=True, capture_output=True)
            took[way] = time.monotonic() - t0
            assert podman.find(label) == []
        assert took["sfclab"] < took["podman's default"] - 0.5, took
    finally:
        podman.remove(podman.find(label), stop_timeout=0)
        subprocess.run(["ip", "netns", "delete", ns], check=False)
