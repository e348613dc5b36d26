"""Placement of function instances on hosts by free CPU and memory (pure).

**Policy: first-fit decreasing, a group spread over hosts.**  Instances are taken largest first
(by CPU, then memory; ties in the order given).  Each goes to the first host, in the order the
hosts are given, whose free CPU and memory both cover its needs, preferring a host that holds
no other instance of the same function (a group is spread over hosts when it can be); only
when every fitting host already holds one does it share.  A host's free capacity is its
capacity minus what the instances already there (``used``) and the ones placed before it take.
An instance with ``allowed`` hosts (a Kubernetes host's ``node_selector``: the Nodes whose
labels match) goes only to one of those.  When an instance fits nowhere, nothing is placed and
:class:`NoRoom` names the function, its needs and the host it may go to with the most free CPU.

The hosts of a running lab, with what they hold, come from :mod:`sfclab.live.hosts.capacity`: the
lab file's hosts and those ``host add`` made, and, in a lab whose file names none, the implicit
host ``local`` (:func:`local_host`: this machine's CPUs and memory, filled in by the caller).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Need:
    """One instance to place: its function, its own name, cores and bytes; ``allowed``: the
    hosts it may go to (None: any)."""

    function: str
    instance: str
    cpu: float
    memory: int
    allowed: frozenset[str] | None = None


@dataclass
class Host:
    name: str
    cpus: float
    memory: int
    used_cpu: float = 0.0
    used_memory: int = 0
    functions: list[str] = field(default_factory=list)  # the functions of instances already there
    labels: dict[str, str] = field(default_factory=dict)  # a Kubernetes Node's

    @property
    def free_cpu(self) -> float:
        return round(self.cpus - self.used_cpu, 6)

    @property
    def free_memory(self) -> int:
        return self.memory - self.used_memory

    def fits(self, n: Need) -> bool:
        return (n.allowed is None or self.name in n.allowed) and \
            self.free_cpu + 1e-9 >= n.cpu and self.free_memory >= n.memory


class NoRoom(Exception):
    """No host has room for ``need``; ``largest`` is the host with the most free CPU."""

    def __init__(self, need: Need, largest: Host | None):
        self.need = need
        self.largest = largest
        where = (f"the largest free host is {largest.name} with {largest.free_cpu:g} CPU and "
                 f"{fmt_bytes(largest.free_memory)} free") if largest else "there are no hosts"
        super().__init__(f"function {need.function} (instance {need.instance}) needs "
                         f"{need.cpu:g} CPU and {fmt_bytes(need.memory)}; {where}")


def fmt_bytes(n: int) -> str:
    for unit, size in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if abs(n) >= size:
            return f"{n / size:.4g}{unit}"
    return f"{n}B"


def local_host(cpus: float, memory: int, name: str = "local") -> Host:
    return Host(name, cpus, memory)


def place(needs: list[Need], hosts: list[Host]) -> dict[str, str]:
    """instance -> host name, by the policy above; raises :class:`NoRoom` (``hosts`` are left
    as they were)."""
    work = [Host(h.name, h.cpus, h.memory, h.used_cpu, h.used_memory, list(h.functions),
                 h.labels) for h in hosts]
    order = sorted(range(len(needs)), key=lambda i: (-needs[i].cpu, -needs[i].memory, i))
    out: dict[str, str] = {}
    for i in order:
        n = needs[i]
        fitting = [h for h in work if h.fits(n)]
        if not fitting:
            largest = max((h for h in work if n.allowed is None or h.name in n.allowed),
                          key=lambda h: (h.free_cpu, h.free_memory), default=None)
            raise NoRoom(n, largest)
        apart = [h for h in fitting if n.function not in h.functions]
        h = (apart or fitting)[0]
        h.used_cpu += n.cpu
        h.used_memory += n.memory
        h.functions.append(n.function)
        out[n.instance] = h.name
    return out
