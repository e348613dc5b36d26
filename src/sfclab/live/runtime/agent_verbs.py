"""The agent's verbs, all in one table: what a host driven over SSH runs
(``python -m sfclab.live.runtime.agent_verbs VERB``, the request as JSON on stdin, the answer on
stdout; :func:`sfclab.realize.agent.main` reads, dispatches and answers).

Each agent module declares its own verbs and nothing else; this table joins them, here,
once, and refuses a verb two modules declare:

- :mod:`sfclab.realize.agent`: ``check``, ``up``, ``down``, ``inspect`` (a host's part);
- :mod:`sfclab.realize.agent_sfc`: ``sfc-read``, ``sfc-classify``, ``sfc-probe`` (its share
  of the chains' data plane);
- :mod:`sfclab.realize.agent_scan`: ``scan`` (its CPUs and memory, before ``host add``);
- :mod:`.agent_chain`: ``chain-make``, ``chain-tables``, ``chain-unmake``, ``chain-check``,
  ``chain-ready``, ``chain-retire`` and the armed ``chain-switch`` (chains on a running lab);
- :mod:`.agent_conntrack`: ``conntrack-list``, ``conntrack-make`` (a migration's state);
- :mod:`.agent_containers`: ``container-check`` (an added instance's container, checked on the
  host it is placed on);
- :mod:`.agent_health`: ``chain-watch``, ``chain-health`` (the host's watcher).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import TypeVar

from ...realize import agent, agent_scan, agent_sfc
from . import agent_chain, agent_conntrack, agent_containers, agent_health

V = TypeVar("V")


def joined(*tables: Mapping[str, V]) -> dict[str, V]:
    """One table of ``tables``; a verb in two of them is refused (:class:`ValueError`)."""
    out: dict[str, V] = {}
    for t in tables:
        for verb, fn in t.items():
            if verb in out:
                raise ValueError(f"agent verb {verb!r} is declared twice")
            out[verb] = fn
    return out


VERBS: dict[str, agent.Verb] = joined(agent.VERBS, agent_sfc.VERBS, agent_scan.VERBS, agent_chain.VERBS,
               agent_conntrack.VERBS, agent_containers.VERBS, agent_health.VERBS)
ARMED: dict[str, agent.ArmedVerb] = joined(agent.ARMED, agent_chain.ARMED)


def main(argv: list[str]) -> int:
    return agent.main(argv, VERBS, ARMED, module="sfclab.live.runtime.agent_verbs")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
