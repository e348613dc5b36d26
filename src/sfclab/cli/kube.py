"""``sfclab up --kube`` and ``down --kube``: a lab's resources on a Kubernetes cluster, printed.

The cluster is the one of the kubeconfig (``--kubeconfig``, else ``$KUBECONFIG``, else
``~/.kube/config``) and its context (``--context``, else its current one); the library
(:mod:`sfclab.realize.runtime.kubernetes`) writes the lab file's objects (after checking that
the lab can fit the Nodes) and removes them, and (:mod:`sfclab.realize.runtime.kubernetes_parts`)
waits for the controller and the agents: ``up`` until the controller has allocated the lab
(placed its hosts, planned it: :mod:`sfclab.realize.runtime.kubernetes_controller`; a lab it
refuses exits 2 with its reason) and every part is ``Up``, ``down`` until every part is
``Removed`` (each change shown on stderr as it comes, up to ``--timeout`` seconds each)."""

from __future__ import annotations

import argparse
import sys
import time

from .output import emit
from .status import ExitStatus


def add_arguments(sp: argparse.ArgumentParser) -> None:
    """The cluster options of a command that takes ``--kube``."""
    sp.add_argument("--kube", action="store_true",
                    help="on the Kubernetes cluster of the kubeconfig (docs/kubernetes.md)")
    sp.add_argument("--kubeconfig", metavar="FILE",
                    help="with --kube: the kubeconfig (default: $KUBECONFIG, ~/.kube/config)")
    sp.add_argument("--context", help="with --kube: the kubeconfig's context (default: its "
                    "current one)")
    sp.add_argument("--timeout", type=float, default=300.0, metavar="S",
                    help="with --kube: how long to wait for the agents (default: 300 s)")


def _say(m: str) -> None:
    print(f"  {m}", file=sys.stderr, flush=True)


def _api(a: argparse.Namespace):  # noqa: ANN202 (a KubeApi, imported lazily)
    from ..realize.runtime.kubernetes_api import KubeApi, KubeConfig  # light start-up

    return KubeApi(KubeConfig.load(a.kubeconfig, a.context))


def _timeout(a: argparse.Namespace) -> float:
    from ..errors import SpecError

    t = float(getattr(a, "timeout", 300.0))
    if not 0 < t <= 86400:
        raise SpecError(f"--timeout: expected seconds in (0, 86400], got {t:g}")
    return t


def up_kube(a: argparse.Namespace) -> int:
    """``up --kube``: the lab checked as ``up`` does, then written to the cluster, allocated by
    the controller and built by the agents through the ``kubernetes`` runtime (the row of :data:`sfclab.realize.runtime.RUNTIMES`), journaled
    here, so ``down`` and ``inspect`` find the cluster."""
    from ..errors import LabError
    from ..realize import lifecycle  # light start-up: load only what this command needs
    from ..realize.kinds import load_lab
    from ..realize.runtime import kubernetes
    from ..realize.runtime.kubernetes_runtime import KubeRuntime
    from ..realize.state import LabState

    lab = load_lab(a.file)
    timeout = _timeout(a)
    kubernetes.check_names(lab)  # before the cluster is asked anything
    t0 = time.monotonic()
    state = LabState(lab.name)
    with state.locked():
        if state.exists:
            raise LabError(f"lab '{lab.name}' already exists on this machine; "
                           f"run 'sfclab down {lab.name}' first")
        plan = lifecycle.check(lab)
        rt = KubeRuntime(state, _api(a), a.kubeconfig, a.context, timeout)
        rt.up(lab, plan, _say)
    placement = rt.placement
    out = {"name": lab.name, "namespace": kubernetes.NAMESPACE, "placement": placement,
           "parts": [f"{lab.name}.{h}" for h in placement],
           "seconds": round(time.monotonic() - t0, 4)}
    emit(out, a.json, lambda d: f"lab '{d['name']}' is up on the cluster: "
         f"{len(d['parts'])} parts, " + ", ".join(f"{h} on {n}" for h, n in
                                                  d["placement"].items()))
    return ExitStatus.OK


def down_kube(a: argparse.Namespace) -> int:
    if a.all or not a.name:
        from .output import fail

        return fail("with --kube, give a lab name (--all is for this machine's labs)",
                    ExitStatus.BAD_INPUT)
    from ..realize.runtime.kubernetes_parts import remove  # light start-up

    from ..realize.runtime.kubernetes_runtime import journaled
    from ..realize.state import LabState

    out = remove(_api(a), a.name, _timeout(a), _say)
    state = LabState(a.name)
    if state.exists and journaled(state) is not None:  # this machine's record of it
        state.remove()
    emit(out, a.json, lambda d: f"lab '{d['name']}' removed from the cluster: "
         f"{len(d['parts'])} parts" + ("" if d["lab"] else " (its Lab was gone already)"))
    return ExitStatus.OK


def ls_kube(a: argparse.Namespace) -> int:
    from ..realize.runtime.kubernetes_agent import listing  # light start-up

    def table(rows: list[dict]) -> str:
        if not rows:
            return "no labs on the cluster"
        out = [f"{'NAME':20} {'STATUS':10} {'HOSTS':>5} {'NODES':>5} {'HELD':>5}  CREATED"]
        out += [f"{r['name']:20} {r['status']:10} {r['hosts']:>5} {r['nodes']:>5} "
                f"{r['held']:>5}  {r['created']}" for r in rows]
        return "\n".join(out)
    emit(listing(_api(a)), a.json, table)
    return ExitStatus.OK


def host_ls_kube(a: argparse.Namespace) -> int:
    """``host ls --kube LAB``: each host of the lab as its part's status says (its Node, phase,
    agent, whether that agent's Lease is live, its nodes, its agent's message)."""
    from ..errors import LabError
    from ..realize.runtime.kubernetes_agent import expired, lease_path
    from ..realize.runtime.kubernetes_parts import parts_of, phase
    from ..realize.runtime.kubernetes_runtime import part_row

    api = _api(a)
    lab, parts = parts_of(a.name, api)
    if lab is None and not parts:
        raise LabError(f"no lab '{a.name}' on the cluster {api.config.server}")
    live = {x["spec"].get("holderIdentity") for x in api.items(lease_path()) if not expired(x)}
    rows = [{**part_row(p, phase(p)), "live": p["spec"].get("node") in live} for p in parts]

    def table(rs: list[dict]) -> str:
        out = [f"{'HOST':12} {'NODE':24} {'PHASE':9} {'LIVE':5} NODES"]
        out += [f"{r['host']:12} {r['node']:24} {r['phase']:9} {'yes' if r['live'] else 'no':5} "
                f"{','.join(r['nodes'])}" for r in rs]
        return "\n".join(out)
    emit(rows, a.json, table)
    return ExitStatus.OK
