"""Interface counters of a running lab, read over netlink sockets kept open between reads.

:class:`Counters` holds, per lab, one ``IPRoute`` socket bound to each of the lab's namespaces
(and one in the root namespace when the plan puts interfaces there, OVS ports: only those,
by their exact names).  ``read(lab)`` returns every interface's cumulative packet, byte and
drop counters with the time they were read; the page turns two reads into rates.  A lab that
was taken down and brought up again is noticed by its creation time and read afresh.  Reading
changes nothing in the lab.
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
        self.socks: dict[str, Any] = {}
        self.root_names = {i.name: i.node for i in plan.interfaces if i.netns is None}
        try:
            for ns in plan.namespaces:
                if netns.exists(ns.name):
                    self.socks[ns.node] = netns.iproute(ns.name)
            if self.root_names:
                self.socks[""] = netns.iproute(None)
        except BaseException:
            self.close()
            raise

    def read(self) -> list[dict[str, Any]]:
        out = []
        for node, ipr in self.socks.items():
            for link in ipr.get_links():
                name = link.get_attr("IFLA_IFNAME")
                if node == "":
                    if name not in self.root_names:
                        continue  # the root namespace: only the lab's own interfaces
                    owner, where = self.root_names[name], None
                elif name == "lo":
                    continue
                else:
                    owner, where = node, node
                st = link.get_attr("IFLA_STATS64") or link.get_attr("IFLA_STATS") or {}
                row: dict[str, Any] = {"node": owner, "ifname": name, "root": where is None,
                                       "state": link.get_attr("IFLA_OPERSTATE")}
                row.update({f: int(st.get(f, 0) or 0) for f in FIELDS})
                out.append(row)
        return out

    def close(self) -> None:
        for s in self.socks.values():
            with contextlib.suppress(Exception):
                s.close()
        self.socks.clear()


class Counters:
    """Counter readers for every lab asked about; ``close()`` closes every socket."""

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
            if r is not None and r.created != state.meta().get("created"):
                r.close()
                r = None
            if r is None:
                r = self._readers[lab] = _LabReader(lab)
            try:
                rows = r.read()
            except OSError as e:  # a namespace went away under us: the lab is going down
                r.close()
                self._readers.pop(lab, None)
                raise NotFound(f"lab '{lab}' is going away ({e})") from None
        return {"lab": lab, "time": time.time(), "interfaces": rows}

    def forget(self, lab: str) -> None:
        with self._lock:
            r = self._readers.pop(lab, None)
            if r is not None:
                r.close()

    def close(self) -> None:
        with self._lock:
            for r in self._readers.values():
                r.close()
            self._readers.clear()
