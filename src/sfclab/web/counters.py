"""Interface counters of a running lab, read over netlink in each of its namespaces.

``Counters.read(lab)`` returns every interface's cumulative packet, byte and drop counters (the
device's ``rx/tx_dropped`` and its root qdisc's drops, where a shaper drops) with the time they
were read; the page turns two reads into rates.  Each read opens one ``IPRoute``
socket per namespace of the lab (and one in the root namespace when the plan puts interfaces
there, OVS ports: only those, by their exact names) and closes it again: a socket kept open
would keep a namespace alive after ``sfclab down`` removed it.  What to read is taken from the
lab's plan, kept per lab and read afresh when the lab was brought up again (its creation time
changed).  Reading changes nothing in the lab.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

from ..kernel import netns
from ..realize.lifecycle import load_plan
from ..realize.state import LabState
from .errors import NotFound

FIELDS = ("rx_packets", "tx_packets", "rx_bytes", "tx_bytes", "rx_dropped", "tx_dropped",
          "rx_errors", "tx_errors")


class _LabReader:
    def __init__(self, lab: str):
        _state, plan = load_plan(lab)
        self.created = LabState(lab).meta().get("created")
        self.spaces = {ns.node: ns.name for ns in plan.namespaces}
        self.root_names = {i.name: i.node for i in plan.interfaces if i.netns is None}

    def read(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for node, name in self.spaces.items():
            with contextlib.closing(netns.iproute(name)) as ipr:
                drops = _qdisc_drops(ipr)
                out += [_row(link, node, False, drops) for link in ipr.get_links()
                        if link.get_attr("IFLA_IFNAME") != "lo"]
        if self.root_names:
            with contextlib.closing(netns.iproute(None)) as ipr:
                for name, node in self.root_names.items():
                    for idx in ipr.link_lookup(ifname=name):  # only the lab's own, by name
                        out += [_row(link, node, True, {}) for link in ipr.get_links(idx)]
        return out


#: the parent of a root qdisc (TC_H_ROOT)
TC_H_ROOT = 0xFFFFFFFF


def _qdisc_drops(ipr: Any) -> dict[int, int]:
    """Interface index -> packets its root qdisc dropped (a shaper's drops: the device's own
    counters never see them)."""
    out: dict[int, int] = {}
    for q in ipr.get_qdiscs():
        if q["parent"] != TC_H_ROOT:
            continue
        st2 = q.get_attr("TCA_STATS2")
        queue = st2.get_attr("TCA_STATS_QUEUE") if st2 is not None else None
        if queue is not None:
            out[q["index"]] = int(queue.get("drops", 0) or 0)
        else:
            out[q["index"]] = int((q.get_attr("TCA_STATS") or {}).get("drop", 0) or 0)
    return out


def _row(link: Any, node: str, root: bool, qdisc_drops: dict[int, int]) -> dict[str, Any]:
    st = link.get_attr("IFLA_STATS64") or link.get_attr("IFLA_STATS") or {}
    row: dict[str, Any] = {"node": node, "ifname": link.get_attr("IFLA_IFNAME"), "root": root,
                           "state": link.get_attr("IFLA_OPERSTATE")}
    row.update({f: int(st.get(f, 0) or 0) for f in FIELDS})
    row["qdisc_dropped"] = qdisc_drops.get(link["index"], 0)
    return row


class Counters:
    """What to read of every lab asked about (no socket stays open between reads)."""

    def __init__(self) -> None:
        self._readers: dict[str, _LabReader] = {}
        self._lock = threading.Lock()

    def read(self, lab: str) -> dict[str, Any]:
        state = LabState(lab)
        if not state.exists or state.meta().get("status") != "up":
            self.forget(lab)
            raise NotFound(f"no lab named '{lab}' is up")
        with self._lock:
            r = self._readers.get(lab)
            if r is None or r.created != state.meta().get("created"):
                r = self._readers[lab] = _LabReader(lab)
        try:
            rows = r.read()
        except OSError as e:  # a namespace went away under us: the lab is going down
            self.forget(lab)
            raise NotFound(f"lab '{lab}' is going away ({e})") from None
        return {"lab": lab, "time": time.time(), "interfaces": rows}

    def forget(self, lab: str) -> None:
        with self._lock:
            self._readers.pop(lab, None)

    def close(self) -> None:
        with self._lock:
            self._readers.clear()
