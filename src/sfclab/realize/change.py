"""A change to a running lab, made by the engine that builds a lab at ``up``.

A change is a plan of its own holding only the objects to add (for nodes that ``chain add`` or
``chain migrate`` add: :func:`sfclab.plan.chainadd.change_of`), beside the lab's whole plan
with them.  It is journaled by the same parts (:func:`journal`: their ``journal`` entries,
written before anything is made) and made by the same parts' stages (:func:`make`: the
:class:`~sfclab.realize.build.Builder` over the kind table, :mod:`sfclab.realize.kinds`), so a
node kind or link form in the table builds its objects on a running lab as it does at ``up``.
A failure is raised naming the object; the caller takes out what the change made (its
namespaces, whose removal takes their links' ends with them).

A change may add to namespaces the running lab has already without making them: the lab's
namespaces its links end in (joined by the builder itself), the host contexts its hosted links
end in (an added instance's tunnel across hosts: :func:`contexts`), and those it names in
``joined`` (the contexts and the underlay a host's join to the underlay adds a port to:
:mod:`sfclab.realize.hosts`).  A joined namespace is the running lab's: kept open once its
mark is checked, never journaled again by the change, never made.  A real host's context is
the machine's own root namespace (a host's agent making or removing its share): it is no
namespace of the lab, so it is never joined; the change names that host in its ``hosts`` (its
cgroup empty: the lab's already), whose part opens it, and the hosted links' part marks and
journals what it puts there, as at ``up``.

A removal is a change too: the objects the lab's plan loses (:func:`sfclab.plan.diff.removed`,
the plan with the thing against the plan without it), taken out by :func:`remove` with the same
parts' ``teardown`` that ``down`` runs (:func:`sfclab.realize.teardown.remove`), over the journal
entries those objects were made with; each object is removed only once it shows the lab's mark
(:mod:`sfclab.realize.ownership`), and the ends of its links in the lab's namespaces it joined
(and a tunnel's devices in the host contexts) only while they carry the alias or the mark they
were given (``teardown_joined``).
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from dataclasses import replace

from ..plan.model import Plan
from . import ownership, teardown
from .build import Builder
from .journal import entries
from .kinds import TABLE
from .state import LabState


def contexts(change: Plan) -> set[str]:
    """The host contexts ``change``'s hosted links end in that the running lab has (an
    emulated host's namespace, or the implicit host ``local``'s): joined, never made.  Those
    of the hosts ``change`` names are its own to open (a host's agent: its machine's root
    namespace, by the hosts' part)."""
    own = {h.name for h in change.hosts}
    return {e.netns for hl in change.host_links for e in hl.ends if e.host not in own}


def journal(state: LabState, change: Plan, joined: Collection[str] = ()) -> None:
    """Write the journal entries of ``change``'s objects, before any is made; the namespaces
    in ``joined`` are the running lab's (journaled when they were made) and are left out."""
    state.record([e for e in entries(change)
                  if not (e.get("op") == "netns" and e.get("name") in joined)])


def make(state: LabState, whole: Plan, change: Plan,
         say: Callable[[str], None] | None = None, joined: Collection[str] = ()) -> None:
    """Make ``change``'s objects, stage by stage, with every part of the kind table; ``whole``
    is the running lab's plan with them; ``joined``: namespaces of the running lab the change
    adds to besides those its links end in (:func:`contexts`; each refused unless it carries
    the lab's mark)."""
    builder = Builder(change, TABLE.parts(), state, say, whole=whole)
    try:
        for name in sorted(set(joined) | contexts(change)):
            builder.join_namespace(name)
        builder.build()
    finally:
        builder.close()


def remove(state: LabState, whole: Plan, change: Plan) -> list[str]:
    """Remove ``change``'s objects (a plan diff: what ``whole``, the running lab's plan with
    them, loses) as ``down`` removes a lab's, each once its mark is checked; the errors, naming
    what was left and why.  Functions are rebuilt from ``change`` seen in its lab (``whole``'s
    hosts and steering: their cgroups, node ids and maps), and stopped before their processes
    end."""
    journal: list[dict[str, object]] = []
    errors: list[str] = []
    for e in entries(change):
        problem = ownership.entry_problem(state.name, e)
        if problem:
            errors.append(f"{ownership.quote(e)}: {problem}; left alone")
        else:
            journal.append(e)
    made = {n.name for n in change.namespaces}
    joined = {i.netns for i in change.interfaces if i.netns and i.netns not in made}
    joined |= contexts(change) - made
    seen = replace(change, hosts=whole.hosts, steering=whole.steering, underlay=whole.underlay)
    rep = teardown.TeardownReport(errors=errors)
    teardown.remove(state, seen, journal, rep, joined)
    return rep.errors
