"""Which kind of sfclab file a document is, from its top-level keys.

=============  ================================================  ==========================
kind           told by                                           used by
=============  ================================================  ==========================
``lab``        anything else (``nodes``, ``links``, ``chain``)    ``sfclab up``
``experiment`` ``measure``, ``sweep``, ``variants`` or ``lab``   ``sfclab run``
``chain``      ``functions`` without ``nodes``/``links``         ``sfclab chain add``
``classifier`` a list, or only ``classifiers``                   ``sfclab chain classify``
``findings``   ``findings`` or ``tables``                        ``scripts/reproduce.sh``
=============  ================================================  ==========================

A file that is none of them reads as a lab file, whose checks then name what is wrong.
"""

from __future__ import annotations

from typing import Any

KINDS = ("lab", "experiment", "chain", "classifier", "findings")

_EXPERIMENT = {"measure", "sweep", "variants", "repetitions", "warmup", "cooldown"}
_LAB = {"nodes", "links", "chain", "chains", "hosts", "tenants", "underlay", "groups"}


def kind_of(data: Any) -> str:
    """The kind of a parsed document (see the table above)."""
    if isinstance(data, list):
        return "classifier"
    if not isinstance(data, dict):
        return "lab"
    keys = set(data)
    if keys & {"findings", "tables"}:
        return "findings"
    if keys & _EXPERIMENT or ("lab" in keys and not keys & _LAB):
        return "experiment"
    if "functions" in keys and not keys & _LAB:
        return "chain"
    if "classifiers" in keys and keys <= {"classifiers"}:
        return "classifier"
    return "lab"
