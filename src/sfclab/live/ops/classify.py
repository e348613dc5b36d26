"""``sfclab chain classify``: a file of classifiers added to a chain of a running lab, all or
nothing.

The order, so that no entry is ever live without a record of it and a refusal changes
nothing:

1. **Read once.**  The file (or a pipe, or ``-`` for stdin) is read in one bounded pass
   (:func:`sfclab.spec.reading.read_bytes`) and validated from those bytes
   (:mod:`sfclab.spec.classifier_file`); the same bytes are what gets recorded.
2. **Count before making.**  Each classifier's ingress must be one the chain has; its entries
   (one per combination of port prefixes, in each direction of a symmetric chain) and their
   wildcard masks are *counted* from the ranges, and the file is refused, naming the
   classifier where the count passes the limit, when the entries exceed the classifier map
   (:data:`~sfclab.spec.limits.MAX_CLASSES`) or the masks the mask table
   (:data:`~sfclab.spec.limits.MAX_MASKS`).  Only then are the entries made.
3. **Check the live maps** under the lab's lock: the masks in use plus the new ones, and
   the entries there plus the new ones, against the maps' own sizes.
4. **Record, then write.**  A copy of the bytes and a note (status ``writing``) go into the
   lab's state; the entries are written in batches that keep what they did
   (:class:`~sfclab.realize.dataplane.Undo`); a kernel error takes every entry and mask of
   this command out again and drops the note before it is reported.  The note then says
   ``written``.

On hosts driven over SSH each host's agent writes its share all or nothing; the note is
written first and stays (status ``failed``) if a later host refuses, so what an earlier host
wrote is still recorded for ``chain rm`` and ``down``.
"""

from __future__ import annotations

import time
from typing import Any

from ...plan.classifier_rows import Row, rows_of
from ...realize.state import LabState
from ...spec import classifier_file
from ...spec.reading import read_bytes, source_name
from .. import record
from .chains import _chain_dirs, _steering
from ..chains.classify_maps import Classify, check_counts, plan_masks
from ..runtime.table import live_for


def classify(lab: str, chain: str, path: str,
             wait_s: float = record.DEFAULT_WAIT_S) -> dict[str, Any]:
    """Add the classifiers of file ``path`` (``-``: stdin) to ``chain`` of running ``lab``
    (both directions of a symmetric chain); see the module docstring.  The bulk path: the
    file checked without a model per entry, the entries made in integers and written in
    batched map updates (100,000 in well under 2 s)."""
    t0 = time.monotonic()
    plan, sp = _steering(lab)
    dirs = _chain_dirs(sp, lab, chain)
    data = read_bytes(path)
    source = source_name(path)
    rules = classifier_file.parse(data, source)
    fwd = {d.ingress: d for d in dirs if not d.reverse}
    back = {d.ingress: [r for r in dirs if r.reverse and r.egress == d.ingress]
            for d in fwd.values()}
    total, masks = check_counts(rules, fwd, back, plan_masks(sp), source, plan.families)
    by_dir: dict[int, list[Row]] = {}
    for c in rules:
        by_dir.setdefault(fwd[c.ingress].index, []).extend(rows_of(c))
        for r in back[c.ingress]:
            by_dir.setdefault(r.index, []).extend(rows_of(c, reverse_at=r.ingress))
    state = LabState(lab)
    job = Classify(chain, source, data, rules, dirs, fwd, back, total, masks, by_dir)
    with record.lab_lock(state, wait_s, "chain classify"):
        # this machine's maps, or each ingress's host writes its entries (the runtime's)
        note, written = live_for(state).classify(plan, sp, job)
        record.update_classifiers(note, status="written", entries=written)
    return {"lab": lab, "chain": chain, "classifiers": len(rules), "entries": written,
            "seconds": round(time.monotonic() - t0, 3)}


