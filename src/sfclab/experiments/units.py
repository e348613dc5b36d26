"""Units people read: a metric's quantity from its name, and the prefix that fits its magnitude.

Metric names end in their unit (``throughput_bps``, ``received_pps``, ``latency_us_p99``,
``loss_ratio``, ``cpu.…_s``); :func:`quantity` reads it and :func:`scale` picks one prefix for a
whole column or axis (the one that fits its largest value), so a table shows ``12.3 Gbit/s``
rather than ``1.23e+10`` and an axis is labelled ``throughput (Gbit/s)``.

Words people read, never field names: :func:`metric_words` names a metric (``received_pps`` ->
``received rate``, from :data:`METRIC_WORDS` or its name without the unit), :func:`param_words`
a swept parameter (``lab.chain.length`` -> ``chain length``, from :data:`PARAM_WORDS`), and
:func:`axis_label` / :func:`title` put them together; :func:`env_words` and :func:`env_value`
name a key of a stored environment record and show its value (``load`` [12.9, 13.5, 11.5] ->
``load average (1, 5, 15 min)`` ``12.9, 13.5, 11.5``; ``memory_bytes`` -> ``memory`` in GiB).
:func:`nonnegative` says which metrics cannot go below 0 (rates, times, shares, counts), so an
interval of their mean is drawn from 0 up rather than below it.  The terminal, the report, the plots and
the web view all take their labels from here (the web view in the JSON the server sends);
field names stay in JSON keys and CSV columns only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Quantity:
    """What a metric measures: its base unit and the prefixes it may take."""

    label: str  # "throughput", "packet rate" ...
    unit: str  # the base unit as written after a prefix: "bit/s", "pps", "s" ...
    prefixes: tuple[tuple[float, str], ...]  # (factor, prefix), largest first


_SI = ((1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))
_TIME = ((1.0, ""), (1e-3, "m"), (1e-6, "µ"), (1e-9, "n"))

BITS = Quantity("throughput", "bit/s", _SI)
PACKETS = Quantity("packet rate", "pps", _SI)
SECONDS = Quantity("time", "s", _TIME)
RATIO = Quantity("ratio", "%", ((0.01, ""),))
PLAIN = Quantity("", "", ((1.0, ""),))

#: (pattern on the metric name, quantity, factor from the name's unit to the base unit)
_RULES: tuple[tuple[re.Pattern[str], Quantity, float], ...] = (
    (re.compile(r"(^|_)bps($|_)|bits_per_second"), BITS, 1.0),
    (re.compile(r"(^|_)pps($|_)"), PACKETS, 1.0),
    (re.compile(r"(^|_)us($|_)"), SECONDS, 1e-6),
    (re.compile(r"(^|_)ms($|_)"), SECONDS, 1e-3),
    (re.compile(r"(^|_)ns($|_)"), SECONDS, 1e-9),
    (re.compile(r"(^|_)(s|seconds)($|_)"), SECONDS, 1.0),
    (re.compile(r"ratio|fraction|fairness"), RATIO, 1.0),
)


CPU_SHARE = Quantity("CPU", "%", ((1.0, ""),))
_CPU_FIELDS = {"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal", "busy",
               "guest", "percent"}


#: metrics of no unit that count things, so never go below 0
_COUNTS = re.compile(r"retransmits|lost|drops|dropped|errors|packets|bytes|count|trials|fairness")


def quantity(metric: str) -> tuple[Quantity, float]:
    """The metric's quantity and the factor from its stored values to the base unit."""
    name = metric.rsplit(".", 1)[-1]
    if metric.startswith("cpu.") and name in _CPU_FIELDS:
        return CPU_SHARE, 1.0
    if metric.startswith("cpu.process_cpu_s."):  # a process's CPU time, by its name
        return SECONDS, 1.0
    for pattern, q, factor in _RULES:
        if pattern.search(name):
            if q is RATIO and "fairness" in name:
                return PLAIN, 1.0
            return q, factor
    return PLAIN, 1.0


def nonnegative(metric: str) -> bool:
    """Whether the metric cannot be below 0: a rate, a time, a share or a count."""
    return quantity(metric)[0] is not PLAIN or bool(_COUNTS.search(metric.rsplit(".", 1)[-1]))


@dataclass(frozen=True)
class Scale:
    """One prefix for a column or an axis: ``value * factor`` is in ``unit``."""

    factor: float
    unit: str

    def __call__(self, v: float) -> float:
        return v * self.factor

    def format(self, v: float, digits: int = 4) -> str:
        if v is None or math.isnan(v):
            return "–"
        return f"{v * self.factor:.{digits}g}" + (f" {self.unit}" if self.unit else "")


def scale(metric: str, values: Iterable[float]) -> Scale:
    """The scale for ``values`` of ``metric``: the largest prefix its largest value reaches."""
    q, base = quantity(metric)
    finite = [abs(v) * base for v in values if v is not None and not math.isnan(v)]
    top = max(finite, default=0.0)
    if q is RATIO:
        return Scale(100.0 * base, "%")
    if q is CPU_SHARE:
        return Scale(1.0, "%")
    chosen = q.prefixes[-1]
    for factor, prefix in q.prefixes:
        if top >= factor:
            chosen = (factor, prefix)
            break
    return Scale(base / chosen[0], f"{chosen[1]}{q.unit}")


#: a metric's words where its name without the unit would not say it (one entry per metric)
METRIC_WORDS: dict[str, str] = {
    "throughput_bps": "throughput",
    "received_pps": "received rate",
    "sent_pps": "sent rate",
    "offered_pps": "offered rate",
    "max_received_pps": "peak received rate",
    "max_received_at_offered_pps": "offered rate at the peak",
    "ndr_pps": "NDR",
    "pdr_pps": "PDR",
    "ndr_lower_bound_pps": "NDR (lower bound)",
    "loss_ratio": "loss",
    "udp_loss_ratio": "UDP loss",
    "jain_fairness": "Jain fairness",
    "flow_max_bps": "fastest flow",
    "flow_min_bps": "slowest flow",
}

#: a swept parameter's words (the rest: the last part of its name, '_' as a space)
PARAM_WORDS: dict[str, str] = {
    "lab.chain.length": "chain length",
    "chain.length": "chain length",
    "measure.flows": "flows",
    "measure.size": "frame size (B)",
    "measure.duration": "duration (s)",
    "measure.rates": "offered rates",
    "measure.zerocopy": "zerocopy",
    "measure.protocol": "protocol",
    "offered_pps": "offered rate",
}

_UNIT_TOKEN = re.compile(r"(^|_)(bps|pps|us|ms|ns|s|ratio|bytes)(?=$|_)")
_PERCENTILE = re.compile(r"^(.*?)\s*\b(p\d+(?:\.\d+)?|mean|min|max|avg)\s*(.*)$")


def metric_words(metric: str) -> str:
    """The metric in words without its unit: ``throughput_bps`` -> ``throughput``,
    ``latency_us_p99`` and ``latency_p99_us`` -> ``latency p99``, ``cpu.all.softirq`` -> ``CPU
    softirq``, ``cpu.cores.cpu1.busy`` -> ``CPU busy (core 1)``,
    ``cpu.process_cpu_s.client0`` -> ``CPU time of client0``."""
    if metric in METRIC_WORDS:
        return METRIC_WORDS[metric]
    head, _, name = metric.rpartition(".")
    name = re.sub(r"(^|_)p(\d+)_(\d+)(?=$|_)", r"\1p\2.\3", name)  # p99_9 is p99.9
    share = re.match(r"^ndr(\d+)pct_", name)  # ndr10pct_latency_p50_us: at 10 % of the NDR
    name = name[share.end():] if share else name
    words = _UNIT_TOKEN.sub(r"\1", name).strip("_").replace("_", " ")
    words = re.sub(r"\s+", " ", words)
    m = _PERCENTILE.match(words) if "latency" in words else None
    if m and m.group(3):  # "latency p99 one way" stays; "latency p99" is already in order
        words = f"{m.group(1)} {m.group(3)} {m.group(2)}".strip()
    core = re.fullmatch(r"cpu\.cores\.cpu(\d+)", head)
    if head == "cpu.process_cpu_s":
        words = f"CPU time of {name}"
    elif core:
        words = f"CPU {words} (core {core[1]})"
    elif head.startswith("cpu"):
        words = "CPU " + words
    if share:
        words += f" at {share[1]} % of the NDR"
    return words or quantity(metric)[0].label or "value"


def param_words(param: str) -> str:
    """A swept parameter in words: ``lab.chain.length`` -> ``chain length``,
    ``measure.flows`` -> ``flows``, ``lab.nodes.fw.rules`` -> ``fw rules``."""
    if param in PARAM_WORDS:
        return PARAM_WORDS[param]
    parts = param.split(".")
    if parts[0] in ("lab", "measure") and len(parts) > 1:
        parts = parts[1:]
    if parts[0] == "nodes" and len(parts) > 1:
        parts = parts[1:]
    return " ".join(parts).replace("_", " ")


def reading(metric: str, value: float) -> str:
    """One figure as a person reads it: ``throughput_bps`` 1.23e10 -> ``throughput 12.3
    Gbit/s``."""
    return f"{metric_words(metric)} {scale(metric, [value]).format(value)}"


#: the longest a swept value is written in a point's words (a whole node table can be one)
MAX_VALUE_WORDS = 120


def _compact(v: object) -> str:
    if isinstance(v, dict):
        groups: dict[str, list[str]] = {}
        for k, x in v.items():  # keys with the same value written once: "r1, r2: {...}"
            groups.setdefault(_compact(x), []).append(str(k))
        return "{" + ", ".join(f"{', '.join(ks)}: {x}" for x, ks in groups.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_compact(x) for x in v) + "]"
    return str(v)


def value_words(v: object) -> str:
    """A swept value as a person reads it: a number or a word as it is; a mapping or a list
    in flow style without quotes, keys with the same value written once, cut at
    :data:`MAX_VALUE_WORDS` characters: ``{"r1": t, "r2": t}`` -> ``{r1, r2: {kind: ...}}``."""
    text = _compact(v)
    return text if len(text) <= MAX_VALUE_WORDS else text[:MAX_VALUE_WORDS - 1] + "…"


def point_words(label: dict[str, object]) -> str:
    """A point of the swept parameters in words: ``{"measure.flows": 1}`` -> ``flows 1``."""
    return ", ".join(f"{param_words(k)} {value_words(v)}" for k, v in label.items()) or \
        "all runs"


def axis_label(metric: str, s: Scale) -> str:
    """``throughput_bps`` in Gbit/s -> ``throughput (Gbit/s)``."""
    words = metric_words(metric)
    return f"{words} ({s.unit})" if s.unit else words


def title(metric: str, param: str | None = None, *, of: str = "") -> str:
    """A figure's or a section's title: ``chains: throughput against chain length``."""
    text = metric_words(metric) + (f" against {param_words(param)}" if param else "")
    return f"{of}: {text}" if of else text


#: a key of a stored environment record (flattened: ``kernel.release``) in words
ENV_WORDS: dict[str, str] = {
    "commit": "source commit",
    "load": "load average (1, 5, 15 min)",
    "kernel.release": "kernel",
    "kernel.version": "kernel build",
    "kernel.machine": "machine",
    "hostname": "host",
    "cpu_model": "CPU",
    "cores": "cores",
    "cores_usable": "cores usable",
    "memory_bytes": "memory",
    "calibration": "generator calibration",
}
_ENV_GROUPS = {"versions": "{} version", "tool_banners": "{} banner", "sysctls": "sysctl {}",
               "packages": "package {}", "calibration": "calibration: {}"}


def env_words(key: str) -> str:
    """A key of an environment record in words: ``load`` -> ``load average (1, 5, 15 min)``,
    ``versions.iperf3`` -> ``iperf3 version``, ``kernel.release`` -> ``kernel``."""
    if key in ENV_WORDS:
        return ENV_WORDS[key]
    head, _, rest = key.partition(".")
    if rest and head in _ENV_GROUPS:
        return _ENV_GROUPS[head].format(rest.replace("_", " "))
    return key.replace(".", " ").replace("_", " ")


def env_value(key: str, value: object) -> str:
    """A value of an environment record as a person reads it: a load average's three figures
    to one decimal, memory in GiB, lists comma-separated, none as ``–``."""
    if value is None:
        return "–"
    if key == "memory_bytes" and isinstance(value, (int, float)):
        return f"{value / 2 ** 30:.1f} GiB"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}" if key != "load" else f"{value:.1f}"
    if isinstance(value, (list, tuple)):
        nums = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
        if key == "load" and nums:
            return ", ".join(f"{v:.1f}" for v in value)
        return ", ".join(env_value(key, v) for v in value) if len(value) <= 8 else \
            f"{len(value)} values"
    if isinstance(value, dict):
        return ", ".join(f"{k} {env_value(key, v)}" for k, v in value.items())
    return str(value)


#: a measurement option's words and unit, where its name alone would not say them
OPTION_WORDS: dict[str, tuple[str, str]] = {
    "size": ("frame size", "B"), "rates": ("offered rates", "pps"), "rate": ("offered rate", "pps"),
    "max_rate": ("top of the search", "pps"), "ndr_loss": ("NDR loss goal", "%"),
    "pdr_loss": ("PDR loss goal", "%"), "precision": ("precision", "%"),
    "duration": ("duration", "s"), "omit": ("omitted at the start", "s"),
    "bitrate": ("bit rate", "bit/s"), "length": ("write size", "B"), "udp": ("UDP", ""),
    "ip": ("IP version", ""),
}


def option_words(key: str, value: object) -> str | None:
    """A measurement option as a person reads it: ``duration`` 2.0 -> ``duration 2 s``,
    ``rates`` [1e5, 2e5] -> ``offered rates 100000, 200000 pps``; None for an empty one."""
    if value is None or value == [] or value == "":
        return None
    words, unit = OPTION_WORDS.get(key, (key.replace("_", " "), ""))

    def one(v: object) -> str:
        if isinstance(v, bool):
            return "yes" if v else "no"
        return f"{v:g}" if isinstance(v, float) else str(v)
    shown = ", ".join(one(v) for v in value) if isinstance(value, list) else one(value)
    return f"{words} {shown}" + (f" {unit}" if unit and not isinstance(value, bool) else "")
