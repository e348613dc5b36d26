"""A container killed from outside (``kill -9`` of its main process, as a crash or an operator
would): the lab stays up, its namespaces and routes live on, and every view reports the node's
container dead (exited 137, not OOM-killed): ``inspect`` (JSON and text), ``graph`` and the web
view's topology, for a node in a container and for a ``container`` function alike."""

from __future__ import annotations

import os
import signal
import time

from .labtools import leftovers, nothing_left
from .test_containers import containers_of, image, inspect, sfclab, write_lab  # noqa: F401


def test_a_container_killed_from_outside_is_reported_dead_and_the_lab_stays_up(
        tmp_path, lab_name, image):  # noqa: F811
    f = write_lab(tmp_path, lab_name,
                  f"  src: {{kind: host, image: {image}}}\n"
                  f"  fn: {{kind: container, image: {image}}}\n"
                  "  dst: {kind: host}\n",
                  "  - endpoints: [src, fn]\n  - endpoints: [fn, dst]\n")
    cp = sfclab("up", str(f))
    assert cp.returncode == 0, cp.stderr
    try:
        before = inspect(lab_name)["nodes"]
        for node in ("src", "fn"):
            c = before[node]["container"]
            assert c["running"] is True and c["pid"] > 0, c
            os.kill(c["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            d = inspect(lab_name)
            if not any(d["nodes"][n]["container"]["running"] for n in ("src", "fn")):
                break
            time.sleep(0.2)
        assert d["status"] == "up"
        for node in ("src", "fn"):
            c = d["nodes"][node]["container"]
            assert (c["status"], c["running"], c["exit_code"]) == ("exited", False, 137), c
            assert c["oom_killed"] is False and c["present"] is True, c
        # the namespaces outlive their containers: src reaches dst through fn's forwarding
        dst = d["nodes"]["dst"]["interfaces"][0]["addresses"][0].split("/")[0]
        ping = sfclab("exec", lab_name, "src", "--", "ping", "-c", "1", "-W", "2", dst)
        assert ping.returncode == 0, ping.stdout + ping.stderr
        text = sfclab("inspect", lab_name)
        assert text.returncode == 0, text.stderr
        for node in ("src", "fn"):
            c = d["nodes"][node]["container"]
            assert f"container {c['name']} (image {image}, id {c['id']}): exited 137" \
                in text.stdout, text.stdout
        graph = sfclab("graph", lab_name, "--format", "dot")
        assert graph.returncode == 0, graph.stderr
        assert f"host, image {image} (exited 137)" in graph.stdout, graph.stdout
        assert f"container, image {image} (exited 137)" in graph.stdout, graph.stdout
        from tests.webclient import api_client

        with api_client() as client:
            r = client.get(f"/api/labs/{lab_name}/topology")
        assert r.status_code == 200, r.text
        web = {n["id"]: n for n in r.json()["nodes"]}
        for node in ("src", "fn"):
            assert web[node]["image"] == image
            shown = web[node]["container"]
            assert shown["running"] is False and shown["exit_code"] == 137, shown
    finally:
        down = sfclab("down", lab_name)
    assert down.returncode == 0, down.stderr
    assert containers_of(lab_name) == [] and nothing_left(lab_name), leftovers(lab_name)
