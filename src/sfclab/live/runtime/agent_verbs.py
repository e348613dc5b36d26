"""The agent's verbs, all in one table: what a host driven over SSH runs
(``python -m sfclab.live.runtime.agent_verbs VERB``, the request as JSON on stdin, the answer on
stdout; :func:`sfclab.realize.agent.main` reads, dispatches and answers).

Each agent module declares its own verbs (its ``VERBS`` and ``ARMED``) and nothing else; this
table names them, module by module, here, once, and refuses a verb two modules declare:

- :mod:`sfclab.realize.agent`: ``check``, ``up``, ``down``, ``inspect`` (a host's part);
- :mod:`sfclab.realize.agent_sfc`: ``sfc-read``, ``sfc-classify``, ``sfc-probe`` (its share
  of the chains' data plane);
- :mod:`sfclab.realize.agent_scan`: ``scan`` (its CPUs and memory, before ``host add``);
- :mod:`.agent_chain`: ``chain-make``, ``chain-tables``, ``chain-unmake``, ``chain-check``,
  ``chain-ready``, ``chain-retire`` and the armed ``chain-switch`` (chains on a running lab);
- :mod:`.agent_conntrack`: ``conntrack-list``, ``conntrack-make`` (a migration's state);
- :mod:`.agent_containers`: ``container-check`` (an added instance's container, checked on the
  host it is placed on);
- :mod:`.agent_health`: ``chain-watch``, ``chain-health`` (the host's watcher);
- :mod:`.agent_proc`: ``proc-run``, ``proc-start``, ``proc-read``, ``proc-end``,
  ``procs-start``, ``procs-end``, ``tools`` (programs in the lab's namespaces: ``exec``,
  ``traffic``; the ``procs-`` verbs hold programs started together, ``traffic iperf``'s).

The table is lazy: a verb's module is imported when the verb is called, not before.  Each
call over SSH is a fresh Python that runs one verb, so importing every agent module (the
chains' and the spec's, pydantic with them) would cost every call, ``scan`` included, about
0.3 s of CPU before its work starts.  That the names here are each module's own verbs is
checked by the unit tests (``tests/unit/test_agent_verbs.py``), which import them all.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from ...realize import agent

V = TypeVar("V")

#: module -> (its verbs, its armed verbs), as each module's ``VERBS`` and ``ARMED`` declare them
MODULES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "sfclab.realize.agent": (("check", "up", "down", "inspect"), ()),
    "sfclab.realize.agent_sfc": (("sfc-read", "sfc-classify", "sfc-probe"), ()),
    "sfclab.realize.agent_scan": (("scan",), ()),
    "sfclab.live.runtime.agent_chain": (("chain-make", "chain-tables", "chain-unmake",
                                         "chain-check", "chain-ready", "chain-retire"),
                                        ("chain-switch",)),
    "sfclab.live.runtime.agent_conntrack": (("conntrack-list", "conntrack-make"), ()),
    "sfclab.live.runtime.agent_containers": (("container-check",), ()),
    "sfclab.live.runtime.agent_health": (("chain-watch", "chain-health"), ()),
    "sfclab.live.runtime.agent_proc": (("proc-run", "proc-start", "proc-read", "proc-end",
                                        "procs-start", "procs-end", "tools"), ()),
}


def joined(*tables: Mapping[str, V]) -> dict[str, V]:
    """One table of ``tables``; a verb in two of them is refused (:class:`ValueError`)."""
    out: dict[str, V] = {}
    for t in tables:
        for verb, fn in t.items():
            if verb in out:
                raise ValueError(f"agent verb {verb!r} is declared twice")
            out[verb] = fn
    return out


class Lazy(Mapping[str, Any]):
    """Verb -> its function, read from its module's table ``attr`` (``VERBS`` or ``ARMED``)
    when the verb is looked up; ``owners``: verb -> the module that declares it."""

    def __init__(self, owners: Mapping[str, str], attr: str) -> None:
        self.owners = dict(owners)
        self.attr = attr

    def __getitem__(self, verb: str) -> Any:
        table = getattr(importlib.import_module(self.owners[verb]), self.attr)
        return table[verb]

    def __contains__(self, verb: object) -> bool:  # the name alone: no import
        return verb in self.owners

    def __iter__(self) -> Iterator[str]:
        return iter(self.owners)

    def __len__(self) -> int:
        return len(self.owners)


#: verb -> the module that declares it (a verb is plain or armed, not both)
PLAIN = joined(*({v: m for v in plain} for m, (plain, _) in MODULES.items()))
ARMING = joined(*({v: m for v in armed} for m, (_, armed) in MODULES.items()))
joined(PLAIN, ARMING)
VERBS: Mapping[str, agent.Verb] = Lazy(PLAIN, "VERBS")
ARMED: Mapping[str, agent.ArmedVerb] = Lazy(ARMING, "ARMED")


def main(argv: list[str]) -> int:
    return agent.main(argv, VERBS, ARMED, module="sfclab.live.runtime.agent_verbs")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
