"""What the live-frames engine (``sfcgen send --engine xdp``) needs of the first hop and of the
sending node.

The engine hands frames to the sender's egress veth by XDP redirect.  A veth passes such
frames on only when its peer runs NAPI, which it does when an XDP program is attached to the
peer or GRO is on there; otherwise the kernel drops them without counting.  Before XDP trials,
:func:`enable_peer_napi` turns GRO on at the peer (an interface of the lab, in a namespace
sfclab made) unless an XDP program runs there already, and returns what to undo; :func:`restore`
turns it back off after.

The frames skip the sending node's tcx egress.  Where a chain's classifier runs there
(``sfc_classify_egress``), :func:`sender_classifier` names the lab's pinned maps and the node's
number, and the generator classifies each frame itself with the same program's XDP entry and the
same tables (see ``bpf/sfc_classify.bpf.c``): the measured path is the one the node's own
traffic takes.  Any other program at that hook (an SFC proxy: the sender is a function) would be
skipped, so the engine is refused there.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from dataclasses import dataclass

from ..errors import MeasurementError, SpecError
from ..kernel import netns
from ..plan.model import Plan
from ..realize import dataplane

#: the classifier at a sending node's egress, which the generator runs in its place
EGRESS_CLASSIFIER = "sfc_classify_egress"


@dataclass(frozen=True)
class PeerChange:
    netns: str
    ifname: str


@dataclass(frozen=True)
class Classifier:
    """The lab's classifier as the sending node runs it: the lab's maps directory and the
    node's number in them (``sfcgen send --classify-maps --classify-node``)."""
    maps: str
    node_id: int


def sender_classifier(plan: Plan, src: str) -> Classifier | None:
    """The classifier the xdp engine must run for ``src``'s frames (None: nothing classifies
    what ``src`` sends); a ``SpecError`` when ``src``'s egress runs a program the engine would
    skip."""
    sp = plan.steering
    if sp is None:
        return None
    egress = [a for a in sp.attach.get(src, []) if a[2] == "tcx-egress"]
    skipped = sorted({prog for prog, _, _ in egress if prog != EGRESS_CLASSIFIER})
    if skipped:
        raise SpecError(
            f"expected --engine packet from '{src}': its egress runs {', '.join(skipped)}, "
            "which the xdp engine's frames skip (they leave by XDP redirect); the xdp engine "
            "runs only the chain's classifier in their place", place="--engine")
    if not egress:
        return None
    return Classifier(str(dataplane.lab_dir(plan.lab) / "maps"), sp.node_ids[src])


def _ip_json(ns: str, argv: list[str]) -> list[dict]:
    cp = netns.run(ns, ["ip", "-j", *argv], check=False)
    if cp.returncode != 0:
        raise MeasurementError(f"ip {' '.join(argv)} in {ns} failed: {cp.stderr.strip()}")
    return json.loads(cp.stdout or "[]")


def first_hop_peer(src_netns: str, dst_ip: str) -> tuple[str, str] | None:
    """(namespace, interface) at the other end of the veth that leaves ``src_netns`` toward
    ``dst_ip``; None if that interface is not a veth with a peer in a named namespace."""
    route = _ip_json(src_netns, ["route", "get", dst_ip])
    if not route or "dev" not in route[0]:
        return None
    link = _ip_json(src_netns, ["-d", "link", "show", "dev", route[0]["dev"]])
    info = link[0] if link else {}
    if info.get("linkinfo", {}).get("info_kind") != "veth" or "link_index" not in info:
        return None
    nsid = info.get("link_netnsid")
    peer_ns: str
    if nsid is None:
        peer_ns = src_netns
    else:
        ids = _ip_json(src_netns, ["netns", "list-id"])
        names = [i.get("name") for i in ids if i.get("nsid") == nsid and i.get("name")]
        if not names:
            return None
        peer_ns = str(names[0])
    for peer in _ip_json(peer_ns, ["link", "show"]):
        if peer.get("ifindex") == info["link_index"]:
            return peer_ns, peer["ifname"]
    return None


def _gro_on(ns: str, ifname: str) -> bool:
    cp = netns.run(ns, ["ethtool", "-k", ifname], check=False)
    return any(line.strip().startswith("generic-receive-offload: on")
               for line in cp.stdout.splitlines())


def _has_xdp(ns: str, ifname: str) -> bool:
    link = _ip_json(ns, ["link", "show", "dev", ifname])
    return bool(link and link[0].get("xdp"))


def enable_peer_napi(src_netns: str, dst_ip: str) -> PeerChange | None:
    """Turn GRO on at the first hop's peer if it is off and runs no XDP program (the data
    plane's: NAPI runs already, and the lab chose that interface's GRO); the change to undo,
    or None."""
    peer = first_hop_peer(src_netns, dst_ip)
    if peer is None:
        return None  # not a veth: the device takes XDP frames as it does, sfcgen reports loss
    ns, ifname = peer
    if _gro_on(ns, ifname) or _has_xdp(ns, ifname):
        return None
    cp = netns.run(ns, ["ethtool", "-K", ifname, "gro", "on"], check=False)
    if cp.returncode != 0:
        raise MeasurementError(f"cannot turn GRO on at {ifname} in {ns} for the xdp engine: "
                               f"{cp.stderr.strip()}")
    return PeerChange(ns, ifname)


def restore(change: PeerChange | None) -> None:
    if change is None or not netns.exists(change.netns):
        return
    with contextlib.suppress(subprocess.SubprocessError, OSError):
        netns.run(change.netns, ["ethtool", "-K", change.ifname, "gro", "off"], check=False)
