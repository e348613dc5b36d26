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
from pathlib import Path
from typing import Any

from ..errors import RealizeError, SpecError
from ..plan.classifier_rows import Mask, Row, entry_count, masks_of, rows_of
from ..plan.sfc import DirectionPlan, SteeringPlan, mask_key
from ..realize import remote_sfc
from ..realize.dataplane import DataPlane, Undo
from ..realize.state import LabState
from ..spec import classifier_file
from ..spec.classifier_file import Rule
from ..spec.limits import MAX_CLASSES, MAX_MASKS
from ..spec.reading import read_bytes, source_name
from . import record
from .chains import _chain_dirs, _steering

#: the order of a classified entry among equal priorities: after the lab file's
ORDER = 4000


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
    total, masks = check_counts(rules, fwd, back, _plan_masks(sp), source)
    by_dir: dict[int, list[Row]] = {}
    for c in rules:
        by_dir.setdefault(fwd[c.ingress].index, []).extend(rows_of(c))
        for r in back[c.ingress]:
            by_dir.setdefault(r.index, []).extend(rows_of(c, reverse_at=r.ingress))
    state = LabState(lab)
    with record.lab_lock(state, wait_s, "chain classify"):
        if remote_sfc.is_remote(state):  # each ingress's host writes its entries
            note = record.save_classifiers(state, chain, source, data, len(rules), total,
                                           "writing")
            try:
                written = remote_sfc.classify(state, plan, by_dir, order=ORDER)
            except BaseException:
                record.update_classifiers(note, status="failed")
                raise
        else:
            with DataPlane(lab) as dp:
                undo = _check_live(dp, rules, fwd, back, total, masks, source)
                _refuse_shadowing(dp, sp, {d.index for d in dirs}, by_dir, rules, back,
                                  source, undo.before or {})
                note = record.save_classifiers(state, chain, source, data, len(rules), total,
                                               "writing")
                written = _write(dp, sp, by_dir, note, undo)
        record.update_classifiers(note, status="written", entries=written)
    return {"lab": lab, "chain": chain, "classifiers": len(rules), "entries": written,
            "seconds": round(time.monotonic() - t0, 3)}


def check_counts(rules: list[Rule], fwd: dict[str, DirectionPlan],
                 back: dict[str, list[DirectionPlan]],
                 masks_in_use: set[Mask], source: str) -> tuple[int, set[Mask]]:
    """Every classifier's ingress, and its entries and masks counted (not made) against the
    map sizes; the number of entries and the masks with ``masks_in_use`` (a refusal names
    the classifier that passes a limit)."""
    total = 0
    masks = set(masks_in_use)
    # what a classifier makes depends on its prefix lengths, ports and protocol only: each
    # such shape is counted once (a file of 100,000 sources has a handful of shapes)
    shapes: dict[tuple[Any, ...], tuple[int, set[Mask]]] = {}
    for i, c in enumerate(rules):
        d = fwd.get(c.ingress)
        if d is None:
            raise SpecError(f"expected one of the chain's ingress nodes "
                            f"({', '.join(fwd)}), got {c.ingress!r}", file=source,
                            place=f"[{i}].ingress")
        both = bool(back[c.ingress])
        shape = (c.src[1] if c.src else -1, c.dst[1] if c.dst else -1, c.sport, c.dport,
                 c.proto, both)
        got = shapes.get(shape)
        if got is None:
            got = shapes[shape] = (entry_count(c) * (1 + len(back[c.ingress])),
                                   masks_of(c) | (masks_of(c, reverse=True) if both else set()))
        total += got[0]
        if total > MAX_CLASSES:
            raise SpecError(f"the classifiers up to here make {total:,} entries (port ranges "
                            f"make one per prefix, in each direction); the lab's classifier "
                            f"map holds at most {MAX_CLASSES:,}", file=source, place=f"[{i}]")
        if got[1] <= masks:
            continue
        masks |= got[1]
        if len(masks) > MAX_MASKS:
            raise SpecError(f"the classifiers up to here need {len(masks)} distinct wildcard "
                            f"masks with the lab's own (port ranges need one per prefix "
                            f"length); at most {MAX_MASKS}", file=source, place=f"[{i}]")
    return total, masks


def _plan_masks(sp: SteeringPlan) -> set[Mask]:
    """The masks of the entries the lab's plan holds (lab-file and added chains)."""
    return {mask_key(e) for d in sp.directions for c in d.classifiers for e in c["entries"]}


def _check_live(dp: DataPlane, rules: list[Rule], fwd: dict[str, DirectionPlan],
                back: dict[str, list[DirectionPlan]], total: int, masks: set[Mask],
                source: str) -> Undo:
    """The counts of :func:`check_counts` against the live maps: the masks in use now, and
    the entries there now (the map read once; the same read serves to undo)."""
    live_masks = set(dp.masks())
    if len(live_masks | masks) > dp.maps["sfc_masks"].max_entries:
        check_counts(rules, fwd, back, live_masks, source)  # names the classifier, raises
    classes = dp.maps["sfc_classes"]
    undo = Undo(before=classes.items())
    live = len(undo.before or ())
    if live + total > classes.max_entries:
        raise SpecError(f"the lab's classifier map holds {live:,} entries; {total:,} more "
                        f"would pass its size of {classes.max_entries:,}", file=source)
    return undo


def _refuse_shadowing(dp: DataPlane, sp: SteeringPlan, mine: set[int],
                      by_dir: dict[int, list[Row]], rules: list[Rule],
                      back: dict[str, list[DirectionPlan]], source: str,
                      table: dict[bytes, bytes]) -> None:
    """Refuse, before anything is written, a classifier whose entry another chain holds: the
    write would take the entry over (one chain would shadow the other), as ``chain add`` and
    the lab file refuse.  The chain's own entries may be written again.  ``table`` is the
    classifier map as read for the counts; the rule at fault is looked for only once there
    is one."""
    rows = [r for rs in by_dir.values() for r in rs]
    taken = {r for r, held in zip(rows, dp.holders(sp.node_ids, rows, table))
             if held is not None and held not in mine}
    if not taken:
        return
    for i, c in enumerate(rules):
        hit = [r for r in rows_of(c) + [x for d in back[c.ingress]
                                        for x in rows_of(c, reverse_at=d.ingress)]
               if r in taken]
        if hit:
            held = dp.holders(sp.node_ids, hit[:1], table)[0]
            other = next((d.chain for d in sp.directions if d.index == held), "?")
            raise SpecError(f"this classifier makes an entry chain '{other}' holds (one would "
                            "shadow the other, whatever the priorities)", file=source,
                            place=f"[{i}]")


def _write(dp: DataPlane, sp: SteeringPlan, by_dir: dict[int, list[Row]], note: Path,
           undo: Undo) -> int:
    """Every direction's rows, all or nothing: on a failure what was written is taken out
    and the note dropped before the error goes on."""
    written = 0
    try:
        for di, rows in by_dir.items():
            written += dp.add_rows(sp.node_ids, di, rows, order=ORDER, undo=undo)
    except BaseException as e:
        left = dp.undo(undo)
        if left:  # entries still live: keep their record, say so
            record.update_classifiers(note, status="failed")
            raise RealizeError(f"{e} (and taking the written entries out failed: "
                               f"{'; '.join(left[:3])})") from e
        record.drop_classifiers(note)
        raise
    return written
