"""The time scripts/reproduce.sh may spend on added repetitions, shared per finding.

The budget (``REPRO_BUDGET`` seconds over the whole script) is not first come, first served:
every finding of the groups the script runs (in run order) is owed an equal share of what is
left.  When a group is first planned, each of its findings gets ``left / open`` seconds, where
``left`` is the budget minus what every finding spent so far and ``open`` counts the findings
not yet done (this group's and the later groups').  A file run again is charged, by the time it
really took, to the findings that asked for it (split equally); a finding may have files run
again only while the estimate fits what is left of its own share (files that serve several
findings may use their shares together).  When its group ends a finding is done: what it did not
spend stays in ``left`` and so goes to the findings after it.

Kept in the record (``OUT/reproduce.json``) as::

    "budget": {"total_s": S, "findings": {ID: {"group": NAME, "share_s": S|null,
                                               "spent_s": S, "repetitions": N|null,
                                               "done": bool}, ...}}

``repetitions`` is what the finding's comparison ran at its end (the fewer of its two points).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import SpecError


class Budget:
    """A view over the record's ``budget`` entry (changed in place)."""

    def __init__(self, data: dict[str, Any]):
        self.data = data

    @classmethod
    def start(cls, total_s: float, findings: Iterable[tuple[str, str]]) -> Budget:
        """A budget of ``total_s`` seconds over ``findings``: (finding id, its group), in the
        order the script runs the groups."""
        if total_s < 0:
            raise SpecError(f"expected a budget of 0 s or more, got {total_s}")
        return cls({"total_s": float(total_s),
                    "findings": {fid: {"group": group, "share_s": None, "spent_s": 0.0,
                                       "repetitions": None, "done": False}
                                 for fid, group in findings}})

    @property
    def findings(self) -> dict[str, dict[str, Any]]:
        f: dict[str, dict[str, Any]] = self.data["findings"]
        return f

    def left_s(self) -> float:
        """The budget minus what every finding spent (never below 0)."""
        return max(0.0, self.data["total_s"] - sum(f["spent_s"] for f in self.findings.values()))

    def of_group(self, group: str) -> list[str]:
        return [fid for fid, f in self.findings.items() if f["group"] == group]

    def allowances(self, group: str) -> dict[str, float]:
        """Finding id -> seconds it may still spend, for ``group``'s findings; the first call
        for a group gives each of its findings its equal share of what is left."""
        ids = self.of_group(group)
        new = [fid for fid in ids if self.findings[fid]["share_s"] is None]
        if new:
            open_ = sum(1 for f in self.findings.values() if not f["done"])
            share = self.left_s() / open_ if open_ else 0.0
            for fid in new:
                self.findings[fid]["share_s"] = share
        return {fid: max(0.0, self.findings[fid]["share_s"] - self.findings[fid]["spent_s"])
                for fid in ids if not self.findings[fid]["done"]}

    def charge(self, ids: Iterable[str], seconds: float) -> None:
        """``seconds`` spent on a file run again for ``ids``, split equally among those of
        them the budget knows."""
        known = [fid for fid in ids if fid in self.findings]
        for fid in known:
            self.findings[fid]["spent_s"] += max(0.0, seconds) / len(known)

    def close(self, group: str, repetitions: Mapping[str, int]) -> None:
        """``group`` ended: its findings are done (a finding never planned gets the share it
        was owed, for the page), with the repetitions their comparisons ran."""
        self.allowances(group)
        for fid in self.of_group(group):
            self.findings[fid]["done"] = True
            if fid in repetitions:
                self.findings[fid]["repetitions"] = int(repetitions[fid])


def fit(plans: list[Any], allowance: Mapping[str, float]) -> list[Any]:
    """The plans (cheapest first; each with ``estimate_s`` and ``findings``) whose estimate fits
    the pooled allowance left to its findings; a chosen plan uses up its findings' allowances
    in their order."""
    left = dict(allowance)
    chosen = []
    for p in sorted(plans, key=lambda p: p.estimate_s):
        ids = [fid for fid in p.findings if fid in left]
        if not ids or p.estimate_s > sum(left[fid] for fid in ids):
            continue
        chosen.append(p)
        owed = p.estimate_s
        for fid in ids:
            take = min(owed, left[fid])
            left[fid] -= take
            owed -= take
    return chosen
