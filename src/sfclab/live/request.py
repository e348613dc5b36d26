"""One typed request per chain operation, shared by the command line and the HTTP API.

``AddChain`` carries a validated chain file (:mod:`sfclab.spec.chainfile`) whose functions'
keys have been checked against their kinds; ``RemoveChain`` and ``MigrateInstance`` name their
objects.  :func:`read_chain_file` and :func:`chain_from_dict` are the two ways in (a file, or a
mapping an API received); both raise a located :class:`~sfclab.errors.SpecError` (exit 2).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from .. import functions
from ..errors import SfclabError, SpecError
from ..functions.cgroups import LimitParams
from ..functions.params import parse_size
from ..plan.chainadd import Instance
from ..plan.containers import container_plan
from ..plan.encap import encap_problem
from ..plan.model import ContainerPlan
from ..plan.chainpaths import Topology
from ..realize import lifecycle
from ..realize.runtime import kind_for
from ..realize.state import LabState
from ..spec.chainfile import ChainFile, parse
from ..spec.hosts import HOST_NAME_MAX
from ..spec.image import ImageSpec, machine_check
from ..spec.names import NAME_RE, NAME_WORDS
from ..spec.source import Document, format_place, parse_place
from ..spec.wording import pydantic_error


@dataclass(frozen=True)
class Function:
    """A chain file's function with its kind's keys validated (JSON form, as the plan keeps)."""

    name: str
    kind: str
    params: dict[str, Any]
    instances: int
    weights: list[int]
    cpu: float
    memory: int
    #: its instances' container, planned for no node yet (each instance gets its own)
    container: ContainerPlan | None = None


@dataclass(frozen=True)
class AddChain:
    lab: str
    chain: ChainFile
    functions: list[Function]
    source: str = "<request>"
    wait_s: float = 60.0
    #: the parsed file, for the line of an error found later (a function's machine checks)
    doc: Document | None = field(default=None, compare=False, repr=False)

    def error(self, message: str, function: str, place: str | None) -> SpecError:
        """An error of ``function``'s keys (``place`` inside them), located in the file."""
        k = [f.name for f in self.chain.functions].index(function)
        return self.error_at(message, ("functions", k, *parse_place(place or "")))

    def error_at(self, message: str, loc: tuple[str | int, ...]) -> SpecError:
        """An error at place ``loc`` of the file, located (its line) when it was parsed."""
        if self.doc is not None:
            return self.doc.error(message, loc)
        return SpecError(message, file=self.source, place=format_place(loc))

    def instances(self) -> list[Instance]:
        """Every instance to make, named ``<function>-<k>`` (k from 1)."""
        return [Instance(f"{f.name}-{k + 1}", f.name, f.kind, f.params, f.cpu, f.memory,
                         container=f.container)
                for f in self.functions for k in range(f.instances)]


@dataclass(frozen=True)
class RemoveChain:
    lab: str
    chain: str
    wait_s: float = 60.0


@dataclass(frozen=True)
class MigrateInstance:
    """Move ``instance`` (a function node of an added chain) make-before-break; ``to`` names
    the target host (None: the same host; see :func:`sfclab.live.hosts.capacity.hosts_of`)."""

    lab: str
    instance: str
    to: str | None = None
    wait_s: float = 60.0
    drain_s: float = 0.2
    conntrack: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """``to`` is a host's name or None: an empty or malformed name is refused here, for
        every entry point, rather than read as "the same host"."""
        if self.to is not None and (not isinstance(self.to, str) or not NAME_RE.match(self.to)
                                    or len(self.to) > HOST_NAME_MAX):
            raise SpecError(f"expected a host name of {NAME_WORDS}, at most {HOST_NAME_MAX} "
                            f"characters, got {self.to!r}", place="--to")


def _function(doc: Document, i: int, chain: ChainFile, attach_hint: str | None,
              here: bool = True) -> Function:
    f = chain.functions[i]
    place: tuple[Any, ...] = ("functions", i)
    if f.kind not in functions.KINDS:
        raise doc.error(f"expected a function kind ({', '.join(functions.kinds())}), got "
                        f"{f.kind!r}", place + ("kind",))
    cls = functions.get(f.kind)
    if cls.sfc_program:  # its program is attached where the lab's data plane is loaded, at up
        raise doc.error(f"a {f.kind} function reads the label stack with its own XDP program, "
                        "which only a lab file's chain attaches (at up): expected it in the "
                        "lab file's chains, or a kernel kind here", place + ("kind",))
    try:
        memory = parse_size(f.memory)
    except ValueError as e:
        raise doc.error(f"expected {e}, got {f.memory!r}", place + ("memory",)) from None
    raw = dict(f.params)
    if "outside" in cls.Params.model_fields and "outside" not in raw and attach_hint:
        raw["outside"] = attach_hint  # one arm: the outside is the attach node
    if issubclass(cls.Params, LimitParams):  # kinds that run a process: limits as given
        if "cpu" in f.model_fields_set:
            raw.setdefault("cpu", f.cpu)
        if "memory" in f.model_fields_set:
            raw.setdefault("memory", memory)
    try:
        params = cls.Params.model_validate(raw)
    except ValidationError as e:
        loc, msg = pydantic_error(e)
        raise doc.error(msg, place + loc) from None
    return Function(f.name, f.kind, params.model_dump(mode="json", by_alias=True,
                                                      exclude_unset=True),
                    f.instances, f.weights(), f.cpu, memory,
                    _container(doc, place, f.image, cls, params, here))


def _container(doc: Document, place: tuple[Any, ...], image: ImageSpec | None,
               cls: type[functions.NetworkFunction], params: Any,
               here: bool = True) -> ContainerPlan | None:
    """The container a function's instances run in (``image``), checked against this machine
    as a lab file's node's is when ``here`` (a lab whose hosts are this machine's; else each
    instance's host checks it once placed: :func:`sfclab.live.ops.add.add_chain`); a kind that
    runs its image (``container``) must have one."""
    if image is None:
        if cls.runs_image:
            raise doc.error(f"a {cls.kind} function runs its image: expected an 'image' key "
                            "(an image in this machine's store, e.g. one 'sfclab image build' "
                            "made)", place)
        return None
    try:
        if here:
            machine_check(image)
    except SpecError as e:
        raise doc.error(e.message, place + ("image", *parse_place(e.place or ""))) from None
    c = container_plan("", "", "", image)
    if cls.runs_image:
        try:
            cls.plan_container(params, c)
        except SpecError as e:
            raise doc.error(e.message, place + parse_place(e.place or "")) from None
    return c


def check_chain_file(path: str) -> ChainFile:
    """The chain file at ``path`` checked as ``chain add`` checks it, without a running lab:
    every function's kind, parameters and image (an ``outside`` left to the attach node is not
    filled in).  A located :class:`~sfclab.errors.SpecError` for the first fault."""
    doc = Document.from_file(path)
    chain = parse(doc)
    _check_encap(doc, chain)
    for i in range(len(chain.functions)):
        _function(doc, i, chain, chain.attach)
    return chain


def default_attach(lab: str, chain: ChainFile) -> str | None:
    """The node ``chain``'s functions hang off in running lab ``lab`` (see
    :mod:`sfclab.plan.chainadd`): its own ``attach``, else the router nearest the ingress."""
    if chain.attach:
        return chain.attach
    try:
        _, plan = lifecycle.load_plan(lab)
    except Exception:  # no such lab: add says so, with the lab's name
        return None
    return Topology(plan).nearest_forwarder(chain.classifiers[0].ingress)


def images_here(lab: str) -> bool:
    """Whether running lab ``lab``'s hosts are this machine (its instances' images are then
    checked here as the file is read); not for a lab on hosts reached over SSH.  A name that
    is no lab's is left for ``chain add`` to refuse, after the file's own errors."""
    try:
        return kind_for(LabState(lab)) == "local"
    except SfclabError:
        return True


def _check_encap(doc: Document, chain: ChainFile) -> None:
    """The chain's ``encap`` is one that is built (:func:`sfclab.plan.encap.encap_problem`;
    a chain file has no padding and no SFC-aware eBPF function)."""
    problem = encap_problem(chain.encap, 0, [])
    if problem:
        raise doc.error(problem[0], problem[1])


def from_document(lab: str, doc: Document, wait_s: float = 60.0) -> AddChain:
    chain = parse(doc)
    _check_encap(doc, chain)
    attach = default_attach(lab, chain)
    here = images_here(lab)
    fns = [_function(doc, i, chain, attach, here) for i in range(len(chain.functions))]
    return AddChain(lab, chain, fns, doc.source, wait_s, doc)


def read_chain_file(lab: str, path: str, wait_s: float = 60.0) -> AddChain:
    """The chain file at ``path`` (YAML or JSON) as a request for running lab ``lab``."""
    return from_document(lab, Document.from_file(path), wait_s)


def chain_from_dict(lab: str, data: dict[str, Any], source: str = "<request>") -> AddChain:
    """A chain given as a mapping (an API's JSON body) as a request."""
    if not isinstance(data, dict):
        raise SpecError("expected a mapping (a chain file)", file=source)
    return from_document(lab, Document(json.dumps(data), source))
