"""The controller of labs on Kubernetes and ``kill -9`` (issue 29, items 1, 2 and 4), against the
:mod:`.kube` fixture's API server and its Nodes (emulated machines, each with its agent), the
controller run as a process with its own ServiceAccount:

- ``up --kube`` stopped dead after its Nth write to the cluster (the Lab alone; the Lab and a
  part; the Lab and every part but one), each case as ``kill -9`` leaves it: the controller
  removes the lab (never whole: nothing of it allocated or built) and nothing is left, neither
  on the cluster nor on any machine; a ``down`` here then removes this machine's record;
- the controller allocates what ``up --kube`` wrote, and a pass of it stopped dead after its
  2nd part's write: the controller started again finishes the same allocation (the parts
  written already untouched, each part with its plan, one VNI per tunnel), and a lab that
  fitted the Nodes when ``up --kube`` checked but not once the first lab is placed is set
  ``Failed`` with the reason: its ``up --kube`` exits 2 with that line and removes it;
- ``sfclab up --kube`` killed with SIGKILL once its Lab is on the cluster: the controller
  finishes it (a whole lab: allocated, built, marked ``Up``) or removes it (a half one), and
  ``down`` leaves nothing;
- the controller killed with ``kill -9`` while a lab's parts are being built, and started
  again: the lab is reconciled (``Up``), and ``down`` leaves nothing;
- a Lab deleted by hand: its parts are removed by their agents, then deleted; answered
  requests whose caller is gone are deleted.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from sfclab.realize.runtime import kubernetes as kube
from sfclab.realize.runtime import kubernetes_requests as requests
from sfclab.realize.runtime.kubernetes_api import NotFound

from .kube import KubeMachines
from .test_kube_build import (devices, down_leaves_nothing, lab_file, nothing_of, parts,
                              sfclab, up_started, write_lab)
from .labtools import wait_for
from .test_kube_ops import cli

#: one worker runs every test of the API server (make test: --dist loadgroup): one server
pytestmark = pytest.mark.xdist_group("kube")

#: the controller's grace for a Lab without a phase (seconds): short, for the tests
GRACE = 5.0
#: how long the controller and the agents may take to remove a lab (seconds)
REMOVED_WITHIN = 180.0

#: ``up --kube``'s writing (:func:`sfclab.realize.runtime.kubernetes.up`, the real code, the real
#: API server) ended at once after its Nth object is stored, as SIGKILL ends it: no rollback
KILLED_AT = """
import os, sys
from sfclab.realize.kinds import load_lab
from sfclab.realize.runtime import kubernetes
from sfclab.realize.runtime.kubernetes_api import KubeApi, KubeConfig
api = KubeApi(KubeConfig.load(sys.argv[1]))
n, made, real = int(sys.argv[3]), [0], api.create
def create(path, obj, *, dry_run=False):
    got = real(path, obj, dry_run=dry_run)
    if not dry_run:
        made[0] += 1
        if made[0] == n:
            os._exit(137)
    return got
api.create = create
kubernetes.up(load_lab(sys.argv[2]), api)
"""

#: one pass of the controller (the real code, with the controller's credentials) ended at
#: once after its Nth write of a part's Node and plan, as SIGKILL ends it
ALLOCATION_KILLED_AT = """
import os, sys
from sfclab.realize.runtime.kubernetes_api import KubeApi, KubeConfig
from sfclab.realize.runtime.kubernetes_controller import Controller
api = KubeApi(KubeConfig.load(sys.argv[1]))
n, made, real = int(sys.argv[2]), [0], api.request
def request(method, path, body=None, **kw):
    got = real(method, path, body, **kw)
    if method == "PUT" and "/labparts/" in path:
        made[0] += 1
        if made[0] == n:
            os._exit(137)
    return got
api.request = request
Controller(api, print).one_pass()
"""


def gone(ms: KubeMachines, lab: str) -> bool:
    try:
        ms.cluster.admin().get(kube.labs_path(lab))
        return False
    except NotFound:
        return not parts(ms, lab) and not any(
            (ms.state(n) / "labs" / lab).exists() for n in ms.nodes)


@pytest.fixture
def running_controller(kube_machines):
    """The fixture's controller, started again with a short grace."""
    c = kube_machines.start_controller(GRACE)
    yield c
    c.end()


def test_up_killed_after_each_write_is_removed_by_the_controller(
        kube_machines, running_controller, lab_name, tmp_path):
    ms = kube_machines
    before = devices(ms)
    for n in (1, 2, 3):  # the Lab; the Lab and h1's part; the Lab and two of its three parts
        name = f"{lab_name}k{n}"
        cp = subprocess.run([sys.executable, "-c", KILLED_AT, str(ms.cluster.admin_kubeconfig),
                             str(lab_file(tmp_path, name)), str(n)], capture_output=True,
                            text=True, timeout=120)
        assert cp.returncode == 137, cp.stderr
        assert len(parts(ms, name)) == n - 1  # what the kill left: half a lab
        assert not any(p["spec"].get("node") for p in parts(ms, name).values())  # unplaced
        wait_for(f"{name} removed by the controller", lambda name=name: gone(ms, name),
                 REMOVED_WITHIN)
        nothing_of(ms, name, before)
    assert "stopped before the lab was whole" in ms.logs()


def test_a_controller_killed_mid_allocation_finishes_it_and_a_lab_that_no_longer_fits_fails(
        kube_machines, running_controller, lab_name, tmp_path):
    from sfclab.plan.model import Plan
    from sfclab.plan.split import split
    from sfclab.realize.state import LabState

    ms = kube_machines
    before = devices(ms)
    api = ms.cluster.admin()
    big, small = f"{lab_name}a", f"{lab_name}b"
    running_controller.end()  # no controller for now: the labs wait to be allocated
    # a: three hosts of 2 CPUs (every Node's 2); b: three of 1, which fit until a is placed
    fb = write_lab(tmp_path, big, {"a": ("host", "h1"), "b": ("router", "h2"),
                                   "c": ("host", "h3")}, [("a", "b"), ("b", "c")], cpus=2)
    ups = {big: up_started(ms, fb)}
    wait_for("a written whole", lambda: len(parts(ms, big)) == 3, 60)
    ups[small] = up_started(ms, lab_file(tmp_path, small))
    try:
        wait_for("b written whole", lambda: len(parts(ms, small)) == 3, 60)
        cfg = ms.cluster.kubeconfig_for("sfclab-system", "sfclab-controller")
        cp = subprocess.run([sys.executable, "-c", ALLOCATION_KILLED_AT, str(cfg), "2"],
                            capture_output=True, text=True, timeout=120)
        assert cp.returncode == 137, cp.stdout + cp.stderr
        half = parts(ms, big)
        first = {h: (p["metadata"]["generation"], p["spec"]["plan"], p["spec"]["node"])
                 for h, p in half.items() if p["spec"].get("node")}
        assert len(first) == 2 and all("plan" in half[h]["spec"] for h in first)
        assert not (api.get(kube.labs_path(big)).get("status") or {}).get("placement")
        assert not any(p["spec"].get("node") for p in parts(ms, small).values())

        ms.start_controller(GRACE)  # the controller started again
        _, err = ups[small].communicate(timeout=120)
        assert ups[small].returncode == 2, err + ms.logs()
        [line] = [x for x in err.splitlines() if not x.startswith("  ")]  # not progress
        assert line.startswith(f"sfclab: error: lab '{small}' refused by the controller: ")
        assert "does not fit the cluster's Nodes: host h" in line, err
        assert not parts(ms, small) and not LabState(small).exists
        with pytest.raises(NotFound):
            api.get(kube.labs_path(small))
        _, err = ups[big].communicate(timeout=300)
        assert ups[big].returncode == 0, err + ms.logs()
    finally:
        for up in ups.values():
            if up.poll() is None:
                up.kill()
                up.wait()
    lab = api.get(kube.labs_path(big))
    ps = parts(ms, big)
    # the parts written before the kill are as they were: the same plan, no new generation
    assert {h: (p["metadata"]["generation"], p["spec"]["plan"], p["spec"]["node"])
            for h, p in ps.items() if h in first} == first
    placement = {x["host"]: x["node"] for x in lab["status"]["placement"]}
    assert sorted(placement.values()) == sorted(ms.nodes)  # 2 CPUs each: one per Node
    assert {h: p["spec"]["node"] for h, p in ps.items()} == placement
    # the allocation in the Lab's status: each host at its Node's address, a VNI per tunnel,
    # the same as each part's plan holds
    from .kube import MACHINES

    assert {h: a.split("/")[0] for h, a in lab["status"]["underlay"]["hosts"].items()} == \
        {h: MACHINES[ms.machine_of[n]] for h, n in placement.items()}
    vnis = [t["vni"] for t in lab["status"]["tunnels"]]
    assert len(vnis) == 2 and len(set(vnis)) == 2
    plans = {h: Plan.from_dict(p["spec"]["plan"]) for h, p in ps.items()}
    assert {hl.vni for pl in plans.values() for hl in pl.host_links} == set(vnis)
    # this machine's whole plan is the controller's: split, it is each part's plan
    whole = split(Plan.from_dict(LabState(big).plan()))
    assert {h: p.to_dict() for h, p in whole.items()} == \
        {h: Plan.from_dict(p["spec"]["plan"]).to_dict() for h, p in ps.items()}
    assert "placed on Node" in ms.logs()
    down_leaves_nothing(ms, big, before)


def test_up_kube_killed_once_its_lab_is_written_then_down_leaves_nothing(
        kube_machines, running_controller, lab_name, tmp_path):
    ms = kube_machines
    before = devices(ms)
    api = ms.cluster.admin()
    up = up_started(ms, lab_file(tmp_path, lab_name))
    try:
        def written() -> bool:
            try:
                api.get(kube.labs_path(lab_name))
                return True
            except NotFound:
                return False

        wait_for("the Lab on the cluster", written, 60)
        up.send_signal(signal.SIGKILL)
    finally:
        up.wait()
    # whole (its status written before the kill): built and marked Up by the controller;
    # half: removed by it.  Either way the lab settles, then down removes what is left
    def settled() -> bool:
        try:
            return (api.get(kube.labs_path(lab_name)).get("status") or {}).get("phase") == "Up"
        except NotFound:
            return gone(ms, lab_name)

    wait_for("the lab settled", settled, REMOVED_WITHIN)
    down_leaves_nothing(ms, lab_name, before)


def test_the_controller_killed_mid_up_and_restarted_reconciles_the_lab(
        kube_machines, running_controller, lab_name, tmp_path):
    ms = kube_machines
    before = devices(ms)
    api = ms.cluster.admin()
    up = up_started(ms, lab_file(tmp_path, lab_name))
    c = running_controller
    try:
        wait_for("a part building", lambda: any(
            (p.get("status") or {}).get("phase") == "Building"
            for p in parts(ms, lab_name).values()), 60)
        c.signal(signal.SIGKILL)
        c.proc.wait()
        time.sleep(1)
        # the Lab may have no status yet: the controller was killed before it wrote one
        assert (api.get(kube.labs_path(lab_name)).get("status") or {}).get("phase") != "Up"
        c = c.restart()
        _, err = up.communicate(timeout=300)
        assert up.returncode == 0, err + ms.logs()
        wait_for("the Lab Up", lambda: api.get(kube.labs_path(lab_name))["status"]["phase"]
                 == "Up", 60)
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        c.end()
    down_leaves_nothing(ms, lab_name, before)


def test_a_lab_deleted_by_hand_has_its_parts_removed_and_stale_requests_go(
        kube_machines, running_controller, lab_name, tmp_path):
    ms = kube_machines
    before = devices(ms)
    api = ms.cluster.admin()
    cp = sfclab(ms, "up", str(lab_file(tmp_path, lab_name)))
    assert cp.returncode == 0, cp.stderr + ms.logs()
    wait_for("the Lab Up", lambda: api.get(kube.labs_path(lab_name))["status"]["phase"]
             == "Up", 60)
    # a request answered long ago whose caller never deleted it: made as a caller would
    t = requests.KubeTarget("h1", "", parts(ms, lab_name)["h1"]["spec"]["node"], lab_name)
    left = api.create(requests.requests_path(), requests.request_object(t, "tools", {}))
    wait_for("the request answered", lambda: (api.get(requests.requests_path(
        left["metadata"]["name"])).get("status") or {}).get("phase") == "Done", 60)
    api.delete(kube.labs_path(lab_name))  # kubectl delete lab: no garbage collector here
    wait_for("the lab's parts removed and deleted", lambda: gone(ms, lab_name),
             REMOVED_WITHIN)
    with pytest.raises(NotFound):  # its lab gone: its request too
        api.get(requests.requests_path(left["metadata"]["name"]))
    assert cli("down", lab_name).returncode == 0  # this machine's record of it
    nothing_of(ms, lab_name, before)


def test_a_controller_without_rights_exits_1_with_one_line(kube_machines):
    # an account of the namespace bound to no role: its first pass is refused
    from sfclab.realize.runtime.kubernetes_api import Conflict, resource_path

    api = kube_machines.cluster.admin()
    try:
        api.create(resource_path("v1", "serviceaccounts", "sfclab-system"), {
            "apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": "nobody", "namespace": "sfclab-system"}})
    except Conflict:
        pass
    cfg = kube_machines.cluster.kubeconfig_for("sfclab-system", "nobody")
    cp = subprocess.run([sys.executable, "-m", "sfclab.realize.runtime.kubernetes_controller",
                         "--kubeconfig", str(cfg)], capture_output=True, text=True, timeout=60)
    assert cp.returncode == 1
    assert "403 Forbidden" in cp.stderr and len(cp.stderr.strip().splitlines()) == 1
