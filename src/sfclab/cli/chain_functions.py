"""``chain inspect``'s text for a chain's eBPF functions (``bpf-firewall``): each instance's
rules with their counters, policy and connection map, as ``chains.inspect`` gives them.
Functions whose text differs have an entry in :data:`TEXT`, by their program."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def functions_text(c: dict[str, Any]) -> list[str]:
    """Lines for ``chain inspect``'s text: each eBPF function's rules and their counters."""
    lines = []
    for node, f in (c.get("functions") or {}).items():
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


def _nat_text(node: str, f: dict[str, Any]) -> list[str]:
    """A bpf-nat: its masquerade's and forwards' counters, and its live translations."""
    def n(c: dict[str, int] | None) -> str:
        c = c or {}
        return f"{c.get('packets', 0):,} packets, translations made: {c.get('new', 0):,}"

    lines = [f"  function {node}: masquerade toward {f['outside']} ({f['interface']}), "
             f"live translations: {f.get('live_translations', 0):,}",
             f"    masquerade: {n(f.get('masquerade'))}"]
    for i, fw in enumerate(f.get("forwards", [])):
        what = " ".join(f"{k} {v}" for k, v in fw["forward"].items())
        lines.append(f"    forward {i}: {n(fw)}  {what}")
    for key in ("not_translated", "no_port"):
        if (f.get(key) or {}).get("packets"):
            lines.append(f"    {key.replace('_', ' ')}: {f[key]['packets']:,} packets")
    return lines


#: program -> the lines of a function of that program (the bpf-firewall's are the default)
TEXT: dict[str, Callable[[str, dict[str, Any]], list[str]]] = {"sfc_nat": _nat_text}
