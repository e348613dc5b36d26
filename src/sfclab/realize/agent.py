"""The agent: a real host's side of a lab, run there over SSH (``python -m
sfclab.live.runtime.agent_verbs VERB``, whose table holds these verbs and those of the other agent
modules).

One verb per run, the request as JSON on stdin, the answer as JSON on stdout; a failure is one
line on stderr and exit status 1 (2 for a bad request).  With ``--serve`` instead of a verb it
stays, and runs each request of its input as such a run (:mod:`.agent_serve`).  The namespace the agent runs in is the
host's context (:class:`~sfclab.hosts.context.OwnRoot`): on a real machine its root namespace;
in the tests, an emulated host's context where ``sshd`` runs.  The agent keeps its own journal
in its own state directory (``$SFCLAB_STATE_DIR`` on that host), exactly as a local ``up``:
the journal is written before anything is made, objects carry the lab's marks, and ``down``
removes what the journal names.

- ``check`` ``{"address": A, "plan": P}``: what the host must have: root, ``ip``, VXLAN in the
  kernel, the underlay address ``A`` on one of its interfaces, and what its part ``P`` (when
  given) needs (:mod:`sfclab.realize.needs`: its functions' and attach kinds' programs); answers
  the interface holding ``A``.
- ``up`` ``{"plan": P, "token": T}``: build the host's part ``P``
  (:func:`sfclab.plan.split.host_part`); refuses a lab that is already there, or whose
  ``down`` (with the same ``T``) came first; rolls back on failure.
- ``down`` ``{"lab": L, "token": T}``: remove the host's part of lab ``L`` (nothing there:
  ``absent``, and the ``up`` ``T`` still on its way, if any, is refused when it arrives).
- ``inspect`` ``{"lab": L}``: the part read live (nodes, host, hosted-link ends), as a local
  ``inspect`` reads it.
- ``sfc-read``, ``sfc-classify``, ``sfc-probe``: the host's share of the chains' data plane
  (:mod:`sfclab.realize.agent_sfc`).
- ``scan``: the host's CPUs and memory (:mod:`sfclab.realize.agent_scan`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
from collections.abc import Callable, Generator, Mapping
from pathlib import Path
from typing import Any

from ..errors import LabError, SfclabError
from ..kernel import netns
from ..plan.model import Plan
from .state import LabState


def has_vxlan(sys_module: Path = Path("/sys/module"), lib: Path = Path("/lib/modules")) -> bool:
    """VXLAN is loaded (or built in with parameters), else built in or a module to load."""
    if (sys_module / "vxlan").exists():
        return True
    kdir = lib / os.uname().release
    for f in ("modules.builtin", "modules.dep"):
        try:
            if "/vxlan.ko" in (kdir / f).read_text():
                return True
        except OSError:
            continue
    return False


def check(req: dict[str, Any]) -> dict[str, Any]:
    """What the host lacks, as one error; else what it has."""
    from pyroute2 import IPRoute  # light start-up: only the verbs that need it

    missing = []
    if os.geteuid() != 0:
        missing.append("root (the agent makes namespaces and devices)")
    ip = shutil.which("ip")
    if ip is None:
        missing.append("the 'ip' program (iproute2)")
    vxlan = has_vxlan()
    if not vxlan:
        missing.append("VXLAN in the kernel (neither loaded, built in nor a module)")
    addr = str(req.get("address", "")).split("/")[0]
    ifname = None
    with IPRoute() as ipr:
        for a in ipr.get_addr(family=2):
            if a.get_attr("IFA_ADDRESS") == addr:
                ifname = ipr.get_links(a["index"])[0].get_attr("IFLA_IFNAME")
    if ifname is None:
        missing.append(f"the underlay address {addr} on one of its interfaces")
    if "plan" in req:  # its part: what its functions and attach kinds run (realize.needs)
        from .needs import lacks

        part = Plan.from_dict(req["plan"])
        missing += lacks(part, LabState(part.lab))
    if missing:
        raise LabError("this host lacks " + "; ".join(missing))
    from .. import __version__

    return {"ip": ip, "vxlan": vxlan, "underlay_if": ifname, "sfclab": __version__,
            "python": sys.version.split()[0]}


def up(req: dict[str, Any]) -> dict[str, Any]:
    """Build the host's part; on failure nothing of it is left."""
    from ..kernel.cpus import online
    from . import journal
    from .build import Builder
    from .kinds import TABLE
    from .teardown import teardown

    plan = Plan.from_dict(req["plan"])
    if len(plan.hosts) != 1:
        raise LabError("a host's part names exactly one host")
    host = plan.hosts[0]
    host.emulated = False
    host.underlay_if = check({"address": host.address})["underlay_if"]
    cpus = online()
    if not set(host.cpus) <= set(cpus):  # planned on another machine: this one's CPUs
        host.cpus = cpus[:len(host.cpus)] or cpus
    state = LabState(plan.lab)
    with state.locked():
        if _removed_before(plan.lab, req.get("token")):
            raise LabError(f"lab '{plan.lab}' was removed here ('down') before this part "
                           "arrived; nothing made")
        if state.exists:
            raise LabError(f"lab '{plan.lab}' already has a part on this host; run down first")
        for ns in plan.namespaces:
            if netns.exists(ns.name):
                raise LabError(f"namespace {ns.name} already exists and no lab of sfclab owns "
                               "it; sfclab will not adopt it")
        state.begin(plan.to_dict(), "", f"agent for host {host.name}")
        state.record(journal.entries(plan))
        builder = Builder(plan, TABLE.parts(), state)
        try:
            builder.build()
        except BaseException:
            builder.close()
            teardown(state)
            state.remove()
            raise
        builder.close()
        state.set_meta(status="up", pid=None)
    return {"host": host.name, "namespaces": [n.name for n in plan.namespaces],
            "underlay_if": host.underlay_if}


#: how long an agent's ``down`` waits for the lab's lock: on a host only this agent's own
#: operations take it, and one left running by a command killed mid-way (``kill -9`` of
#: ``chain add``) ends by itself; ``down`` then removes what it made
DOWN_LOCK_WAIT_S = 60.0


def down(req: dict[str, Any]) -> dict[str, Any]:
    from .teardown import teardown

    state = LabState(str(req["lab"]))
    with state.locked(wait=DOWN_LOCK_WAIT_S):
        if not state.exists:
            _mark_removed(state.name, req.get("token"))
            return {"absent": True, "errors": []}
        state.set_meta(status="removing")
        rep = teardown(state)
        state.remove()
    return {"absent": False, **rep.to_dict()}


#: how long a mark of a part removed before it arrived is kept (an ``up`` still on its way)
REMOVED_KEEP_S = 24 * 3600


def _removed_path(lab: str, token: str) -> Path:
    from .state import labs_dir

    return labs_dir() / f".{lab}.removed-{token}"


def _mark_removed(lab: str, token: Any) -> None:
    """``down`` found no part of ``lab`` here: its ``up`` (``token``) may still be on its way
    (this machine's ``up`` was killed as it sent it).  Mark it, so that part is refused when
    it arrives; marks older than :data:`REMOVED_KEEP_S` are pruned."""
    import time

    from .state import labs_dir

    if not isinstance(token, str) or not token.isalnum():
        return
    now = time.time()
    for old in labs_dir().glob(f".{lab}.removed-*"):
        with contextlib.suppress(OSError):
            if now - old.stat().st_mtime > REMOVED_KEEP_S:
                old.unlink()
    _removed_path(lab, token).touch()


def _removed_before(lab: str, token: Any) -> bool:
    """Whether a ``down`` came before this ``up`` (``token``); the mark is used up."""
    if not isinstance(token, str) or not token.isalnum():
        return False
    p = _removed_path(lab, token)
    if not p.exists():
        return False
    p.unlink()
    return True


def inspect(req: dict[str, Any]) -> dict[str, Any]:
    """The host's part read live, by the same code as a local ``inspect``: its nodes, its
    host context (CPUs and memory from its cgroups) and its hosted-link ends."""
    from .hosts import inspect_hosts, inspect_links
    from .kinds import TABLE

    state = LabState(str(req["lab"]))
    d = state.plan()
    if d is None:
        return {"absent": True}
    plan = Plan.from_dict(d)
    found: dict[str, Any] = {}
    for part in TABLE.parts():
        part.inspect(state, plan, found)
    return {"absent": False, "status": state.meta().get("status"),
            "namespaces": {n.name: netns.exists(n.name) for n in plan.namespaces},
            "nodes": found, "hosts": inspect_hosts(plan),
            "host_links": inspect_links(plan, live=True)}


Verb = Callable[[dict[str, Any]], dict[str, Any]]
#: this module's verbs (every verb of the agent, in one table:
# :mod:`sfclab.live.runtime.agent_verbs`)
VERBS: dict[str, Verb] = {"check": check, "up": up, "down": down, "inspect": inspect}


#: an armed verb: a generator that makes everything ready, yields once, and acts only when
#: resumed; closed instead, it has changed nothing.  The agent reads the request as one line,
#: answers ``{"armed": true}``, then waits for a line ``go`` (anything else, or the end of
#: its input, and it closes the verb and exits 1); see :func:`sfclab.hosts.ssh.call_armed`
ArmedVerb = Callable[[dict[str, Any]], Generator[None, None, dict[str, Any]]]
#: this module's armed verbs (none)
ARMED: dict[str, ArmedVerb] = {}


def _request(text: str) -> dict[str, Any]:
    req = json.loads(text or "{}")
    if not isinstance(req, dict):
        raise ValueError("expected a JSON object")
    return req


def _armed(run: ArmedVerb, verb: str, req: dict[str, Any]) -> dict[str, Any]:
    gen = run(req)
    next(gen)  # ready: nothing changed yet
    print(json.dumps({"armed": True}), flush=True)
    if sys.stdin.readline().strip() != "go":
        gen.close()
        raise LabError(f"{verb} not told to go: nothing changed")
    try:
        gen.send(None)
    except StopIteration as done:
        return dict(done.value)
    raise LabError(f"{verb} yielded twice")


def main(argv: list[str], table: Mapping[str, Verb] | None = None,
         armed_table: Mapping[str, ArmedVerb] | None = None,
         module: str = "sfclab.live.runtime.agent_verbs") -> int:
    """Run the one verb ``argv`` names, from ``table`` and ``armed_table`` (default: this
    module's own); ``module``: how the agent is run, for the usage line."""
    verbs: Mapping[str, Verb] = VERBS if table is None else table
    armed_verbs: Mapping[str, ArmedVerb] = ARMED if armed_table is None else armed_table
    names = [*verbs, *armed_verbs]
    if argv == ["--serve"]:  # kept running, one request per line (:mod:`.agent_serve`)
        from .agent_serve import serve

        return serve(verbs, armed_verbs, module)
    if len(argv) != 1 or argv[0] not in names:
        print(f"usage: python -m {module} {{{'|'.join(names)}}} < request.json",
              file=sys.stderr)
        return 2
    armed = argv[0] in armed_verbs
    try:
        req = _request(sys.stdin.readline() if armed else sys.stdin.read())
    except ValueError as e:
        print(f"agent: bad request: {e}", file=sys.stderr)
        return 2
    try:
        answer = _armed(armed_verbs[argv[0]], argv[0], req) if armed else verbs[argv[0]](req)
    except (SfclabError, OSError, KeyError) as e:
        print(f"agent {argv[0]}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(answer))
    return 0
