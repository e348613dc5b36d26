"""The bad-input promise, judged case by case, for the fuzz tests.

The promise: a bad lab, chain, classifier or experiment file (or API body) is refused with one
:class:`~sfclab.errors.SpecError` -- the file, a place in it (a place such as
``links[0].mtu`` or a line) and what was expected, in one line -- and never with any other
exception.  A document the validator accepts is skipped, unless it breaks the sanity rule
(:func:`tests.fuzzgrammar.insane_strings`): then the validator let a bad one through.

Objects: a :class:`Failure` is one broken promise, with a *signature* (the input kind, what
went wrong -- an exception's type, ``unlocated``, ``accepted`` ... -- and where: the frame in
``src/sfclab`` that raised, or the document's place); :class:`Known` is a failure found before
and owned by someone, matched by kind, what and a pattern over where and the message.
:func:`judge` runs one case through the loaders of its kind (in process, no root) and returns
the failure or None; :func:`record` appends a failure to the file named by
``SFCLAB_FUZZ_COLLECT`` (a long run by hand collects instead of stopping at the first).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from sfclab.errors import SpecError
from sfclab.spec.source import format_place
from tests.fuzzgrammar import LATER, Case, insane_strings

#: a long run by hand: append each failure here (JSON lines) instead of failing the test
COLLECT = os.environ.get("SFCLAB_FUZZ_COLLECT")


@dataclass(frozen=True)
class Failure:
    kind: str
    what: str  # an exception's type, or 'unlocated', 'two-lines', 'accepted', 'cli' ...
    where: str  # sfclab's frame that raised (file:function), or the document's place
    detail: str
    text: str

    def signature(self) -> str:
        return f"{self.kind}: {self.what} at {self.where}"

    def __str__(self) -> str:
        return f"{self.signature()}: {self.detail}\ninput: {self.text!r}"


#: the classes of work that fixed failures the fuzzer found (its ``Known`` entries' owners)
COMPLEX_KEYS = "input bounds: YAML complex keys"
MEASURE_TYPE = "validation refusal classes: measure.type type checks"
IFNAMES = "validation refusal classes: interface names"

#: the smallest inputs of those failures, shared by the root-free and the root tier
COMPLEX_KEY_LAB = "? [a, b]\n: c\nname: x\nchain: {length: 2}\n"
COMPLEX_KEY_CHAIN = "? [a, b]\n: c\nname: video\n"
COMPLEX_KEY_CLASSIFIERS = "[a]: 1\nclassifiers: []\n"
MEASURE_TYPE_LIST = '{"type": [], "flows": 1}'


@dataclass(frozen=True)
class Known:
    """A failure found before and left to its owner (see the test file's list)."""

    id: str
    owner: str  # the class of work that fixes it (another engineer's)
    kind: str
    what: str
    pattern: str  # searched in the failure's where and detail
    reproducer: str  # the smallest input known to fail

    def matches(self, f: Failure) -> bool:
        return f.kind == self.kind and f.what == self.what and \
            re.search(self.pattern, f"{f.where} {f.detail}") is not None


def known_case(k: Known) -> Case:
    """The case of a known failure's reproducer (a measurement body is JSON)."""
    data = json.loads(k.reproducer) if k.kind == "measure" else None
    return Case(k.kind, "reproducer", [], k.reproducer, data)


def code_place(e: BaseException) -> str:
    """The innermost frame of sfclab's own code in ``e``'s traceback (``spec/lab.py:validate``)."""
    here = "unknown"
    for fr in traceback.extract_tb(e.__traceback__):
        if "/sfclab/" in fr.filename:
            here = f"{fr.filename.split('/sfclab/', 1)[1]}:{fr.name}"
    return here


def unlocated(e: SpecError, file: str | None) -> str | None:
    """What is wrong with ``e`` as the promised message, or None."""
    if file is not None and e.file != file:
        return f"names file {e.file!r}, not {file!r}"
    if not e.place and e.line is None:
        return "names no place and no line"
    if "\n" in str(e):
        return "is more than one line"
    if not e.message.strip():
        return "says nothing"
    return None


def _failure(case: Case, e: BaseException, text: str) -> Failure:
    return Failure(case.kind, type(e).__name__, code_place(e), str(e)[:300], text)


def _run(kind: str, path: str, data: Any) -> tuple[list[Any], Any]:
    """Load the case with its kind's loaders; returns the names the accepted document gives
    (for the sanity rule) and the document.  Raises what the loaders raise."""
    if kind == "lab":
        from sfclab.realize.hosts import inspect_links
        from sfclab.realize.kinds import load_lab
        from sfclab.realize.lifecycle import check

        lab = load_lab(path)
        plan = check(lab)  # what 'validate' runs
        lab.to_dict()
        if lab.hosts:
            inspect_links(plan)  # what 'expand' adds for a lab with hosts
        return [lab.name, *lab.nodes, *lab.chains, *lab.groups, *lab.hosts, *lab.tenants], \
            lab.raw
    if kind == "chain":
        from sfclab.spec.source import Document
        from sfclab.live.request import from_document

        req = from_document("fz-nolab", Document.from_file(path))
        return [req.chain.name, *(f.name for f in req.functions)], data
    if kind == "classifiers":
        from sfclab.spec import classifier_file

        classifier_file.read(path)
        return [], data
    if kind == "experiment":
        from sfclab.realize.kinds import load_lab_dict
        from sfclab.spec.experiment import expand, load_experiment

        exp = load_experiment(path)
        points = expand(exp, load_lab_dict)
        # what runs: each point's lab and measurement (a swept value replaces the file's)
        return [exp.name, *exp.variants], [[p.lab, p.measure] for p in points[:50]]
    raise ValueError(kind)


def _measure_body(lab: str, body: Any) -> None:
    from sfclab.web.routes.measurements import check

    check(lab, body)


def _host_body(lab: str, body: Any) -> None:
    """What ``POST /api/labs/{lab}/hosts`` checks before it adds a host."""
    from sfclab.spec.quantities import parse_size
    from sfclab.live.ops.hostops import check_host_request
    from sfclab.web.routes.hosts import NewHost

    h = NewHost.model_validate(body)
    check_host_request(h.name, h.cpus, parse_size(h.memory))


def _migrate_body(lab: str, body: Any) -> None:
    from sfclab.web.routes.chains import Migration

    Migration.model_validate(body)


#: the API bodies that are no file: how the route checks each before it acts
BODIES = {"measure": _measure_body, "host": _host_body, "migrate": _migrate_body}


def refusal(case: Case, path: Path, lab: str = "fz-nolab") -> BaseException | None:
    """What the library raises for ``case`` (written to ``path``), or None if it accepts it;
    chain files are read as a request for running lab ``lab``, measurement bodies are checked
    against it (the nodes it has) as the API checks them."""
    if case.kind in BODIES:
        try:
            BODIES[case.kind](lab, case.data)
        except Exception as e:  # noqa: BLE001 - any refusal; the caller judges its type
            return e
        return None
    path.write_text(case.text, encoding="utf-8")
    try:
        if case.kind == "chain":
            from sfclab.spec.source import Document
            from sfclab.live.request import from_document

            from_document(lab, Document.from_file(str(path)))
        else:
            _run(case.kind, str(path), None)
    except Exception as e:  # noqa: BLE001 - any refusal; the caller judges its type
        return e
    return None


def judge(case: Case, tmp: Path) -> Failure | None:
    """Run ``case`` through its kind's loaders (and, for a lab, ``sfclab validate``)."""
    if case.kind == "measure":
        return judge_measure(case)
    path = tmp / f"fz-{case.kind}.yaml"
    path.write_text(case.text, encoding="utf-8")
    try:
        data = yaml.safe_load(case.text)
    except (yaml.YAMLError, RecursionError, TypeError, ValueError):
        data = None
    try:
        names, accepted = _run(case.kind, str(path), data)
    except SpecError as e:
        problem = unlocated(e, str(path))
        if problem:
            return Failure(case.kind, "unlocated", e.place or "-", f"{problem}: {e}",
                           case.text)
        return judge_cli(case, path, refused=True)
    except Exception as e:  # noqa: BLE001 - the promise: nothing but SpecError
        return _failure(case, e, case.text)
    later = LATER if case.kind in ("chain", "classifiers") else ()
    judged = accepted if case.kind == "experiment" or data is None else data
    insane = insane_strings(names, judged, later)
    if insane:
        return Failure(case.kind, "accepted", insane[0], "; ".join(insane)[:300], case.text)
    return judge_cli(case, path, refused=False)


def judge_cli(case: Case, path: Path, refused: bool) -> Failure | None:
    """``sfclab validate --kind lab FILE`` in process (labs only; a mutated lab file is checked as
    a lab whatever it now looks like, e.g. ``[]``, which alone reads as a classifier list): exit 2
    and one located line when the library refused the file, exit 0 when it accepted it; never a
    traceback."""
    if case.kind != "lab":
        return None
    from sfclab.cli import main

    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        status = main(["validate", "--kind", "lab", str(path)])
    said = err.getvalue()
    lines = [ln for ln in said.splitlines() if ln.strip()]
    want = 2 if refused else 0
    if status != want or "Traceback" in said or (refused and (
            len(lines) != 1 or not lines[0].startswith(f"sfclab: error: {path}"))):
        return Failure(case.kind, "cli", f"validate exit {status}", said[-300:], case.text)
    return None


def judge_measure(case: Case) -> Failure | None:
    """A measurement mapping (``measure:`` and the API's body): refused with
    :class:`~sfclab.spec.measurement.RequestInvalid` naming a place (or, for a body that is not
    a mapping, the whole request)."""
    from sfclab.spec import measurement

    text = json.dumps(case.data, allow_nan=True)
    try:
        measurement.validate(case.data)
    except measurement.RequestInvalid as e:
        if not e.loc and isinstance(case.data, dict) and "type" in case.data:
            return Failure(case.kind, "unlocated", "-", e.message, text)
        shown = str(SpecError(e.message, place=format_place(e.loc) or None))  # as said
        if "\n" in shown or not e.message.strip():
            return Failure(case.kind, "unlocated", str(e.loc), shown, text)
        return None
    except Exception as e:  # noqa: BLE001 - the promise: nothing but RequestInvalid
        return _failure(case, e, text)
    insane = insane_strings([], case.data, LATER)
    if insane:
        return Failure(case.kind, "accepted", insane[0], "; ".join(insane)[:300], text)
    return None


def record(f: Failure) -> None:
    """Append ``f`` to the collection file (a long run by hand)."""
    assert COLLECT
    with open(COLLECT, "a", encoding="utf-8") as out:
        out.write(json.dumps({"signature": f.signature(), "detail": f.detail,
                              "text": f.text}) + "\n")


def verdict(f: Failure | None, known: list[Known]) -> str | None:
    """What the test must fail with: None for no failure, a known failure (left to its
    owner, tested by its reproducer), or a failure collected by a long run."""
    if f is None or any(k.matches(f) for k in known):
        return None
    if COLLECT:
        record(f)
        return None
    return str(f)
