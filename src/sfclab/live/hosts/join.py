"""``sfclab host add LAB NAME --ssh USER@ADDRESS``: a real machine joins a running lab whose
hosts are driven over SSH (the ``ssh`` runtime's ``join_machine``, :mod:`sfclab.live.runtime.ssh`).

In order, holding the lab's lock: the request is checked (names, key file, port); the lab must
be one of hosts driven over SSH (a lab of emulated hosts runs on an underlay sfclab made inside
this machine, which no real machine can join: refused, exit 2); the address must be a free
place on the lab's underlay (the subnet its hosts' tunnels run on); the host is reached as the
lab's other hosts are (the same Python, client namespace and known hosts, unless given) and
*scanned* (its agent's ``scan``: online CPUs and memory) and *checked* (the agent's ``check``:
root, ``ip``, VXLAN, the address on one of its interfaces).  ``cpus`` and ``memory`` default to
what it has; asking for more is refused (exit 2).  Then it is journaled (``remote-host``, so
``down`` reaches it), joins ``plan.hosts`` (not emulated: its own CPUs, memory, underlay
interface) and ``hosts-added.json``, and ``host ls`` shows it.  Nothing is made on it until a
function is placed there.
"""

from __future__ import annotations

import os
import re
from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from pathlib import Path
from typing import Any

from ...errors import SpecError
from ...hosts.ssh import SshTarget, call
from ...plan.model import HostPlan, Plan
from ...plan.names import host_cgroup, host_netns
from ...realize.runtime.ssh import SshRuntime

SSH_RE = re.compile(r"^[A-Za-z0-9._-]+@[A-Za-z0-9.:_-]+\Z")


def check_request(ssh: str | None, key: str | None, port: int | None) -> tuple[str, str]:
    """USER and ADDRESS; bad input raises :class:`SpecError` (exit 2)."""
    if ssh is None or not SSH_RE.match(ssh):
        raise SpecError(f"expected USER@ADDRESS, got {ssh!r}", place="--ssh")
    user, address = ssh.split("@", 1)
    try:
        IPv4Address(address)
    except ValueError:
        raise SpecError(f"expected an IPv4 address on the lab's underlay, got {address!r}",
                        place="--ssh") from None
    if key is not None and (not os.path.isfile(key) or not os.access(key, os.R_OK)):
        raise SpecError(f"expected a readable private key file, got {key!r}", place="--key")
    from ...spec.hosts import key_problem  # light start-up: the agents load no host models

    problem = None if key is None else key_problem(Path(key))
    if problem:
        raise SpecError(f"expected a private key file, got {key!r} ({problem})", place="--key")
    if port is not None and not 0 < port < 65536:
        raise SpecError(f"expected a port from 1 to 65535, got {port}", place="--port")
    return user, address


def target(rt: SshRuntime, name: str, user: str, address: str, key: str | None,
           port: int | None, agent_state: str | None) -> SshTarget:
    """How to reach the new host: as the lab's first host is reached, but at ``address``."""
    base = next(iter(rt.targets().values()))
    return SshTarget(name, address, user, key or base.key, port or 22, base.python,
                     agent_state or base.state, base.netns, base.known_hosts)


def place(plan: Plan, name: str, address: str) -> str:
    """``address`` with the underlay's prefix; refused unless free on the underlay."""
    assert plan.underlay is not None
    subnet = IPv4Network(plan.underlay.subnet)
    if IPv4Address(address) not in subnet:
        raise SpecError(f"expected an address on the lab's underlay {subnet} (its hosts' "
                        f"tunnels run there), got {address}", place="--ssh")
    for h in plan.hosts:
        if h.address.split("/")[0] == address:
            raise SpecError(f"address {address} is host '{h.name}''s already", place="--ssh")
    return str(IPv4Interface(f"{address}/{subnet.prefixlen}"))


def add(rt: SshRuntime, plan: Plan, name: str, ssh: str, key: str | None, port: int | None,
        cpus: int | None, memory: int | None, agent_state: str | None) -> dict[str, Any]:
    """Scan, check, journal and place host ``name`` (the caller holds the lab's lock, has
    checked the name and that the lab is up, and that machines can join)."""
    state = rt.state
    user, address = check_request(ssh, key, port)
    where = place(plan, name, address)
    t = target(rt, name, user, address, key, port, agent_state)
    scan = call(t, "scan", {})
    checked = call(t, "check", {"address": address})
    has_cpus, has_memory = list(scan["cpus"]), int(scan["memory"])
    n = len(has_cpus) if cpus is None else cpus
    if n > len(has_cpus):
        raise SpecError(f"host {name} has {len(has_cpus)} CPUs, asked for {n}", place="--cpus")
    mem = has_memory if memory is None else memory
    if mem > has_memory:
        raise SpecError(f"host {name} has {has_memory >> 20}M of memory, asked for "
                        f"{mem >> 20}M", place="--memory")
    rt.join(t)
    h = HostPlan(name, host_netns(state.name, name), where, str(checked["underlay_if"]),
                 host_cgroup(state.name, name), has_cpus[:n], mem, False, [],
                 f"h{len(plan.hosts)}")
    plan.hosts.append(h)
    return {"lab": state.name, "host": name, "ssh": f"{user}@{address}", "address": where,
            "underlay_if": h.underlay_if, "cpus": h.cpus, "memory": mem,
            "scanned": {"cpus": len(has_cpus), "memory": has_memory,
                        "kernel": scan.get("kernel")},
            "agent": {"sfclab": checked.get("sfclab"), "python": checked.get("python")}}
