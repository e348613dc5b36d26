"""What the live-frames engine (``sfcgen send --engine xdp``) needs of the first hop.

The engine hands frames to the sender's egress veth by XDP redirect.  A veth passes such
frames on only when its peer runs NAPI, which it does when an XDP program is attached to the
peer or GRO is on there; otherwise the kernel drops them without counting.  Before XDP trials,
:func:`enable_peer_napi` turns GRO on at the peer (an interface of the lab, in a namespace
sfclab made) and returns what to undo; :func:`restore` turns it back off after.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from dataclasses import dataclass

from ..errors import MeasurementError
from ..kernel import netns


@dataclass(frozen=True)
class PeerChange:
    netns: str
    ifname: str


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


def enable_peer_napi(src_netns: str, dst_ip: str) -> PeerChange | None:
    """Turn GRO on at the first hop's peer if it is off; the change to undo, or None."""
    peer = first_hop_peer(src_netns, dst_ip)
    if peer is None:
        return None  # not a veth: the device takes XDP frames as it does, sfcgen reports loss
    ns, ifname = peer
    if _gro_on(ns, ifname):
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
