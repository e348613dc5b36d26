"""``sfclab chain ...``: the service function chains of a running lab."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from . import chain_ops
from .chain_functions import functions_text
from .output import emit
from .group import command_group
from .status import ExitStatus

EXAMPLES = """\
examples:
  sfclab up scenarios/sfc-web.yaml                    a lab with two chains and a group
  sfclab chain ls sfcweb                              its chains
  sfclab chain inspect sfcweb web --json              stacks, labels, counters, shares
  sfclab chain classify sfcweb web --from-file scenarios/sfc-web-classifiers.yaml
  sfclab chain trace sfcweb web                       every path: the hops its probe takes
  sfclab chain add sfcweb scenarios/sfc-video-chain.yaml   new functions, placed and wired
  sfclab chain migrate sfcweb meter-1                 make-before-break, conntrack moved
  sfclab chain watch sfcweb                           the health watcher (failover)
  sfclab chain rm sfcweb video                        the added chain and its functions go
  sfclab down sfcweb
"""


def _ls_text(rows: list[dict[str, Any]]) -> str:
    out = [f"{'chain':<16} {'functions':<28} {'directions':<30} {'paths':>5} {'entries':>8}"]
    for r in rows:
        out.append(f"{r['chain']:<16} {' '.join(r.get('functions', [])):<28} "
                   f"{', '.join(r['directions']):<30} {r['paths']:>5} {r['entries']:>8}")
    return "\n".join(out)


def _inspect_text(d: dict[str, Any]) -> str:
    lines = []
    for name, c in d["chains"].items():
        lines.append(f"chain {name}")
        for di in c["directions"]:
            lines.append(f"  {di['ingress']} -> {di['egress']}"
                         f"{' (reverse)' if di['reverse'] else ''}, TTL {di['ttl']}"
                         f"{', encap ' + di['encap'] if di.get('encap', 'mpls') != 'mpls' else ''}")
            for cl in di["classifiers"]:
                what = " ".join(f"{k} {v}" for k, v in cl.items()
                                if k not in ("index", "ingress", "entries"))
                lines.append(f"    classifier at {cl['ingress']}: {what} "
                             f"({cl['entries']} entries)")
            for p in di["paths"]:
                lines.append(f"    path {p['index']}: {' > '.join(p['nodes'])}  "
                             f"weight {p['weight']}, {p['classified']:,} packets "
                             f"({100 * p['share']:.1f} %)")
                lines.append("      stack " + " ".join(
                    f"{x['label']}({x['node']} {x['action']})" for x in p["labels"]))
        for n, ct in c["nodes"].items():
            nz = ", ".join(f"{k} {v:,}" for k, v in ct.items() if v)
            lines.append(f"  {n:<12} {nz or '-'}")
        for node, clone in (c.get("moved") or {}).items():
            lines.append(f"  {node} (lab file) moved: {clone} stands in for it")
        for i, s in c["instances"].items():
            lines.append(f"  instance {i}: {s['proxy_in']:,} packets ({100 * s['share']:.1f} %)")
        lines += functions_text(c)
        for e in c.get("health", {}).get("events", [])[-8:]:  # chain add/migrate, failover
            what = ", ".join(f"{k} {v}" for k, v in e.items() if k not in ("time", "event"))
            lines.append(f"  event {e['event']}: {what}")
    return "\n".join(lines)


def _trace_text(d: dict[str, Any]) -> str:
    lines = [f"trace of chain {d['chain']}"]
    ends = {x["direction"]: x for x in d["directions"]}
    shown = None
    for p in d["paths"]:
        if p["direction"] != shown:
            shown, e = p["direction"], ends[p["direction"]]
            lines.append(f"direction {shown}: {e['ingress']} -> {e['egress']}"
                         f"{' (reverse)' if e['reverse'] else ''}")
        probe = p["probe"]
        how = (f"probe sport {probe['sport']} dport {probe['dport']}" if probe
               else "not traced")
        lines.append(f"path {p['path']}: {' > '.join(p['nodes'])}  ({how})")
        if not probe:
            lines.append(f"  {p['note']}")
            continue
        for h in p["hops"]:
            mark = "" if h["seen_at"] == h["expected"] else f"  (expected {h['expected']})"
            lines.append(f"  {h['hop']:>2}  label {h['label']:<6} {h['action']:<8} "
                         f"{h['seen_at'] or '*'}{mark}")
        took = {True: "yes", False: "no", None: "not read (over SSH)"}[p["took_path"]]
        lines.append(f"  took path {p['path']}: {took}; "
                     f"through {', '.join(x or '*' for x in p['instances_seen']) or '-'}; "
                     f"delivered to {p['nodes'][-1]}: {'yes' if p['delivered'] else 'no'}")
    return "\n".join(lines)


def cmd_ls(a: argparse.Namespace) -> int:
    from ..live.ops import chains  # light start-up: load only what this command needs

    emit(chains.listing(a.name), a.json, _ls_text)
    return ExitStatus.OK


def cmd_inspect(a: argparse.Namespace) -> int:
    from ..live.ops import chains  # light start-up: load only what this command needs

    emit(chains.inspect(a.name, a.chain), a.json, _inspect_text)
    return ExitStatus.OK


def cmd_classify(a: argparse.Namespace) -> int:
    from ..live.ops import classify  # light start-up: load only what this command needs

    emit(classify.classify(a.name, a.chain, a.from_file), a.json,
         lambda d: f"chain {d['chain']}: {d['classifiers']} classifiers added as "
                   f"{d['entries']:,} entries in {d['seconds']:.3f} s")
    return ExitStatus.OK


def cmd_trace(a: argparse.Namespace) -> int:
    from ..live.ops import chains  # light start-up: load only what this command needs

    d = chains.trace(a.name, a.chain, a.path, direction=a.direction)
    emit(d, a.json, _trace_text)
    return ExitStatus.OK if d["delivered"] and d["in_order"] else ExitStatus.FAILURE


def register(sub: Any, add: Callable[..., argparse.ArgumentParser]) -> None:
    """The ``chain`` command group."""
    one = command_group(add, "chain", "service function chains of a running lab",
                        "sfclab chain ls sfcweb", EXAMPLES)

    one("ls", cmd_ls, "list a lab's chains", "sfclab chain ls sfcweb")
    p = one("inspect", cmd_inspect, "classifiers, label stacks, per-hop counters, shares",
            "sfclab chain inspect sfcweb web --json")
    p.add_argument("chain", nargs="?")
    p = one("classify", cmd_classify, "add classifier entries to a chain from a file",
            "sfclab chain classify sfcweb web --from-file scenarios/sfc-web-classifiers.yaml")
    p.add_argument("chain")
    p.add_argument("--from-file", required=True, metavar="FILE",
                   help="a YAML or JSON list of classifiers; '-' reads standard input")
    p = one("trace", cmd_trace, "one probe per path, hashed onto it: the hops it really takes",
            "sfclab chain trace sfcweb web --path 1 --json")
    p.add_argument("chain")
    p.add_argument("--path", type=int, metavar="N", help="trace only path N (chain inspect "
                   "numbers them)")
    p.add_argument("--direction", type=int, metavar="N", help="trace only direction N (0: "
                   "the first, 1: a symmetric chain's reverse; default: every direction of a "
                   "symmetric chain, the first of another)")
    chain_ops.register(one)  # add, rm, migrate: chains changed on a running lab
