"""The native generator's senders and receivers, by name: what a measurement request may ask
for (:mod:`.measurement` checks it) and what every command's help names.  No model here, so
the command line names them without loading the request models (pydantic)."""

from __future__ import annotations

#: every sender engine of the native generator (sfcgen send --engine)
ENGINES = ("auto", "packet", "ring", "udp", "xdp")
#: every receiver of the native generator: ``kernel`` (the default) counts in the receiving
#: namespace's softirq, at XDP or, where the interface runs an XDP program, at tcx ingress;
#: ``xdp`` and ``tc`` ask for one hook; ``socket`` counts in user space (can be starved)
SINKS = ("kernel", "xdp", "tc", "socket")
