"""``chain inspect``'s text for a chain's eBPF functions (``bpf-firewall``, ``bpf-balancer``,
``bpf-nat``): each instance's rules (a balancer's backends, a NAT's translations) with their
counters, as ``chains.inspect`` gives them; a ``bpf-pipeline``'s functions one by one.
Functions whose text differs have an entry in :data:`TEXT`, by their program."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def functions_text(c: dict[str, Any]) -> list[str]:
    """Lines for ``chain inspect``'s text: each eBPF function's rules and their counters."""
    lines = []
    for node, f in _each(c.get("functions") or {}):
        own = TEXT.get(str(f.get("program", "")).split(" ")[0])
        if own:
            lines += own(node, f)
            continue
        lines.append(f"  function {node}: policy {f['policy']}"
                     f"{', stateful' if f.get('stateful') else ''}")
        for i, r in enumerate(f.get("rules", [])):
            what = " ".join(f"{k} {v}" for k, v in r["rule"].items())
            lines.append(f"    rule {i}: {r.get('packets', 0):,} packets  {what}")
        for key in ("policy_counter", "established"):
            if f.get(key):
                lines.append(f"    {key.replace('_counter', '')}: {f[key]['packets']:,} packets")
    return lines


def _each(functions: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(name, inspect) of each eBPF function; a bpf-pipeline's functions one by one, named
    ``NODE.0``, ``NODE.1`` ... in the order they run."""
    out = []
    for node, f in functions.items():
        if "functions" in f:
            out += [(f"{node}.{i}", s) for i, s in enumerate(f["functions"])]
        else:
            out.append((node, f))
    return out


def _balancer_text(node: str, f: dict[str, Any]) -> list[str]:
    """A bpf-balancer's lines: the VIP, then each backend with its counters and table share."""
    lines = [f"  function {node}: vip {f['vip']} {f['proto']} ports {f['ports']}, "
             f"sticky by {f['sticky']}"]
    for i, b in enumerate(f["backends"]):
        lines.append(f"    backend {i}: {b.get('packets', 0):,} packets  {b['address']} weight "
                     f"{b['weight']}, {b['slots']} of {f['table']} slots"
                     f"{'' if b['up'] else ', out'}")
    for key in ("replies", "other"):
        if f.get(key):
            lines.append(f"    {key}: {f[key]['packets']:,} packets")
    return lines


def _nat_text(node: str, f: dict[str, Any]) -> list[str]:
    """A bpf-nat: its masquerade's and forwards' counters, and its live translations."""
    def n(c: dict[str, int] | None) -> str:
        c = c or {}
        return f"{c.get('packets', 0):,} packets, translations made: {c.get('new', 0):,}"

    lines = [f"  function {node}: masquerade toward {f['outside']} ({f['interface']}), "
             f"live translations: {f.get('live_translations', 0):,}",
             f"    masquerade: {n(f.get('masquerade'))}"]
    if "masquerade6" in f:
        lines.append(f"    masquerade6: {n(f['masquerade6'])}")
    for i, fw in enumerate(f.get("forwards", [])):
        what = " ".join(f"{k} {v}" for k, v in fw["forward"].items())
        lines.append(f"    forward {i}: {n(fw)}  {what}")
    for key in ("not_translated", "no_port"):
        if (f.get(key) or {}).get("packets"):
            lines.append(f"    {key.replace('_', ' ')}: {f[key]['packets']:,} packets")
    return lines


#: program -> the lines of a function of that program (the bpf-firewall's are the default)
TEXT: dict[str, Callable[[str, dict[str, Any]], list[str]]] = {"sfc_nat": _nat_text,
                                                               "sfc_lb": _balancer_text}
