"""``chain classify``'s counts and its writes into this machine's maps (the model:
:mod:`sfclab.live.ops.classify`): :class:`Classify` is one file's classifiers made into rows,
checked by
:func:`check_counts` against the map sizes before anything is made; the ``local`` runtime then
checks them against the live maps (:func:`check_live`, :func:`refuse_shadowing`) and writes
them all or nothing (:func:`write`); the ``ssh`` runtime sends each ingress's host its rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import RealizeError, SpecError
from ...plan.classifier_rows import Mask, Row, entry_count, masks_of, rows_of
from ...plan.sfc import DirectionPlan, SteeringPlan, mask_key
from ...realize.dataplane import DataPlane, Undo
from ...spec.limits import MAX_CLASSES, MAX_MASKS
from .. import record

if TYPE_CHECKING:  # light start-up: the agents load no classifier-file models
    from ...spec.classifier_file import Rule

#: the order of a classified entry among equal priorities: after the lab file's
ORDER = 4000


@dataclass
class Classify:
    """One ``chain classify``: the file's classifiers (``rules``, read from ``data``) for
    ``chain``'s directions ``dirs`` (``fwd``: by ingress; ``back``: the reverse directions of
    each ingress), counted (``total`` entries, ``masks``), as rows by direction index."""

    chain: str
    source: str
    data: bytes
    rules: list[Rule]
    dirs: list[DirectionPlan]
    fwd: dict[str, DirectionPlan]
    back: dict[str, list[DirectionPlan]]
    total: int
    masks: set[Mask]
    by_dir: dict[int, list[Row]]


def check_counts(rules: list[Rule], fwd: dict[str, DirectionPlan],
                 back: dict[str, list[DirectionPlan]],
                 masks_in_use: set[Mask], source: str,
                 carried: tuple[int, ...] = (4,)) -> tuple[int, set[Mask]]:
    """Every classifier's ingress and family (one of the lab's ``carried`` families, or
    any: :func:`sfclab.spec.sfc.family_problem`), and its entries and masks counted (not
    made) against the map sizes; the number of entries and the masks with ``masks_in_use``
    (a refusal names the classifier that passes a limit)."""
    from ...spec.sfc import family_problem  # light start-up: the rules' models loaded them

    total = 0
    masks = set(masks_in_use)
    refused = {f for f in ("ipv4", "ipv6") if family_problem(f, carried)}
    # what a classifier makes depends on its prefix lengths, ports, protocol and family only:
    # each such shape is counted once (a file of 100,000 sources has a handful of shapes)
    shapes: dict[tuple[Any, ...], tuple[int, set[Mask]]] = {}
    for i, c in enumerate(rules):
        d = fwd.get(c.ingress)
        if d is None:
            raise SpecError(f"expected one of the chain's ingress nodes "
                            f"({', '.join(fwd)}), got {c.ingress!r}", file=source,
                            place=f"[{i}].ingress")
        if c.family in refused:
            raise SpecError(str(family_problem(c.family, carried)), file=source,
                            place=f"[{i}].family")
        both = bool(back[c.ingress])
        shape = (c.src[1] if c.src else -1, c.dst[1] if c.dst else -1, c.sport, c.dport,
                 c.proto, c.family, both)
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


def plan_masks(sp: SteeringPlan) -> set[Mask]:
    """The masks of the entries the lab's plan holds (lab-file and added chains)."""
    return {mask_key(e) for d in sp.directions for c in d.classifiers for e in c["entries"]}


def check_live(dp: DataPlane, rules: list[Rule], fwd: dict[str, DirectionPlan],
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


def refuse_shadowing(dp: DataPlane, sp: SteeringPlan, mine: set[int],
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


def write(dp: DataPlane, sp: SteeringPlan, by_dir: dict[int, list[Row]], note: Path,
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
