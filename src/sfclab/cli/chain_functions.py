"""``chain inspect``'s text for a chain's eBPF functions (``bpf-firewall``): each instance's
rules with their counters, policy and connection map, as ``chains.inspect`` gives them."""

from __future__ import annotations

from typing import Any


def functions_text(c: dict[str, Any]) -> list[str]:
    """Lines for ``chain inspect``'s text: each eBPF function's rules and their counters."""
    lines = []
    for node, f in (c.get("functions") or {}).items():
        lines.append(f"  function {node}: policy {f['policy']}"
                     f"{', stateful' if f.get('stateful') else ''}")
        for i, r in enumerate(f.get("rules", [])):
            what = " ".join(f"{k} {v}" for k, v in r["rule"].items())
            lines.append(f"    rule {i}: {r.get('packets', 0):,} packets  {what}")
        for key in ("policy_counter", "established"):
            if f.get(key):
                lines.append(f"    {key.replace('_counter', '')}: {f[key]['packets']:,} packets")
    return lines
