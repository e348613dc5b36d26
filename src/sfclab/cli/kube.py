"""``sfclab up --kube`` and ``down --kube``: a lab's resources on a Kubernetes cluster, printed.

The cluster is the one of the kubeconfig (``--kubeconfig``, else ``$KUBECONFIG``, else
``~/.kube/config``) and its context (``--context``, else its current one); the library
(:mod:`sfclab.realize.runtime.kubernetes`) writes and removes the objects."""

from __future__ import annotations

import argparse
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


def _api(a: argparse.Namespace):  # noqa: ANN202 (a KubeApi, imported lazily)
    from ..realize.runtime.kubernetes_api import KubeApi, KubeConfig  # light start-up

    return KubeApi(KubeConfig.load(a.kubeconfig, a.context))


def up_kube(a: argparse.Namespace) -> int:
    from ..realize.kinds import load_lab  # light start-up: load only what this command needs
    from ..realize.runtime import kubernetes  # light start-up

    lab = load_lab(a.file)
    t0 = time.monotonic()
    res = kubernetes.up(lab, _api(a))
    out = {"name": lab.name, "namespace": kubernetes.NAMESPACE, "placement": res.placement,
           "parts": [p["metadata"]["name"] for p in res.parts],
           "seconds": round(time.monotonic() - t0, 4)}
    emit(out, a.json, lambda d: f"lab '{d['name']}' written to the cluster: "
         f"{len(d['parts'])} parts, " + ", ".join(f"{h} on {n}" for h, n in
                                                  d["placement"].items()))
    return ExitStatus.OK


def down_kube(a: argparse.Namespace) -> int:
    from ..realize.runtime import kubernetes  # light start-up

    if a.all or not a.name:
        from .output import fail

        return fail("with --kube, give a lab name (--all is for this machine's labs)",
                    ExitStatus.BAD_INPUT)
    out = kubernetes.down(a.name, _api(a))
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
