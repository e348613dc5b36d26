"""The SFC data plane as a part of the build: a lab with ``chains`` gets its eBPF programs.

At ``prepare`` (links up, addresses set): the lab's bpffs directory (journaled), each path
node's programs loaded by ``sfc-steer`` and attached to its interfaces (the attachments are held
by the interfaces, inside the lab's namespaces; the first load makes the lab-wide maps, pinned
in the directory), hosts that classify told to send one segment per packet, then every table of
the plan written.  ``down`` unpins the directory (the maps go) and removing the namespaces
detaches the programs; after ``kill -9`` the journal still names the directory.

On a host driven over SSH (a part built by its agent) the same happens for the host's share
only (:mod:`sfclab.plan.sfc_hosts`): its nodes' programs, its own maps in its sub-directory of
the lab's bpffs directory, the entries its nodes use, and first the derived MACs on its chain
nodes' interfaces (the other hosts address them by those).  A host with no chain node (nothing
of any chain placed there yet) still gets its share's maps, empty (``sfc-steer --maps-of``
loads one object for its maps and attaches nothing): ``chain add`` and ``chain migrate --to``
place instances there later, and every reader of the shares (counters, the host's watcher)
finds maps on every host.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import RealizeError
from ..plan.sfc import SteeringPlan
from ..plan.sfc_hosts import addressed, interface_mac, remote_host
from . import dataplane, ownership
from .part import Part
from .step import step

if TYPE_CHECKING:
    from ..plan.model import Plan
    from .build import Builder
    from .state import LabState
    from .teardown import TeardownReport

ENV_BINARY = "SFCLAB_STEER"
PROGRAM_OBJECT = {"sfc_forward": "sfc_forward.bpf.o", "sfc_classify_egress": "sfc_classify.bpf.o",
                  "sfc_classify_ingress": "sfc_classify.bpf.o",
                  "sfc_proxy_in": "sfc_proxy_in.bpf.o", "sfc_proxy_out": "sfc_proxy_out.bpf.o",
                  "sfc_fw": "fw.bpf.o",
                  "sfc_nat": "nat.bpf.o", "sfc_nat_stage": "nat.bpf.o",
                  "sfc_lb": "balancer.bpf.o", "sfc_lb_stage": "balancer.bpf.o",
                  "sfc_fw_stage": "fw.bpf.o", "sfc_pipe": "pipeline.bpf.o"}


def steer_binary() -> Path:
    """``$SFCLAB_STEER``, else ``native/build/sfc-steer`` of this checkout; its eBPF objects
    are beside it."""
    env = os.environ.get(ENV_BINARY)
    path = Path(env) if env else Path(__file__).resolve().parents[3] / "native" / "build" / \
        "sfc-steer"
    if not path.is_file():
        raise RealizeError(f"the SFC data plane loader is not built ({path} is missing): run "
                           f"`make -C native`", obj=str(path))
    return path


class Steering(Part):
    name = "steering"
    teardown_rank = 12  # after functions stop, before processes end and namespaces go

    def journal(self, plan: Plan) -> list[dict[str, Any]]:
        if not plan.steering:
            return []
        return [{"op": "bpffs", "path": str(_top(plan))}]

    def prepare(self, b: Builder) -> None:
        sp = b.plan.steering
        if sp is None:
            return
        binary = steer_binary()
        top = _top(b.plan)
        with step(f"bpffs directory {top}"):
            if top == dataplane.lab_dir(b.plan.lab):
                maps = dataplane.make_dir(b.plan.lab)
            else:  # a host's share
                dataplane.ensure_bpffs()
                maps = top / "maps"
                maps.mkdir(parents=True, exist_ok=True)
        local = _local(b.plan, sp)
        ifaces: dict[tuple[str, str], dataplane.Iface] = {}
        if local is not None:
            ifaces.update(_set_macs(b, sp, local))
        for node in sp.node_ids:
            if local is not None and node not in local:
                continue
            ipr = b.iproute(b.plan.netns_of(node))
            for link in ipr.get_links():  # a TUN device (a tun function's) has no address
                mac = link.get_attr("IFLA_ADDRESS") or "00:00:00:00:00:00"
                ifaces[(node, link.get_attr("IFLA_IFNAME"))] = dataplane.Iface(
                    link["index"], bytes.fromhex(mac.replace(":", "")))
        for node, ifname in sp.single_segment:
            if local is not None and node not in local:
                continue
            with step(f"gso_max_segs 1 on {ifname} of {node}"):
                b.iproute(b.plan.netns_of(node)).link(
                    "set", index=ifaces[(node, ifname)].index, gso_max_segs=1)
        for node, node_id in sp.node_ids.items():
            if (local is not None and node not in local) or not sp.attach.get(node):
                continue  # another host's, or a node that only receives plain packets
            argv = [str(binary), "--maps", str(maps), "--node-id", str(node_id), "--netns", b.plan.netns_of(node)]
            argv += [f"{binary.parent / PROGRAM_OBJECT[prog]}:{prog}:{ifname}:{hook}"
                     for prog, ifname, hook in sp.attach[node]]
            with step(f"eBPF programs of {node}"):
                cp = subprocess.run(argv, capture_output=True, text=True, check=False)
                if cp.returncode != 0:
                    raise RealizeError(cp.stderr.strip() or f"sfc-steer exited {cp.returncode}",
                                       obj=f"eBPF programs of {node}")
        if local is not None and not any(sp.attach.get(n) for n in local):
            # no node of any chain here (yet), or none that runs a program: empty maps
            with step(f"maps of {b.plan.hosts[0].name}'s share"):
                make_maps(binary, maps)
        with step("SFC tables"), dataplane.DataPlane(b.plan.lab, top) as dp:
            dp.load(sp, ifaces, local, {n.node: n.name for n in b.plan.namespaces
                                        if local is None or n.node in local})

    def teardown(self, state: LabState, plan: Plan | None, journal: list[dict[str, Any]],
                 report: TeardownReport) -> None:
        for e in journal:
            if e.get("op") != "bpffs":
                continue
            path = Path(e["path"])
            top = dataplane.lab_dir(state.name)
            problem = ownership.bpffs_problem(e["path"], top)  # the journal was read with it
            if problem:
                report.errors.append(f"bpffs {path}: {problem}; left alone")
                continue
            share = path != top  # a host's share
            try:
                dataplane.remove_dir(path)
                if share:  # then the lab's directory, and sfclab's, when no other uses them
                    for d in (top, top.parent):
                        dataplane.remove_if_empty(d)
            except OSError as err:
                report.errors.append(f"bpffs {path}: {err}")

    def inspect(self, state: LabState, plan: Plan, nodes: dict[str, Any]) -> None:
        sp = plan.steering
        if sp is None:
            return
        try:
            dp = dataplane.DataPlane(plan.lab, _top(plan))
        except RealizeError:
            return
        with dp:
            for node, node_id in sp.node_ids.items():
                if node in nodes:
                    nodes[node]["sfc"] = {"node_id": node_id, "counters": dp.counters(node_id)}


def make_maps(binary: Path, maps: Path) -> None:
    """The lab-wide maps made and pinned in ``maps`` without a program attached (every SFC
    object declares them all; ``sfc_forward``'s is loaded for them, then closed)."""
    cp = subprocess.run([str(binary), "--maps", str(maps), "--maps-of",
                         str(binary.parent / PROGRAM_OBJECT["sfc_forward"])],
                        capture_output=True, text=True, check=False)
    if cp.returncode != 0:
        raise RealizeError(cp.stderr.strip() or f"sfc-steer exited {cp.returncode}",
                           obj=str(maps))


def maps_dir(plan: Plan) -> Path:
    """The directory of the lab's pinned maps here (the lab's, or this host's share's)."""
    return _top(plan) / "maps"


def _top(plan: Plan) -> Path:
    """The lab's bpffs directory, or on a host driven over SSH its share's."""
    host = remote_host(plan)
    return dataplane.share_dir(plan.lab, host.name) if host else dataplane.lab_dir(plan.lab)


def _local(plan: Plan, sp: SteeringPlan) -> set[str] | None:
    """The chain nodes this host's share serves (None: all, the lab built in one place)."""
    host = remote_host(plan)
    return None if host is None else {n for n in sp.node_ids if n in set(host.nodes)}


def _set_macs(b: Builder, sp: SteeringPlan, local: set[str]
              ) -> dict[tuple[str, str], dataplane.Iface]:
    """The derived MACs set on the local chain nodes' interfaces; the other hosts' chain
    nodes' interfaces as they are known here (their derived MACs; no index)."""
    remote: dict[tuple[str, str], dataplane.Iface] = {}
    for node, ifname in addressed(sp.hops, sp.directions):
        if node not in local:
            remote[(node, ifname)] = dataplane.Iface(0, interface_mac(b.plan.lab, node, ifname))
    for node in sorted(local):
        ipr = b.iproute(b.plan.netns_of(node))
        for link in ipr.get_links():
            ifname = link.get_attr("IFLA_IFNAME")
            if ifname == "lo":
                continue
            with step(f"MAC of {ifname} of {node}"):
                ipr.link("set", index=link["index"],
                         address=dataplane.mac_text(interface_mac(b.plan.lab, node, ifname)))
    return remote


STEERING = Steering()
