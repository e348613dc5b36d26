"""``sfclab up|down|ls|inspect|exec|graph|validate|expand``: a lab's life, printed."""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable
from typing import Any

from ..spec.quantities import format_rate
from .output import emit, fail, progress
from .status import ExitStatus

def cmd_validate(a: argparse.Namespace) -> int:
    from ..experiments.validate import check  # light start-up: load only what this command needs

    findings = [check(f, a.kind) for f in a.file]
    if a.json:
        print(json.dumps([f.to_dict() for f in findings], indent=2, default=str))
    for f in findings:
        if f.valid and not a.json:
            print(f.text())
        elif not f.valid:
            fail(f.text(), ExitStatus.BAD_INPUT)
    bad = [f.error.exit_status for f in findings if f.error is not None]
    return ExitStatus(max(bad)) if bad else ExitStatus.OK


def cmd_expand(a: argparse.Namespace) -> int:
    import yaml  # light start-up: load only what this command needs

    from ..realize.kinds import load_lab  # light start-up: load only what this command needs

    lab = load_lab(a.file)
    out = lab.to_dict()
    if lab.hosts:  # what the planner chose for the hosts: VNIs, MTUs, addresses
        from ..realize.hosts import inspect_links  # light start-up: only labs with hosts
        from ..realize.lifecycle import plan_for  # light start-up: only labs with hosts

        plan = plan_for(lab)
        out = {**out, "underlay": {**(out.get("underlay") or {}),
                                   "mtu": plan.underlay.mtu if plan.underlay else None,
                                   "mtu_note": plan.underlay.mtu_note if plan.underlay else None,
                                   "addresses": {h.name: h.address for h in plan.hosts}},
               "host_links": inspect_links(plan)}
    if a.json:
        print(json.dumps(out, indent=2))
    else:
        print(yaml.safe_dump(out, sort_keys=False), end="")
    return ExitStatus.OK


def cmd_up(a: argparse.Namespace) -> int:
    from ..realize import lifecycle  # light start-up: load only what this command needs
    from ..realize.kinds import load_lab  # light start-up: load only what this command needs

    lab = load_lab(a.file)
    t0 = time.monotonic()
    plan = lifecycle.up(lab, progress=progress())
    dt = time.monotonic() - t0
    summary = {"name": plan.lab, "namespaces": len(plan.namespaces),
               "links": len({i.link for i in plan.interfaces}),
               "ovs_bridges": len(plan.ovs_bridges), "routes": len(plan.routes),
               "seconds": round(dt, 4)}
    emit(summary, a.json, lambda d: f"lab '{d['name']}' is up: {d['namespaces']} namespaces, "
          f"{d['links']} links, {d['ovs_bridges']} OVS bridges, {d['routes']} routes "
          f"in {d['seconds']:.3f} s")
    return ExitStatus.OK


REASONS = {"refused": "connection refused", "timeout": "timed out",
           "auth": "authentication refused", "host-key": "host key not trusted",
           "network": "network unreachable", "ssh": "SSH failed",
           "agent": "reached, but its agent failed"}

DOWN_EXIT = """\
exit status: 0 when the lab is removed completely; 1 when some of it is left: a host reached
over SSH that could not be reached (or whose agent failed) keeps its part journaled, the lab
stays (status 'removing') and running down again retries exactly those hosts; also 1 when
a journal line was damaged or named what the lab cannot prove is its own: each such line is
named with why, left alone, and the rest removed; 2 for an unknown lab.  With --json, a
lab on SSH hosts has 'complete' and 'hosts' (per host: host, address, removed, and for a host
whose part is left: reason, error)."""


def _down_text(name: str, r: dict) -> str:
    counts = (f"{r['namespaces']} namespaces, {r['bridges']} OVS bridges, "
              f"{r['links']} root interfaces, {r['processes']} processes ended")
    left = [h for h in r.get("hosts", []) if not h["removed"]]
    if not left:
        return f"lab '{name}' removed: {counts}" + \
            "".join(f"\n  warning: {e}" for e in r["errors"])
    lines = [f"lab '{name}' is only partly removed: the part of {len(left)} of "
             f"{len(r['hosts'])} hosts is left"]
    for h in left:
        lines.append(f"  host {h['host']} ({h['address']}): "
                     f"{REASONS.get(h['reason'], h['reason'])}: {h['error']}")
    done = [h["host"] for h in r["hosts"] if h["removed"]]
    lines.append(f"  removed on {', '.join(done) or 'no host'}: {counts}")
    lines.append(f"  the part of {', '.join(h['host'] for h in left)} stays journaled; run "
                 f"'sfclab down {name}' again to retry exactly "
                 f"{'that host' if len(left) == 1 else 'those hosts'}")
    lines += [f"  warning: {e}" for e in r["errors"] if "its part is left" not in e]
    return "\n".join(lines)


def cmd_down(a: argparse.Namespace) -> int:
    from ..realize import lifecycle  # light start-up: load only what this command needs

    if a.all == bool(a.name):
        return fail("give a lab name or --all", ExitStatus.BAD_INPUT)
    reports = lifecycle.down_all() if a.all else {a.name: lifecycle.down(a.name)}
    data = {n: r.to_dict() for n, r in reports.items()}
    emit(data, a.json, lambda d: "\n".join(_down_text(n, r) for n, r in d.items())
         or "no labs")
    return ExitStatus.FAILURE if any(r.errors for r in reports.values()) else ExitStatus.OK


def cmd_ls(a: argparse.Namespace) -> int:
    from ..realize import lifecycle  # light start-up: load only what this command needs

    def table(rows: list[dict]) -> str:
        if not rows:
            return "no labs"
        out = [f"{'NAME':20} {'STATUS':10} {'NODES':>5}  CREATED"]
        for r in rows:
            created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["created"])) \
                if r["created"] else "-"
            out.append(f"{r['name']:20} {r['status']:10} {r['nodes']:>5}  {created}")
        return "\n".join(out)
    emit(lifecycle.listing(), a.json, table)
    return ExitStatus.OK


def _hosts_text(d: dict) -> list[str]:
    lines = []
    u = d.get("underlay") or {}
    lines.append(f"underlay {u.get('netns')} {u.get('subnet')} mtu {u.get('mtu')}: "
                 f"{u.get('mtu_note')}")
    for name, h in d["hosts"].items():
        mem = f"{h['memory'] / 2**20:g} MiB" if h["memory"] is not None else "unlimited"
        lines.append(f"host {name}: context {h['context']}, underlay {h['underlay']}, cpus "
                     f"{','.join(map(str, h['cpus']))}, memory {mem}; nodes "
                     f"{', '.join(h['nodes']) or '-'}")
    for hl in d["host_links"]:
        ends = " - ".join(f"{e['node']}@{e['host']}" for e in hl["ends"])
        extra = (f" vni {hl['vni']}" if hl["vni"] is not None else "") + \
            (f" rate {format_rate(hl['rate'])}" if hl["rate"] else "") + \
            (f" tenant {hl['tenant']}" if hl["tenant"] else "")
        what = "added instance's link" if hl.get("added") else f"link {hl['link']}"
        lines.append(f"{what}: {ends} {hl['attach']} mtu {hl['mtu']}{extra}")
    return lines


def _inspect_text(d: dict) -> str:
    lines = [f"lab {d['name']} ({d['status']})"]
    if d.get("hosts"):
        lines += ["  " + x for x in _hosts_text(d)]
    for t, members in (d.get("tenants") or {}).items():
        lines.append(f"  tenant {t}: {', '.join(members)}")
    for node, n in d["nodes"].items():
        head = f"  {node} [{n['kind']}]" + (f" on {n['host']}" if n.get("host") else "") + \
            (f" tenants {','.join(n['tenants'])}" if n.get("tenants") else "") + \
            (f" ({n['was']} moved to {n['moved_to']})" if n.get("moved_to") else "") + \
            (f" (in place of {n['stands_for']})" if n.get("stands_for") else "")
        if "datapath" in n:  # a bridge with no namespace: OVS
            lines.append(f"{head} bridge {n['bridge']} datapath {n['datapath']}: "
                         f"{n['datapath_note']}")
            lines.append(f"      ports: {', '.join(n['ports'])}")
            continue
        lines.append(f"{head} netns {n['netns']}" + (" forwarding" if n.get("forwarding") else ""))
        for i in n.get("interfaces", []):
            extra = f" master {i['master']}" if i.get("master") else ""
            lines.append(f"      {i['name']:<12} {i['state']:<4} mtu {i['mtu']:<5} "
                         f"{' '.join(i['addresses']) or '-'}{extra}")
        for r in n.get("routes", []):
            via = f" via {r['gateway']}" if r["gateway"] else ""
            lines.append(f"      route {r['dst']}{via} dev {r['dev']}")
        if n.get("container"):
            from ..realize.containers import in_words  # light start-up: labs with containers

            c = n["container"]
            ident = f", id {c['id']}" if c.get("id") else ""
            lines.append(f"      container {c['name']} (image {c['image']}{ident}): "
                         f"{in_words(c)}" + (f": {c['error']}" if c.get("error") else ""))
        if n.get("function"):
            lines.append(f"      function: {json.dumps(n['function'], default=str)[:400]}")
    return "\n".join(lines)


def cmd_inspect(a: argparse.Namespace) -> int:
    from ..realize.inspect import inspect  # light start-up: load only what this command needs

    emit(inspect(a.name), a.json, _inspect_text)
    return ExitStatus.OK


def cmd_exec(a: argparse.Namespace) -> int:
    from ..realize import lifecycle  # light start-up: load only what this command needs

    argv = a.command[1:] if a.command and a.command[0] == "--" else a.command
    return lifecycle.exec_in(a.name, a.node, argv)


def cmd_graph(a: argparse.Namespace) -> int:
    from ..plan import graph  # light start-up: load only what this command needs
    from ..realize import lifecycle  # light start-up: load only what this command needs
    from ..realize.kinds import TABLE  # light start-up: load only what this command needs
    from ..realize.kinds import load_lab  # light start-up: load only what this command needs
    from ..realize.moved import moved_nodes  # light start-up: load only what this command needs

    moved: dict[str, str] = {}  # a running lab's migrated lab-file nodes -> their clones
    states: dict[str, str] = {}  # a running lab's containers' states, by node
    if os.path.exists(a.target):
        plan = lifecycle.plan_for(load_lab(a.target))
    else:
        state, plan = lifecycle.load_plan(a.target)
        moved = moved_nodes(state)
        if plan.containers:
            from ..realize import containers  # light start-up: only labs with containers

            states = {n: containers.in_words(s)
                      for n, s in containers.states(state.name, plan).items()}
    if a.format == "html":
        from ..web.export import html_page  # light start-up: only the html format

        print(html_page(plan.to_dict(), moved), end="")
        return ExitStatus.OK
    draw = graph.mermaid if a.format == "mermaid" else graph.dot
    print(draw(plan, TABLE.shapes(), moved, states), end="")
    return ExitStatus.OK



def register(sub: Any, add: Callable[..., argparse.ArgumentParser]) -> None:
    """The lab lifecycle commands."""
    sp = add("up", cmd_up, "build a lab from its file", "sfclab up scenarios/chain5.yaml")
    sp.add_argument("file")
    sp = add("down", cmd_down, "remove a lab completely, by name", "sfclab down chain5")
    sp.epilog = f"{sp.epilog}\n\n{DOWN_EXIT}"
    sp.add_argument("name", nargs="?")
    sp.add_argument("--all", action="store_true", help="remove every lab")
    add("ls", cmd_ls, "list labs", "sfclab ls --json")
    sp = add("inspect", cmd_inspect, "show a lab's nodes, interfaces, routes and bridges",
             "sfclab inspect chain5 --json")
    sp.add_argument("name")
    sp = add("exec", cmd_exec, "run a command in a node's namespace, or a host's context as "
             "@HOST, there over SSH for a host reached over SSH (its status passes through)",
             "sfclab exec chain5 src -- ping -c 3 198.18.3.2", json_flag=False)
    sp.add_argument("name")
    sp.add_argument("node")
    sp.add_argument("command", nargs=argparse.REMAINDER)
    sp = add("graph", cmd_graph, "draw a lab (by name, or a lab file) as mermaid or dot",
             "sfclab graph chain5 --format dot | dot -Tpng > chain5.png", json_flag=False)
    sp.add_argument("target", metavar="NAME|FILE")
    sp.add_argument("--format", choices=["mermaid", "dot", "html"], default="mermaid",
                    help="html: one self-contained page (the web view's graph)")
    sp = add("validate", cmd_validate,
             "check lab, experiment, chain and classifier files without running them",
             "sfclab validate scenarios/chain5.yaml scenarios/demo-chain-length.yaml\n"
             "  sfclab validate scenarios/sfc-web-classifiers.yaml --kind classifier --json")
    sp.add_argument("file", nargs="+")
    sp.add_argument("--kind", choices=["lab", "experiment", "chain", "classifier", "findings"],
                    help="the file's kind (default: told from its top-level keys)")
    sp = add("expand", cmd_expand, "print a lab file's full form (shorthands expanded)",
             "sfclab expand scenarios/chain5.yaml")
    sp.add_argument("file")
