"""The experiment file: one lab, one measurement, a sweep, repetitions.

Model::

    name: chain-length              # [A-Za-z0-9][A-Za-z0-9_.-]*, at most 64 characters
    description: throughput against chain length   # optional
    lab: ../labs/chain.yaml         # a lab file (relative to this file) or an inline mapping:
    # lab: {name: cl, chain: {length: 2}}
    measure:                        # one measurement; its options depend on ``type``
      type: iperf                   # iperf | rate | ndr | latency
      flows: 8
      duration: 10
    sweep:                          # dotted paths into the lab or the measurement, crossed
      lab.chain.length: [2, 3, 5]   # ``chain.length`` (no prefix) is a lab path too
      measure.flows: [1, 8]
    variants:                       # optional: named setups, each setting several paths at
      bridge: {links.0.attach: bridge, links.1.attach: bridge}     # once; crossed with the
      shortbridge: {links.0.attach: shortbridge, links.1.attach: shortbridge}   # sweep
    repetitions: 3                  # each point of the cartesian product is run this often
    seed: 7                         # optional; trial order is shuffled with it (recorded)
    warmup: 1                       # seconds between the lab coming up and the measurement
    cooldown: 2                     # seconds after teardown, before the next run

:func:`load_experiment` validates the whole file (and each measurement variant of the sweep)
before anything is built; every problem is a :class:`~sfclab.errors.SpecError` naming the file,
the place (``sweep.chain.length[2]``) and the line.  The lab stays a plain mapping here: the lab
core validates it, through a ``validate_lab(d, source)`` callable handed to :func:`expand`.

A *variant* is one named setup of the same study (Trellis's bridge, shortbridge, native ...) that
differs from the others in several places at once, which crossing single paths cannot say. Each
variant's paths are set first (in the order written), then the swept values; a run's params then
hold ``variant: <name>`` beside the swept paths, so the report shows the variants as one series
each.  A value ``null`` removes the key (a native setup without ``hosts``).

A *run point* (:class:`RunPoint`) is one concrete trial: the resolved lab mapping, the resolved
measurement mapping (defaults filled in), the swept values (``params``, keyed by canonical path,
``lab.chain.length`` / ``measure.flows``) and the repetition index.  Its ``key`` hashes the params,
the repetition and the hashes of the resolved lab and measurement, so a resumed experiment finds
the points it already ran, and a changed lab file yields new points rather than stale matches.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import os
import random
import re
from dataclasses import dataclass
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import SpecError
from . import measurement
from .names import NAME_WORDS
from .limits import MAX_RUNS, MAX_SWEEP_POINTS
from .source import Document, format_place, parse_place
from .wording import pydantic_error

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
PATH_RE = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*\Z")

#: ``validate_lab(lab_dict, source)``: raises SpecError when the lab is not valid
LabValidator = Callable[[dict[str, Any], str], Any]

# --------------------------------------------------------------------------- the file

class ExperimentFile(BaseModel):
    """The top level of an experiment file, as written."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    lab: dict[str, Any] | str
    measure: dict[str, Any]
    sweep: dict[str, list[Any]] = Field(default_factory=dict)
    variants: dict[str, dict[str, Any]] = Field(default_factory=dict)
    repetitions: int = Field(default=1, ge=1, le=10000)
    seed: int | None = None
    warmup: float = Field(default=0.0, ge=0, le=3600)
    cooldown: float = Field(default=0.0, ge=0, le=3600)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError(f"a name of {NAME_WORDS}, at most 64 characters")
        return v


class Experiment(BaseModel):
    """A validated experiment: lab and measurement resolved, sweep paths canonical
    (``lab.…`` or ``measure.…``), the seed fixed (from the name when the file has none)."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str = ""
    source: str | None = None  # the experiment file
    lab: dict[str, Any]
    lab_source: str  # the lab file, or the experiment file for an inline lab
    measure: dict[str, Any]  # resolved, by alias ("from"), defaults filled in
    sweep: dict[str, list[Any]]
    variants: dict[str, dict[str, Any]] = Field(default_factory=dict)  # name -> canonical path -> value
    repetitions: int = 1
    seed: int
    warmup: float = 0.0
    cooldown: float = 0.0

    def spec_hash(self) -> str:
        """Hash of everything that decides what each run is; identifies the experiment in a
        store (so an edited file is a new experiment, and the same file resumes).  The number
        of repetitions is left out: raising it adds runs (repetition indexes past those done)
        to the same experiment, which is how ``sfclab run --repetitions N`` and
        scripts/reproduce.sh add repetitions until intervals separate."""
        return stable_hash(self.model_dump(exclude={"source", "lab_source", "description",
                                                    "repetitions"}))

    def size(self) -> int:
        """Number of runs (sweep product × variants × repetitions)."""
        return self.repetitions * self.points()

    def points(self) -> int:
        """Number of run points (sweep product × variants)."""
        n = max(1, len(self.variants))
        for values in self.sweep.values():
            n *= len(values)
        return n


@dataclass(frozen=True)
class RunPoint:
    """One trial of an experiment (see the module docstring)."""

    key: str
    params: dict[str, Any]
    repetition: int
    lab: dict[str, Any]
    measure: dict[str, Any]
    lab_hash: str
    measure_hash: str

    def label(self) -> str:
        p = " ".join(f"{k}={v}" for k, v in self.params.items())
        return (p + " " if p else "") + f"rep {self.repetition}"


# --------------------------------------------------------------------------- helpers

def stable_hash(obj: Any) -> str:
    """SHA-256 (hex, 16 digits) of the canonical JSON of ``obj`` (keys as JSON writes them, so
    a mapping whose keys mix numbers and strings, as a bad file's may, sorts too)."""
    text = json.dumps(_json_keys(obj), sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _json_keys(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k if isinstance(k, str) else json.dumps(k, default=str): _json_keys(v)
                for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_keys(v) for v in obj]
    return obj


def canonical_path(path: str) -> str:
    """``chain.length`` -> ``lab.chain.length``; ``lab.…`` and ``measure.…`` stay."""
    if path.startswith("lab.") or path.startswith("measure."):
        return path
    return "lab." + path


def set_path(doc: dict[str, Any], path: str, value: Any) -> None:
    """Set ``a.b.2.c`` in nested mappings/lists, making missing mappings on the way.

    Numeric parts index lists.  Raises ValueError when a part crosses a scalar or a list
    index is out of range."""
    parts = path.split(".")
    cur: Any = doc
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        where = ".".join(parts[: i + 1])
        if isinstance(cur, list):
            if not part.isdigit() or int(part) >= len(cur):
                raise ValueError(f"'{where}': no item {part} in a list of {len(cur)}")
            if last:
                cur[int(part)] = value
            else:
                cur = cur[int(part)]
        elif isinstance(cur, dict):
            if last:
                cur[part] = value
            else:
                if cur.get(part) is None:
                    cur[part] = {}
                cur = cur[part]
        else:
            raise ValueError(f"'{where}': cannot set a key inside a {type(cur).__name__}")


def apply_path(doc: dict[str, Any], path: str, value: Any) -> None:
    """:func:`set_path`, except that ``None`` removes the key (a variant's ``null``); a key
    that is not there is nothing to remove, a list item that is not there is an error."""
    if value is not None:
        set_path(doc, path, value)
        return
    head, _, last = path.rpartition(".")
    cur: Any = doc
    parts = head.split(".") if head else []
    for i, part in enumerate(parts):
        if isinstance(cur, list):  # a list's items are counted, as set_path counts them
            if not part.isdigit() or int(part) >= len(cur):
                where = ".".join(parts[: i + 1])
                raise ValueError(f"'{where}': no item {part} in a list of {len(cur)}")
            cur = cur[int(part)]
        else:
            cur = cur.get(part) if isinstance(cur, dict) else None
        if cur is None:
            return  # nothing there to remove
    if isinstance(cur, dict):
        cur.pop(last, None)
    elif isinstance(cur, list) and last.isdigit() and int(last) < len(cur):
        raise ValueError(f"'{path}': null cannot remove an item of a list")


def _written(settings: dict[str, Any], canon: str) -> str:
    return next(k for k in settings if canonical_path(k) == canon)


def validate_measure(d: Any) -> dict[str, Any]:
    """Validate one measurement mapping (:mod:`sfclab.spec.measurement`) and return it resolved
    (defaults filled in), as a mapping by the file's names.  Raises
    :class:`~sfclab.spec.measurement.RequestInvalid` with the place inside the measurement."""
    return measurement.to_file_form(measurement.validate(d))


_MeasureInvalid = measurement.RequestInvalid


# --------------------------------------------------------------------------- loading

def load_experiment(path: str | os.PathLike[str]) -> Experiment:
    """Read and validate an experiment file (and its lab file, when ``lab`` is a path)."""
    path = os.fspath(path)
    doc = Document.from_file(path)
    return experiment_from_document(doc)


def load_experiment_text(text: str, source: str = "<experiment>") -> Experiment:
    return experiment_from_document(Document(text, source))


def experiment_from_document(doc: Document) -> Experiment:
    data = doc.data
    if not isinstance(data, dict):
        raise doc.error("expected a mapping with 'name', 'lab', 'measure'", ())
    try:
        f = ExperimentFile.model_validate(data)
    except ValidationError as e:
        loc, msg = pydantic_error(e)
        # pydantic reports union members ('lab', 'dict[str,any]'): keep the document path only
        loc = tuple(p for p in loc if not (isinstance(p, str) and ("[" in p or p in ("str",))))
        raise doc.error(msg, loc) from None
    lab, lab_source = _lab_of(doc, f)
    try:
        measure = validate_measure(f.measure)
    except _MeasureInvalid as e:
        raise doc.error(e.message, ("measure",) + e.loc) from None
    _check_size(doc, f)
    sweep, written = _sweep(doc, f, lab)
    variants = {vname: _variant(doc, f, lab, vname, settings, sweep, written)
                for vname, settings in f.variants.items()}
    seed = f.seed
    if seed is None:
        seed = int(hashlib.sha256(f.name.encode()).hexdigest()[:8], 16)
    return Experiment(name=f.name, description=f.description, source=doc.source, lab=lab,
                      lab_source=lab_source, measure=measure, sweep=sweep, variants=variants,
                      repetitions=f.repetitions, seed=seed, warmup=f.warmup, cooldown=f.cooldown)


def _lab_of(doc: Document, f: ExperimentFile) -> tuple[Any, str]:
    """The lab: inline mapping, or a file relative to the experiment file; and its source."""
    if not isinstance(f.lab, str):
        return f.lab, doc.source
    base = os.path.dirname(os.path.abspath(doc.source)) if doc.source else os.getcwd()
    lab_path = f.lab if os.path.isabs(f.lab) else os.path.normpath(os.path.join(base, f.lab))
    if not os.path.isfile(lab_path):
        raise doc.error(f"no lab file '{f.lab}' (looked for {lab_path})", ("lab",))
    lab_doc = Document.from_file(lab_path)
    if not isinstance(lab_doc.data, dict):
        raise lab_doc.error("expected a mapping with 'name', 'nodes' and 'links'", ())
    return lab_doc.data, lab_path


def _sweep(doc: Document, f: ExperimentFile, lab: Any
           ) -> tuple[dict[str, list[Any]], dict[str, str]]:
    """The swept paths (canonical) with their values, and how each path was written."""
    sweep: dict[str, list[Any]] = {}
    written: dict[str, str] = {}
    for key, values in f.sweep.items():
        if not PATH_RE.match(key):
            raise doc.error("expected a dotted path such as 'chain.length' or 'measure.flows'",
                            ("sweep", key))
        if not values:
            raise doc.error("expected at least one value", ("sweep", key))
        canon = canonical_path(key)
        if canon in ("lab", "measure") or canon.endswith("."):
            raise doc.error("expected a path below 'lab' or 'measure'", ("sweep", key))
        if canon in sweep:
            raise doc.error(f"swept twice (also as '{written[canon]}')", ("sweep", key))
        if len({json.dumps(v, sort_keys=True, default=str) for v in values}) != len(values):
            raise doc.error("a value appears twice", ("sweep", key))
        for i, v in enumerate(values):
            _check_sweep_value(doc, canon, key, i, v, lab, f.measure)
        sweep[canon] = list(values)
        written[canon] = key
    return sweep, written


def _variant(doc: Document, f: ExperimentFile, lab: Any, vname: str, settings: dict[str, Any],
             sweep: dict[str, list[Any]], written: dict[str, str]) -> dict[str, Any]:
    """Variant ``vname``'s settings by canonical path, each applied to a copy of the lab or
    the measurement to show it lands, and the measurement it leaves validated."""
    if not NAME_RE.match(vname):
        raise doc.error(f"expected a variant name of {NAME_WORDS}", ("variants", vname))
    if not settings:
        raise doc.error("expected at least one 'path: value'", ("variants", vname))
    canon_settings: dict[str, Any] = {}
    for key, value in settings.items():
        place = ("variants", vname, key)
        if not PATH_RE.match(key):
            raise doc.error("expected a dotted path such as 'links.0.attach'", place)
        canon = canonical_path(key)
        if canon in sweep:
            raise doc.error(f"also swept (as '{written[canon]}'): set it in one place", place)
        if canon in canon_settings:
            raise doc.error("set twice in this variant", place)
        canon_settings[canon] = value
    lab_v, measure_v = copy.deepcopy(lab), copy.deepcopy(f.measure)
    for canon, value in canon_settings.items():
        area, rest = canon.split(".", 1)
        try:
            apply_path(lab_v if area == "lab" else measure_v, rest, copy.deepcopy(value))
        except ValueError as e:
            raise doc.error(str(e), ("variants", vname, _written(settings, canon))) from None
    try:
        validate_measure(measure_v)
    except _MeasureInvalid as e:
        raise doc.error(f"then measure.{format_place(e.loc)}: {e.message}",
                        ("variants", vname)) from None
    return canon_settings


def _check_size(doc: Document, f: ExperimentFile) -> None:
    """The run points (the product of the sweep's value counts, times the variants) and the
    runs (times the repetitions), counted before a single point is made."""
    points = max(1, len(f.variants))
    for key, values in f.sweep.items():
        points *= max(1, len(values))
        if points > MAX_SWEEP_POINTS:
            raise doc.error(f"the sweep makes {points:,} run points up to here (the product of "
                            f"its value counts, times the variants); at most "
                            f"{MAX_SWEEP_POINTS:,}", ("sweep", key))
    if points * f.repetitions > MAX_RUNS:
        raise doc.error(f"{points:,} run points times {f.repetitions:,} repetitions make "
                        f"{points * f.repetitions:,} runs; at most {MAX_RUNS:,}",
                        ("repetitions",))


def _check_sweep_value(doc: Document, canon: str, key: str, i: int, value: Any,
                       lab: dict[str, Any], measure: dict[str, Any]) -> None:
    """Each swept value must land somewhere sensible: the lab path must be settable, and the
    measurement must stay valid with the value in place (checked one value at a time)."""
    loc = ("sweep", key, i)
    area, rest = canon.split(".", 1)
    if area == "lab":
        try:
            set_path(copy.deepcopy(lab), rest, value)
        except ValueError as e:
            raise doc.error(str(e), loc) from None
        return
    m = copy.deepcopy(measure)
    try:
        set_path(m, rest, value)
    except ValueError as e:
        raise doc.error(str(e), loc) from None
    try:
        validate_measure(m)
    except _MeasureInvalid as e:
        inner = format_place(e.loc)
        msg = e.message if inner in ("", rest) else f"then measure.{inner}: {e.message}"
        raise doc.error(msg, loc) from None


# --------------------------------------------------------------------------- expansion

def expand(exp: Experiment, validate_lab: LabValidator | None = None) -> list[RunPoint]:
    """All run points, in sweep order (cartesian product, last path fastest, repetitions
    innermost).  With ``validate_lab``, each distinct lab variant is validated first."""
    paths = list(exp.sweep)
    combos = list(itertools.product(*(exp.sweep[p] for p in paths))) if paths else [()]
    variants: list[str | None] = list(exp.variants) or [None]
    checked: dict[str, None] = {}
    points: list[RunPoint] = []
    for variant, combo in itertools.product(variants, combos):
        params: dict[str, Any] = {} if variant is None else {"variant": variant}
        lab = copy.deepcopy(exp.lab)
        measure_raw = copy.deepcopy(exp.measure)
        for p, v in (exp.variants[variant] if variant is not None else {}).items():
            area, rest = p.split(".", 1)
            apply_path(lab if area == "lab" else measure_raw, rest, copy.deepcopy(v))
        params.update(zip(paths, combo))
        for p, v in zip(paths, combo):
            area, rest = p.split(".", 1)
            set_path(lab if area == "lab" else measure_raw, rest, copy.deepcopy(v))
        try:
            measure = validate_measure(measure_raw)
        except _MeasureInvalid as e:  # a combination of individually valid values
            raise SpecError(e.message, file=exp.source,
                            place=format_place(("measure",) + e.loc) + f" (with {_show(params)})")
        lab_hash = stable_hash(lab)
        if validate_lab is not None and lab_hash not in checked:
            try:
                validate_lab(copy.deepcopy(lab), exp.lab_source)
            except SpecError as e:
                if exp.lab_source == exp.source and exp.source:
                    _place_in_experiment(e, exp.source)  # an inline lab: under 'lab'
                if not params:
                    raise
                raise SpecError(f"{e.message} (lab variant {_show(params)})",
                                file=e.file or exp.lab_source, place=e.place, line=e.line,
                                column=e.column) from None
            checked[lab_hash] = None
        measure_hash = stable_hash(measure)
        for rep in range(exp.repetitions):
            key = stable_hash({"params": params, "repetition": rep,
                               "lab": lab_hash, "measure": measure_hash})
            points.append(RunPoint(key=key, params=params, repetition=rep, lab=lab,
                                   measure=measure, lab_hash=lab_hash, measure_hash=measure_hash))
    return points


def _place_in_experiment(e: SpecError, source: str) -> None:
    """An error of an inline lab, placed in the experiment file: ``lab.`` before its place and
    the line where that place is written."""
    loc: tuple[Any, ...] = ("lab",) + parse_place(e.place or "")
    e.place = format_place(loc)
    e.file = source
    e.column = None
    try:
        e.line = Document.from_file(source).line_of(loc)
    except SpecError:
        e.line = None


def trial_order(points: list[RunPoint], seed: int) -> list[RunPoint]:
    """The points shuffled with ``random.Random(seed)``: the same seed gives the same order."""
    out = list(points)
    random.Random(seed).shuffle(out)
    return out


def _show(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())
