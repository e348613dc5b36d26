"""``sfclab validate``: any sfclab file checked as the command that would use it checks it.

:func:`check` reads the file once to tell its kind (:mod:`sfclab.spec.filekind`, or the kind
given), then runs that command's own checks, nothing built and nothing started:

- a lab file: the spec and the plan (``sfclab up`` stops at the same first fault);
- an experiment file: the spec and every lab it expands to (``sfclab run`` before it writes);
- a chain file: every function's kind, parameters and image (``sfclab chain add`` before it
  looks at the running lab);
- a classifier file: every entry (``sfclab chain classify``);
- the findings file of the reproduction.

The answer is a :class:`Finding`: valid with a summary, or the first fault as the
:class:`~sfclab.errors.SpecError` the command would have raised (file, line, place).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import SfclabError, SpecError
from ..spec.filekind import KINDS, kind_of
from ..spec.source import Document


@dataclass
class Finding:
    file: str
    kind: str | None
    error: SfclabError | None = None
    #: what the file holds, when valid (the name, counts of nodes, runs, rules ...)
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"file": self.file, "kind": self.kind, "valid": self.valid,
                             **self.summary}
        if self.error is not None:
            e = self.error
            d["error"] = {"message": getattr(e, "message", str(e)), "exit_status": e.exit_status,
                          "line": getattr(e, "line", None), "place": getattr(e, "place", None),
                          "text": str(e)}
        return d

    def text(self) -> str:
        """One line for a person (a fault's line is the command's own message)."""
        if self.error is not None:
            return str(self.error)
        s = self.summary
        name = f" '{s['name']}'" if s.get("name") else ""
        counts = {"lab": ("nodes", "links", "routes"), "experiment": ("runs", "labs"),
                  "chain": ("functions", "classifiers"), "classifier": ("classifiers",),
                  "findings": ("findings", "tables")}[self.kind or "lab"]
        what = ", ".join(_count(s[k], k) for k in counts)
        return f"{self.file}: {self.kind} file{name} is valid ({what})"


def _count(n: int, plural: str) -> str:
    return f"{n:,} {plural if n != 1 else plural[:-1]}"


def _lab(path: str) -> dict[str, Any]:
    from ..realize.kinds import load_lab  # light start-up: only the kind asked for
    from ..realize.lifecycle import check as check_lab

    lab = load_lab(path)
    plan = check_lab(lab)
    return {"name": lab.name, "nodes": len(lab.nodes), "links": len(lab.links),
            "routes": len(plan.routes)}


def _experiment(path: str) -> dict[str, Any]:
    from ..realize.kinds import load_lab_dict  # light start-up: only the kind asked for
    from ..spec.experiment import expand, load_experiment

    exp = load_experiment(path)
    points = expand(exp, load_lab_dict)
    return {"name": exp.name, "runs": len(points),
            "labs": len({p.lab_hash for p in points})}


def _chain(path: str) -> dict[str, Any]:
    from ..live.request import check_chain_file  # light start-up: only the kind asked for

    chain = check_chain_file(path)
    return {"name": chain.name, "functions": len(chain.functions),
            "classifiers": len(chain.classifiers)}


def _classifier(path: str) -> dict[str, Any]:
    from ..spec import classifier_file  # light start-up: only the kind asked for

    return {"classifiers": len(classifier_file.read(path))}


def _findings(path: str) -> dict[str, Any]:
    from .findings import load_findings  # light start-up: only the kind asked for

    f = load_findings(path)
    return {"findings": len(f.findings), "tables": len(f.tables)}


#: kind -> the check of the command that uses such files
CHECKS: dict[str, Callable[[str], dict[str, Any]]] = {
    "lab": _lab, "experiment": _experiment, "chain": _chain, "classifier": _classifier,
    "findings": _findings}
assert set(CHECKS) == set(KINDS)


def check(path: str, kind: str | None = None) -> Finding:
    """``path`` checked as a ``kind`` file (None: told from its keys).  Faults of the file are
    in the finding; only a kind that is not one of :data:`KINDS` raises."""
    if kind is not None and kind not in CHECKS:
        raise SpecError(f"expected one of {', '.join(KINDS)}, got {kind!r}", place="--kind")
    try:
        if kind is None:
            kind = kind_of(Document.from_file(path).data)
        return Finding(path, kind, summary=CHECKS[kind](path))
    except SfclabError as e:
        return Finding(path, kind, error=e)
