"""``sfclab chain migrate LAB INSTANCE [--to HOST]``: make-before-break.

1. **Clone.**  A new node ``<instance>.m<k>`` of the same kind, keys, CPU and memory, on the
   target host (placement checks it has room for both while they overlap), wired to the same
   attach node, its function started; *ready* when its program runs (kinds with a process) and
   its link answers (one ping to the attach node, which also settles its ARP entry).
2. **Paths.**  Every path through the instance is planned again through the clone, in a fresh
   range of the path table (paths that do not pass the instance keep their stacks); labels for
   the clone are written.  Nothing uses them yet.
3. **State.**  Connection-tracking entries are copied from the instance to the clone
   (:mod:`sfclab.live.chains.conntrack`).
4. **Switch.**  Each direction's slot table is rewritten in one map update (slot k keeps path
   k, now through the clone; paths through instances the watcher found dead stay out): a flow
   moves whole, between two packets.  The time of these updates is the switch-over time
   reported.  The plan is saved with the new paths under the same slot lock, so the watcher
   never acts on a plan older than the slot tables.  Entries the instance made meanwhile are
   copied again.
5. **Drain.**  The instance is left running until no packet has entered it for ``drain_s``
   (at most 5 s), so packets already on their way to it or inside it leave it normally.
6. **Stop.**  The instance stops, its namespace goes, its paths and labels are cleared, and
   the plan and the chain's record name the clone in its place.

``--to`` names a host of the lab (:func:`sfclab.live.hosts.capacity.hosts_of`: the lab file's hosts
and those ``host add`` made; ``local``, the machine, in a lab without hosts); the clone joins
that host's cgroups (its CPUs and memory) and is linked to the same attach node as the
instance (see :mod:`sfclab.live.ops.hostops` for what an emulated host's placement means).
An instance in a container gives its clone the same image and settings; on a host reached over
SSH the target host's agent checks that it can run it (the image in its store) before anything
is made, and makes the clone's container there.

**Functions of the lab file's own chains** move the same way.  Their clone is one-armed like
an added instance's, hung off the forwarding node before the function on its chain's first
path through it (else the one after); a NAT's ``outside`` becomes that node.  What differs is
step 6: the lab-file node is a piece of the lab's topology (its links carry the lab's routes
and, as transit, the chain's own new paths), so only its *function* stops (processes, and its
nftables rules; a shaper deletes the qdiscs it made): its namespace,
links and addresses stay, it forwards as a plain transit node, and the plan drops it from
the lab's functions (``down`` has nothing of it to stop; its host no longer counts its CPU
and memory).  The clone takes its place: the chain's paths, ``chain ls``, ``inspect``,
``graph`` and ``host ls`` name the clone, ``down`` removes it (journaled), and the record
``moved/<chain>.json`` (:mod:`sfclab.live.record`) keeps the clones and which lab-file node each
stands for; a clone can be migrated again like any instance.
"""

from __future__ import annotations

import shutil
import time
from typing import TYPE_CHECKING, Any

from ...errors import LabError
from ...plan import placement
from ...plan.chainadd import Addition, NewNode
from ...plan.containers import moved_to
from ...plan.chainpaths import Topology
from ...plan.migration import chain_encap, plan_clone
from ...plan.model import Plan
from ...plan.tunnels import labelled_mtu
from ...plan.sfc import DirectionPlan
from ...realize import lifecycle
from ...realize.state import LabState
from .. import record
from ..hosts import underlay
from ..record import steering_of
from ..runtime.table import live_for
from ..chains.moves import Owner
from ..hosts.capacity import LOCAL, hosts_of

if TYPE_CHECKING:  # light start-up: host ls loads no chain-file models
    from ..request import MigrateInstance



def owner(state: LabState, plan: Plan, instance: str) -> Owner:
    """The record ``instance`` belongs to: an added chain's, the clones of a lab-file chain,
    or (an instance of a lab-file chain not moved yet) a fresh record of that chain's clones,
    with ``instance`` described as a node of the lab file (:func:`_lab_node`)."""
    for add, _ in record.additions(state).values():
        if any(n.node == instance for n in add.nodes):
            return Owner(add, next(n for n in add.nodes if n.node == instance), None)
    for add, moved in record.moves(state).values():
        if any(n.node == instance for n in add.nodes):
            return Owner(add, next(n for n in add.nodes if n.node == instance), moved)
    sp = steering_of(plan)
    for d in sp.directions:
        if any(instance in p.instances for p in d.paths):
            add, moved = record.moves(state).get(
                d.chain, (Addition(d.chain, "", source="lab file"), {}))
            return Owner(add, _lab_node(plan, d, instance), moved)
    raise LabError(f"'{instance}' is no function instance on a chain of lab '{state.name}' "
                   "(instances: 'sfclab chain ls' shows them)")


def _lab_node(plan: Plan, d: DirectionPlan, node: str) -> NewNode:
    """A lab file's function node seen as an instance to move: its kind, keys, cgroup needs
    and host; *attach* is the forwarding node before it on its chain's first path through it
    (else the one after), where the one-armed clone hangs off."""
    p = next(p for p in d.paths if node in p.instances)
    k = p.nodes.index(node)
    topo = Topology(plan)
    attach = next((x for x in (p.nodes[k - 1], p.nodes[k + 1]) if topo.forwards.get(x)), None)
    if attach is None:
        raise LabError(f"'{node}' has no forwarding neighbour on chain '{d.chain}' for its "
                       "clone to hang off")
    f = plan.functions[node]
    params = dict(f.params)
    if "outside" in params:  # one arm: the outside is the attach node, as for added NATs
        params["outside"] = attach
    on = plan.host_of(node)
    return NewNode(node, plan.netns_of(node), f.kind, params, node,
                   float(params.get("cpu") or 0), int(params.get("memory") or 0),
                   on.name if on else LOCAL, attach, "", "", "", "", "",
                   container=moved_to(plan, node, node))


def migrate(req: MigrateInstance) -> dict[str, Any]:
    """Move ``req.instance`` make-before-break (see the module's docstring), under the lab's
    lock."""
    state = LabState(req.lab)
    t0 = time.monotonic()
    with record.lab_lock(state, req.wait_s, "chain migrate"):
        return migrate_locked(state, req, t0)


def migrate_locked(state: LabState, req: MigrateInstance, t0: float) -> dict[str, Any]:
    """:func:`migrate` for a caller that holds the lab's lock (``host rm --drain``)."""
    _, plan = lifecycle.load_plan(req.lab)
    own = owner(state, plan, req.instance)
    add, old = own.add, own.old
    rt = live_for(state)
    if req.conntrack and shutil.which("conntrack") is None:
        raise LabError("moving connection-tracking state needs the conntrack program "
                       "(Debian package conntrack; 'make setup' installs it); or migrate "
                       "with --no-conntrack, and established flows through a NAT break")
    lab_file = own.lab_file
    if lab_file and not add.attach:
        add.attach = old.attach
    hosts = hosts_of(state, plan)
    host = req.to or old.host
    if host not in {h.name for h in hosts}:
        raise LabError(f"no host named '{host}' in lab '{req.lab}' (hosts: "
                       f"{', '.join(h.name for h in hosts)}; 'sfclab host add' adds one)")
    try:
        placement.place([placement.Need(old.function, "clone", old.cpu, old.memory)],
                        [h for h in hosts if h.name == host])
    except placement.NoRoom as e:
        raise LabError(f"no room for the clone: {e}") from None
    m = plan_clone(plan, add, old, host, [x for a in record.placed(state) for x in a.nodes],
                   underlay.underlay_mtu(state, plan, labelled_mtu(chain_encap(
                       steering_of(plan), add.chain))))
    got = rt.image_problem([m.clone])  # its container, checked on the target host
    if got is not None:
        raise LabError(f"'{old.node}' runs in a container that host '{got[0]}' cannot run: "
                       f"image.{got[1].key}: {got[1].message}")
    # apply, switch, apply the removal: this machine (:mod:`sfclab.live.runtime.local`), or
    # each host's agent its share over SSH
    return rt.migrate(req, plan, own, m, t0)
