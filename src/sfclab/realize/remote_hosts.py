"""Hosts driven over SSH joining and leaving a running lab (``sfclab host add --ssh`` / ``host
rm``), this machine's side.

A host joins by one ``remote-host`` journal entry (the same entry ``up`` writes for the lab
file's hosts, :mod:`sfclab.realize.remote`), written before anything is made there, so ``down``
asks its agent to remove whatever of the lab it holds by then.  It leaves by its agent's
``down`` (nothing there: ``absent``), then its entry leaves the journal.
"""

from __future__ import annotations

from ..errors import RealizeError
from ..hosts.ssh import SshTarget, call
from . import remote
from .state import LabState


def join(state: LabState, t: SshTarget) -> None:
    state.record([{"op": remote.OP, "host": t.host, "target": t.to_dict()}])


def leave(state: LabState, host: str) -> list[str]:
    """The host's agent removes its part; its journal entry goes when it did.  The errors (an
    unreachable host keeps its entry, for ``down``)."""
    entries = state.journal()
    mine = [e for e in entries if e.get("op") == remote.OP and e.get("host") == host]
    errors = []
    for e in mine:
        try:
            got = call(SshTarget.from_dict(e["target"]), "down", {"lab": state.name},
                       timeout=300)
        except RealizeError as err:
            return [f"{err}; its part is left: run 'sfclab down {state.name}'"]
        errors += [f"host {host}: {x}" for x in got.get("errors", [])]
    remote._rewrite_journal(state, [e for e in entries if e not in mine])
    return errors
