"""Following a collection of the API server (a list, then a watch), and the agents' liveness as
their Leases say it: what the agent and the controller build their loops on.

:func:`follow` lists a collection, hands the items over, then watches it from the list's
resource version and hands over each change as it comes; it lists again every ``resync``
seconds (what a missed or misread change could have left is set right then) and when the
server no longer keeps the version watched from (410 Gone).  A cluster that does not answer,
or refuses, is retried every second; a handler that fails is said, and the collection listed
again a second later (an agent's thread never dies of one object).  So a change is seen within one round trip of the API
server, where listing every second saw it within a second and asked the server once a second
per agent.

:class:`Liveness` tells which agents' Leases are live.  A Lease is *expired* when its holder
has not renewed it for its ``leaseDurationSeconds``, measured on this machine's clock from the
moment this process saw its ``renewTime`` change (not from the time the Lease names, which is
the holder's clock: the Nodes' clocks may disagree); a Lease first seen is judged by the time it
names, once.  Kubernetes' own node lifecycle controller judges the kubelets' Leases the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from threading import Event
from typing import Any

from ...errors import ClusterRefused, ClusterUnreachable
from .kubernetes_api import Gone, KubeApi
from .kubernetes_lease import expired

#: how long one watch request lasts at most before it is made again (seconds)
WATCH_SECONDS = 30
#: how often the collection is listed again, whatever the watch said (seconds)
RESYNC_SECONDS = 60.0


def follow(api: KubeApi, path: str, stop: Event, *, on_list: Callable[[list[dict[str, Any]]], None],
           on_change: Callable[[str, dict[str, Any]], None], selector: str | None = None,
           say: Callable[[str], None] = lambda _m: None,
           resync: float = RESYNC_SECONDS) -> None:
    """List and watch ``path`` (see the module) until ``stop`` is set: ``on_list`` with every
    item after each list, ``on_change`` with each change (``ADDED``, ``MODIFIED``,
    ``DELETED``) between."""
    while not stop.is_set():
        try:
            doc = api.request("GET", path, query={"labelSelector": selector} if selector
                              else None)
            on_list([i for i in doc.get("items") or [] if isinstance(i, dict)])
            rv = str((doc.get("metadata") or {}).get("resourceVersion", ""))
            until = time.monotonic() + resync
            while not stop.is_set() and time.monotonic() < until:
                left = int(until - time.monotonic()) + 1
                for kind, obj in api.watch(path, rv, selector=selector,
                                           seconds=min(WATCH_SECONDS, left)):
                    rv = str((obj.get("metadata") or {}).get("resourceVersion", rv))
                    if kind != "BOOKMARK":
                        on_change(kind, obj)
                    if stop.is_set():
                        return
        except Gone:
            continue
        except (ClusterUnreachable, ClusterRefused) as e:
            say(f"{path}: retrying: {e}")
            stop.wait(1.0)
        except Exception as e:  # a handler's own failure: said, and the thread goes on
            say(f"{path}: {type(e).__name__}: {e}; listing again")
            stop.wait(1.0)


@dataclass
class Seen:
    renew: str  # the renewTime last seen
    at: float  # this machine's monotonic time when it was seen to change
    seconds: int  # the Lease's duration


class Liveness:
    """The Leases of the agents as this process saw them (see the module)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.seen: dict[str, Seen] = {}  # holder (a Node) -> its Lease as last seen

    def saw(self, lease: dict[str, Any], deleted: bool = False) -> None:
        """Take in one Lease (from a list or a change)."""


        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity")
        if not holder:
            return
        if deleted:
            self.seen.pop(holder, None)
            return
        renew = str(spec.get("renewTime") or "")
        seconds = int(spec.get("leaseDurationSeconds") or 0)
        old = self.seen.get(holder)
        if old is not None and old.renew == renew:
            return
        now = self.clock()
        # first seen: as old as its own time says, never newer than now
        at = now - seconds - 1 if old is None and expired(lease) else now
        self.seen[holder] = Seen(renew, at, seconds)

    def listed(self, leases: list[dict[str, Any]]) -> None:
        holders = set()
        for x in leases:
            self.saw(x)
            holders.add((x.get("spec") or {}).get("holderIdentity"))
        for h in set(self.seen) - holders:
            del self.seen[h]

    def expired(self) -> set[str]:
        """The holders whose Lease was not seen renewed for its duration."""
        now = self.clock()
        return {h for h, s in self.seen.items() if now - s.at > s.seconds}

    def live(self, node: str) -> bool:
        return node in self.seen and node not in self.expired()
