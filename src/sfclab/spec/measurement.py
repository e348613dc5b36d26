"""The measurement request: one typed model per kind, for the command line and experiment files.

``sfclab traffic iperf|rate|ndr|latency`` builds these models from its options, and an
experiment file's ``measure:`` section validates into the same ones, so both have one grammar
and one set of defaults (documented in ``docs/measure.md``)::

    type: ndr                     # iperf | rate | ndr | latency
    from: src                     # the sending node (default src) ...
    to: dst                       # ... and the receiving one (default dst)
    pairs: [src:dst, src2:dst2]   # rate/ndr: several sender -> receiver pairs at once
    duration: 2                   # seconds per trial (iperf: of the whole run)
    ip: 4                         # rate/ndr/latency: 4 or 6, the family of the endpoints' addresses
    size: 64                      # frame bytes, 64 .. path MTU + 18, or imix (ip 6: 84 .. , no imix)
    engine: auto                  # auto | packet | ring | udp | xdp (the sender)
    sink: kernel                  # kernel | xdp | tc | socket (the receiver)
    flows: 1                      # UDP flows (distinct source ports); iperf: parallel pairs
    threads: 1                    # sending threads
    rates: [100k, 200k, max]      # rate: offered packet rates; 'max' is what the sender reaches
    method: mlr                   # ndr: mlr (MLRsearch, RFC 9971) | binary
    ndr_loss: 0                   # ndr: loss goals in percent
    pdr_loss: 0.5
    precision: 1                  # ndr: stop when the interval is this many percent wide
    max_rate: 2M                  # ndr: top of the search (default: what the sender reaches)
    rate: 50k                     # latency: the offered rate

Rates are packets per second: a number, or a number with ``k``, ``M`` or ``G`` (and an optional
``pps``), or ``max`` where a maximum makes sense.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

from pydantic import (BeforeValidator, Field, ValidationError, ValidationInfo, field_validator,
                      model_validator)

from ..errors import SpecError
from .generator import ENGINES, SINKS  # noqa: F401 - one copy (light, for the help)
from .strict import Strict
from .text import nul_place
from .wording import pydantic_error

#: NDR/PDR search methods
METHODS = ("mlr", "binary")
MEASURE_TYPES = ("iperf", "rate", "ndr", "latency")
MAX = "max"

_SUFFIX = {"": 1.0, "k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6, "g": 1e9, "G": 1e9}
_RATE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMgG]?)\s*(pps)?\s*$")
#: the highest packet rate anyone may ask for (100 Mpps: far above what a host sends)
MAX_PPS = 1e8


def parse_rate(v: Any, *, allow_max: bool = False) -> float | str:
    """``250000``, ``"250k"``, ``"1.5M"``, ``"100kpps"`` -> packets per second; ``"max"`` stays
    when ``allow_max``.  Raises ``ValueError(what was expected)``."""
    what = "a packet rate such as 100000, '250k' or '1.5M'" + (" or 'max'" if allow_max else "")
    if isinstance(v, str) and v.strip().lower() == MAX and allow_max:
        return MAX
    if isinstance(v, bool):
        raise ValueError(what)
    if isinstance(v, (int, float)):
        r = float(v)
    elif isinstance(v, str):
        m = _RATE_RE.match(v)
        if not m:
            raise ValueError(what)
        r = float(m.group(1)) * _SUFFIX[m.group(2)]
    else:
        raise ValueError(what)
    if not (math.isfinite(r) and 0 < r <= MAX_PPS):
        raise ValueError(f"a packet rate above 0 and at most {MAX_PPS:.0e} pps")
    return r


def _rate(v: Any) -> Any:
    return parse_rate(v)


def _rate_or_max(v: Any) -> Any:
    return parse_rate(v, allow_max=True)


def _size(v: Any) -> Any:
    if isinstance(v, str) and v.strip().lower() == "imix":
        return "imix"
    if isinstance(v, str) and v.strip().isdigit():
        return int(v)
    return v


def _family(v: Any) -> Any:
    if isinstance(v, str) and v.strip() in ("4", "6"):
        return int(v.strip())
    return v


def _percent(v: Any) -> Any:
    if isinstance(v, str) and v.strip().endswith("%"):
        v = v.strip()[:-1]
    try:
        return float(v) if isinstance(v, str) else v
    except ValueError:
        raise ValueError("a percentage such as 0.5 or '0.5%'") from None


Rate = Annotated[float, BeforeValidator(_rate)]
RateOrMax = Annotated[float | Literal["max"], BeforeValidator(_rate_or_max)]
FrameSize = Annotated[int | Literal["imix"], BeforeValidator(_size)]
Family = Annotated[Literal[4, 6], BeforeValidator(_family)]
#: the smallest frame that carries sfcgen's probe: Ethernet 14 + IP + UDP 8 + probe 18 + FCS 4
MIN_FRAME_OF = {4: 64, 6: 84}
Percent = Annotated[float, BeforeValidator(_percent)]


class Pair(Strict):
    """One sender -> receiver pair, written ``FROM:TO`` or ``{from: A, to: B}``."""

    from_: str = Field(alias="from")
    to: str

    @model_validator(mode="before")
    @classmethod
    def _text(cls, v: Any) -> Any:
        if isinstance(v, str):
            a, sep, b = v.partition(":")
            if not sep or not a or not b:
                raise ValueError("a pair of nodes written FROM:TO")
            return {"from": a.strip(), "to": b.strip()}
        return v

    def __str__(self) -> str:
        return f"{self.from_}:{self.to}"


def _distinct_pairs(v: list[Pair]) -> list[Pair]:
    seen = set()
    for p in v:
        if p.from_ == p.to:
            raise ValueError(f"pairs of two different nodes, not {p}")
        if (p.from_, p.to) in seen:
            raise ValueError(f"each pair once, not {p} twice")
        seen.add((p.from_, p.to))
    return v


class Request(Strict):
    """Options every measurement has."""

    type: str
    from_: str = Field(default="src", alias="from")
    to: str = "dst"
    duration: float = Field(default=2.0, gt=0, le=3600)

    def pairs_or_one(self) -> list[Pair]:
        return [Pair.model_validate({"from": self.from_, "to": self.to})]


class IperfRequest(Request):
    """iperf3 throughput with ``flows`` parallel server/client pairs (TCP unless ``udp``)."""

    type: Literal["iperf"] = "iperf"
    duration: float = Field(default=10.0, gt=0, le=3600)
    flows: int = Field(default=1, ge=1, le=128)
    udp: bool = False
    length: int | None = Field(default=None, ge=16, le=65507)  # bytes per write / datagram
    bitrate: str | None = None  # iperf3 -b, per flow; 0: unlimited; None: iperf3's (1M for UDP)
    zerocopy: bool = False
    omit: float = Field(default=0, ge=0, le=60)  # seconds discarded at the start
    affinity: Literal["auto", "none"] = "auto"
    #: the address family to measure over: 4 or 6; None (the default): the lab's, IPv4 unless
    #: the lab is IPv6-only (``ip: 6``)
    ip: Literal[4, 6] | None = None
    # several sender -> receiver pairs at once (e.g. one per tenant), ``flows`` flows each;
    # each pair's throughput is the metric pair.<from>:<to>.throughput_bps
    pairs: list[Pair] = Field(default_factory=list, max_length=16)

    @field_validator("pairs")
    @classmethod
    def _pairs(cls, v: list[Pair]) -> list[Pair]:
        return _distinct_pairs(v)

    @field_validator("ip", mode="before")
    @classmethod
    def _ip(cls, v: Any) -> Any:
        if isinstance(v, str) and v.strip() in ("4", "6"):
            return int(v)
        if v is not None and (isinstance(v, bool) or v not in (4, 6)):
            raise ValueError(f"4 or 6 (the address family to measure over), not {v!r}")
        return v

    def pairs_or_one(self) -> list[Pair]:
        return list(self.pairs) or super().pairs_or_one()

    @field_validator("bitrate", mode="before")
    @classmethod
    def _bitrate(cls, v: Any) -> Any:
        if v is None:
            return v
        text = str(v).strip()
        if not re.fullmatch(r"[0-9]*\.?[0-9]+[KMGkmg]?", text):
            raise ValueError("a bit rate such as 500M or 1.5G (iperf3's units; 0: unlimited)")
        return text


class PacketRequest(Request):
    """Options of the native generator (see ``sfclab.traffic.native``).  ``ip`` picks the
    endpoints' addresses of that family; an IPv6 frame has 20 bytes more of IP header, so its
    smallest size is 84 (the default with ``ip: 6``) and IMIX, with its 64-byte frames, is
    refused."""

    ip: Family = 4
    size: FrameSize = 64
    flows: int = Field(default=1, ge=1, le=50000)
    threads: int = Field(default=1, ge=1, le=64)
    engine: Literal["auto", "packet", "ring", "udp", "xdp"] = "auto"
    sink: Literal["kernel", "xdp", "tc", "socket"] = "kernel"
    pairs: list[Pair] = Field(default_factory=list, max_length=16)

    @field_validator("size")
    @classmethod
    def _frame(cls, v: int | str) -> int | str:
        if isinstance(v, int) and not 64 <= v <= 9018:
            raise ValueError("a frame size from 64 to 9018 bytes, or imix")
        return v

    @field_validator("pairs")
    @classmethod
    def _pairs(cls, v: list[Pair]) -> list[Pair]:
        return _distinct_pairs(v)

    @model_validator(mode="before")
    @classmethod
    def _family_size(cls, d: Any) -> Any:
        """Without a size, the smallest frame of the family."""
        if isinstance(d, dict) and "size" not in d and _family(d.get("ip")) == 6:
            return {**d, "size": MIN_FRAME_OF[6]}
        return d

    @field_validator("size")
    @classmethod
    def _size_of_family(cls, v: int | str, info: ValidationInfo) -> int | str:
        if info.data.get("ip") != 6:
            return v
        if v == "imix":
            raise ValueError("a fixed frame size with ip 6: IMIX has 64-byte frames, and an "
                             f"IPv6 frame with the probe is at least {MIN_FRAME_OF[6]} bytes")
        if isinstance(v, int) and v < MIN_FRAME_OF[6]:
            raise ValueError(f"a frame size from {MIN_FRAME_OF[6]} bytes with ip 6 (Ethernet 14, "
                             "IPv6 40, UDP 8, probe 18, FCS 4)")
        return v

    def pairs_or_one(self) -> list[Pair]:
        return list(self.pairs) or super().pairs_or_one()


class RateRequest(PacketRequest):
    """Offered-vs-received curve: one trial per offered packet rate in ``rates``."""

    type: Literal["rate"] = "rate"
    rates: list[RateOrMax] = Field(min_length=1, max_length=1000)


class NdrRequest(PacketRequest):
    """NDR/PDR search: the highest rate whose loss stays within each goal (in %)."""

    type: Literal["ndr"] = "ndr"
    method: Literal["mlr", "binary"] = "mlr"
    ndr_loss: Percent = Field(default=0.0, ge=0, le=100)
    pdr_loss: Percent = Field(default=0.5, ge=0, le=100)
    precision: Percent = Field(default=1.0, gt=0, le=50)
    max_rate: Rate | None = None
    #: after the search, latency at 10, 50 and 90 % of the NDR (CSIT's practice)
    latency: bool = False

    @model_validator(mode="after")
    def _goals(self) -> NdrRequest:
        if self.pdr_loss < self.ndr_loss:
            raise ValueError("a PDR loss goal at least the NDR goal")
        return self


class LatencyRequest(PacketRequest):
    """Latency percentiles at a constant offered ``rate`` (pps)."""

    type: Literal["latency"] = "latency"
    rate: Rate = 1000.0


MODELS: dict[str, type[Request]] = {"iperf": IperfRequest, "rate": RateRequest,
                                    "ndr": NdrRequest, "latency": LatencyRequest}
AnyRequest = IperfRequest | RateRequest | NdrRequest | LatencyRequest


class RequestInvalid(Exception):
    """A request that is not valid: the message and its place inside the request."""

    def __init__(self, message: str, loc: tuple[Any, ...]):
        super().__init__(message)
        self.message = message
        self.loc = loc


def validate(d: Any) -> AnyRequest:
    """A request from a mapping (an experiment file's ``measure:`` or the command line's
    options); raises :class:`RequestInvalid` with the place inside the request."""
    if not isinstance(d, dict):
        raise RequestInvalid("expected a mapping with 'type'", ())
    nul = nul_place(d)
    if nul is not None:
        raise RequestInvalid("expected text without a NUL character (\\0)", nul)
    kind = d.get("type")
    if not isinstance(kind, str) or kind not in MODELS:  # a list or mapping cannot be looked up
        got = repr(kind) if kind is None or isinstance(kind, str) else f"a {type(kind).__name__}"
        raise RequestInvalid(f"expected one of {', '.join(MEASURE_TYPES)}, got {got}",
                             ("type",))
    try:
        return MODELS[kind].model_validate(d)  # type: ignore[return-value]
    except ValidationError as e:
        loc, msg = pydantic_error(e)
        raise RequestInvalid(msg, loc) from None


#: command-line option -> request key, where they differ
OPTION_NAMES = {"from_": "--from", "to": "--to", "ndr_loss": "--loss", "pdr_loss": "--loss",
                "pairs": "--pair", "max_rate": "--max-rate"}


def from_options(d: dict[str, Any]) -> AnyRequest:
    """A request from command-line values; errors name the option (``--rates: expected ...``)."""
    try:
        return validate({k: v for k, v in d.items() if v is not None})
    except RequestInvalid as e:
        if not e.loc:
            raise SpecError(e.message) from None
        key = str(e.loc[0])
        option = OPTION_NAMES.get(key, "--" + key.replace("_", "-"))
        raise SpecError(e.message, place=option) from None


def to_file_form(r: Request) -> dict[str, Any]:
    """The request as an experiment file writes it (every default filled in)."""
    return r.model_dump(mode="json", by_alias=True)
