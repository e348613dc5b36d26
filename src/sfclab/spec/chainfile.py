"""A chain file: one service function chain handed to a running lab (``sfclab chain add``).

Model (YAML or JSON; the P4-SFC orchestrator's customer description in a lab's words)::

    name: video                       # the chain's name (the name rule of nodes)
    attach: r1                        # optional: the lab's forwarding node the functions hang
                                      # off (default: the forwarding node nearest the ingress)
    classifiers:                      # as in the lab file's ``chains:`` section
      - {ingress: src, proto: udp, dport: 5000-5010}
    egress: dst
    symmetric: false
    ttl: 64
    encap: mpls                       # mpls (default), nsh or srv6 (docs/sfc.md)
    functions:                        # in the order visited; each defined here, inline
      - name: fw                      # instances are named fw-1, fw-2 ... in the lab
        kind: firewall                # any function kind, with its lab-file keys beside it
        rules: [{action: drop, proto: tcp, dport: 23}]
        instances: 2                  # a group of 2, flows spread by weight (default 1)
        weight: [1, 3]                # one weight for all, or one per instance
        cpu: 0.5                      # cores (fractions allowed; default 0.1) and memory
        memory: 64M                   # (default 16M): placement needs; given, also cgroup
                                      # limits of kinds that run a process (tun, dpi)
      - {name: meter, kind: tun, exec: /usr/local/bin/meter, cpu: 0.25, memory: 32M}
      - name: lb                      # any function may run in a container, each instance
        kind: container               # its own: ``image`` as a lab file's node takes it
        reach: routed                 # (:mod:`sfclab.spec.image`); a container function
        image:                        # needs one
          name: localhost/sfclab/haproxy:latest
          env: {HAPROXY_BIND: "0.0.0.0:80", HAPROXY_SERVERS: "198.18.0.2:80"}

Only the structure is checked here; each function's own keys are checked against its kind by
:mod:`sfclab.live.request` (the place named is still this file's).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from .image import ImageSpec
from .names import NAME_WORDS, node_name_ok
from .limits import MAX_FUNCTIONS, MAX_GROUP_INSTANCES, MAX_HOST_CPUS
from .sfc import (ClassifierSpec, Encap, EntryCounter, encap_ttl_check, encap_ttl_default,
                  growth_problem)
from .source import Document
from .strict import Strict
from .text import refuse_nul
from .wording import pydantic_error

#: keys of a function entry that are the chain file's own; every other key is the kind's
ENTRY_KEYS = ("name", "kind", "instances", "weight", "cpu", "memory", "image")


class FunctionEntry(Strict):
    name: str
    kind: str
    instances: int = Field(default=1, ge=1, le=MAX_GROUP_INSTANCES)
    weight: int | list[int] = 1
    cpu: float = Field(default=0.1, gt=0, le=MAX_HOST_CPUS)
    memory: int | str = "16M"
    image: ImageSpec | None = None  # its instances run in containers from this image
    params: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not node_name_ok(v) or len(v) > 40:
            raise ValueError(f"a function name of {NAME_WORDS}, at most 40 characters")
        return v

    def weights(self) -> list[int]:
        w = self.weight if isinstance(self.weight, list) else [self.weight] * self.instances
        return list(w)


class ChainFile(Strict):
    name: str
    attach: str | None = None
    classifiers: list[ClassifierSpec] = Field(min_length=1)
    egress: str
    symmetric: bool = False
    encap: Encap = "mpls"  # before ttl: its check reads it
    ttl: int = Field(default=64, ge=1, le=255)
    functions: list[FunctionEntry] = Field(min_length=1, max_length=MAX_FUNCTIONS)

    _ttl_default = model_validator(mode="before")(encap_ttl_default)

    @field_validator("ttl")
    @classmethod
    def _ttl_fits(cls, v: int, info: ValidationInfo) -> int:
        return encap_ttl_check(v, info.data.get("encap"))

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not node_name_ok(v):
            raise ValueError(f"a chain name of {NAME_WORDS}")
        return v


def parse(doc: Document) -> ChainFile:
    """The chain file in ``doc``, its structure validated (located :class:`SpecError`)."""
    data = doc.data
    if not isinstance(data, dict):
        raise doc.error("expected a mapping (a chain file: name, classifiers, functions, "
                        "egress)", ())
    refuse_nul(doc, data)
    raw = dict(data)
    fns = raw.get("functions")
    if isinstance(fns, list):
        entries = []
        for i, f in enumerate(fns):
            if not isinstance(f, dict):
                raise doc.error("expected a mapping (name, kind and the kind's keys)",
                                ("functions", i))
            if "params" in f:
                raise doc.error("a function's keys go beside 'kind', not under 'params'",
                                ("functions", i, "params"))
            entries.append({k: v for k, v in f.items() if k in ENTRY_KEYS} |
                           {"params": {k: v for k, v in f.items() if k not in ENTRY_KEYS}})
        raw["functions"] = entries
    try:
        chain = ChainFile.model_validate(raw)
    except ValidationError as e:
        loc, msg = pydantic_error(e)
        if len(loc) > 2 and loc[0] == "functions" and loc[2] == "params":
            loc = loc[:2] + loc[3:]
        raise doc.error(msg, loc) from None
    for i, c in enumerate(chain.classifiers):
        if c.ingress == chain.egress:
            raise doc.error(f"'{c.ingress}' is the chain's egress too; a chain leads from its "
                            "ingress to another node", ("classifiers", i, "ingress"))
    names = [f.name for f in chain.functions]
    for i, f in enumerate(chain.functions):
        if names.index(f.name) != i:
            raise doc.error(f"expected each function name once, got {f.name!r} again",
                            ("functions", i, "name"))
        if isinstance(f.weight, list) and len(f.weight) != f.instances:
            raise doc.error(f"expected {f.instances} weights, one per instance",
                            ("functions", i, "weight"))
        if any(w < 1 or w > 1000 for w in f.weights()):
            raise doc.error("expected weights from 1 to 1000", ("functions", i, "weight"))
    problem = growth_problem([f.instances for f in chain.functions])
    if problem:
        raise doc.error(problem, ("functions",))
    counter = EntryCounter()
    for i, c in enumerate(chain.classifiers):
        problem = counter.add(c, chain.symmetric)
        if problem:
            raise doc.error(problem, ("classifiers", i))
    return chain
