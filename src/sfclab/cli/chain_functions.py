"""``chain inspect``'s view of a chain's eBPF functions (``bpf-firewall``): each instance's own
``inspect`` (its rules with their counters, policy, connection map) beside the data plane's
per-node counters.  Kernel functions are left out: their counters are ``sfclab inspect``'s."""

from __future__ import annotations

from typing import Any


def with_functions(lab: str, d: dict[str, Any]) -> dict[str, Any]:
    """``d`` (``chains.inspect``'s result) with ``functions``: node -> its function's inspect,
    for each chain's instances whose kind is an SFC program."""
    from .. import functions
    from ..realize.functions import instantiate
    from ..realize.lifecycle import load_plan

    state, plan = load_plan(lab)
    for c in d["chains"].values():
        for node in c.get("instances", {}):
            f = plan.functions.get(node)
            if f is not None and functions.get(f.kind).sfc_program:
                c.setdefault("functions", {})[node] = \
                    instantiate(state, plan, node).inspect()
    return d


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
