"""The ``sfclab`` command: argument parsing, printing and exit codes; no logic.

Exit status: 0 success, 1 failure (kernel, tool or measurement error), 2 bad input (a lab or
experiment file, an unknown lab or node, a bad option), 130 interrupted.  ``exec`` passes the
command's own status through.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from . import __version__
from .errors import SfclabError

EXAMPLES = """\
examples:
  sfclab up scenarios/chain5.yaml          build the lab (namespaces, links, routes)
  sfclab ls                                list labs
  sfclab inspect chain5 --json             nodes, interfaces, addresses, routes, bridges
  sfclab exec chain5 src -- ping -c 3 198.18.3.2
  sfclab graph chain5 --format mermaid
  sfclab traffic iperf chain5 --from src --to dst --flows 4 --json
  sfclab traffic ndr chain5 --from src --to dst --size 64
  sfclab run scenarios/chain-length.yaml --db results.db
  sfclab report --db results.db --out report/
  sfclab down chain5                       remove it completely (no file needed)
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # bad options are bad input: exit 2, one line
        self.print_usage(sys.stderr)
        raise SystemExit(_fail(f"{message}", 2))


def _fail(msg: str, status: int) -> int:
    print(f"sfclab: error: {msg}", file=sys.stderr)
    return status


def _progress() -> Callable[[str], None] | None:
    if not sys.stderr.isatty():
        return None
    t0 = time.monotonic()
    return lambda m: print(f"  [{time.monotonic() - t0:6.3f}s] {m}", file=sys.stderr)


def _emit(data: Any, as_json: bool, text: Callable[[Any], str]) -> None:
    if as_json:
        print(json.dumps(data, indent=2, default=str))
    else:
        out = text(data)
        if out:
            print(out)


# --- lab lifecycle -----------------------------------------------------------------------------

def cmd_validate(a: argparse.Namespace) -> int:
    from .spec.lab import load_lab
    from .realize.lifecycle import plan_for

    lab = load_lab(a.file)
    plan = plan_for(lab)
    _emit({"name": lab.name, "valid": True, "nodes": len(lab.nodes), "links": len(lab.links),
           "routes": len(plan.routes)}, a.json,
          lambda d: f"{a.file}: lab '{d['name']}' is valid ({d['nodes']} nodes, {d['links']} links,"
                    f" {d['routes']} routes)")
    return 0


def cmd_expand(a: argparse.Namespace) -> int:
    import yaml

    from .spec.lab import load_lab

    lab = load_lab(a.file)
    if a.json:
        print(json.dumps(lab.to_dict(), indent=2))
    else:
        print(yaml.safe_dump(lab.to_dict(), sort_keys=False), end="")
    return 0


def cmd_up(a: argparse.Namespace) -> int:
    from .realize import lifecycle
    from .spec.lab import load_lab

    lab = load_lab(a.file)
    t0 = time.monotonic()
    plan = lifecycle.up(lab, progress=_progress())
    dt = time.monotonic() - t0
    summary = {"name": plan.lab, "namespaces": len(plan.namespaces),
               "links": len({i.link for i in plan.interfaces}),
               "ovs_bridges": len(plan.ovs_bridges), "routes": len(plan.routes),
               "seconds": round(dt, 4)}
    _emit(summary, a.json, lambda d: f"lab '{d['name']}' is up: {d['namespaces']} namespaces, "
          f"{d['links']} links, {d['ovs_bridges']} OVS bridges, {d['routes']} routes "
          f"in {d['seconds']:.3f} s")
    return 0


def cmd_down(a: argparse.Namespace) -> int:
    from .realize import lifecycle

    if a.all == bool(a.name):
        return _fail("give a lab name or --all", 2)
    reports = lifecycle.down_all() if a.all else {a.name: lifecycle.down(a.name)}
    data = {n: r.to_dict() for n, r in reports.items()}
    _emit(data, a.json, lambda d: "\n".join(
        f"lab '{n}' removed: {r['namespaces']} namespaces, {r['bridges']} OVS bridges, "
        f"{r['links']} root interfaces, {r['processes']} processes ended"
        + "".join(f"\n  warning: {e}" for e in r["errors"]) for n, r in d.items())
        or "no labs")
    return 1 if any(r.errors for r in reports.values()) else 0


def cmd_ls(a: argparse.Namespace) -> int:
    from .realize import lifecycle

    def table(rows: list[dict]) -> str:
        if not rows:
            return "no labs"
        out = [f"{'NAME':20} {'STATUS':10} {'NODES':>5}  CREATED"]
        for r in rows:
            created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(r["created"])) \
                if r["created"] else "-"
            out.append(f"{r['name']:20} {r['status']:10} {r['nodes']:>5}  {created}")
        return "\n".join(out)
    _emit(lifecycle.listing(), a.json, table)
    return 0


def _inspect_text(d: dict) -> str:
    lines = [f"lab {d['name']} ({d['status']})"]
    for node, n in d["nodes"].items():
        head = f"  {node} [{n['kind']}]"
        if n["kind"] == "ovs-bridge":
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
        if n.get("function"):
            lines.append(f"      function: {json.dumps(n['function'], default=str)[:400]}")
    return "\n".join(lines)


def cmd_inspect(a: argparse.Namespace) -> int:
    from .realize.inspect import inspect

    _emit(inspect(a.name), a.json, _inspect_text)
    return 0


def cmd_exec(a: argparse.Namespace) -> int:
    from .realize import lifecycle

    argv = a.command[1:] if a.command and a.command[0] == "--" else a.command
    return lifecycle.exec_in(a.name, a.node, argv)


def cmd_graph(a: argparse.Namespace) -> int:
    from .plan import graph
    from .realize import lifecycle
    from .spec.lab import load_lab

    if os.path.exists(a.target):
        plan = lifecycle.plan_for(load_lab(a.target))
    else:
        _state, plan = lifecycle.load_plan(a.target)
    print(graph.mermaid(plan) if a.format == "mermaid" else graph.dot(plan), end="")
    return 0


# --- parser ----------------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="sfclab", description="Build, steer and benchmark service function chains "
                "of namespaced network functions.", epilog=EXAMPLES,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"sfclab {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=_Parser)

    def add(name: str, fn: Callable, help: str, example: str, json_flag: bool = True):
        sp = sub.add_parser(name, help=help, description=help, epilog="example:\n  " + example,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        sp.set_defaults(fn=fn)
        if json_flag:
            sp.add_argument("--json", action="store_true", help="print JSON")
        return sp

    sp = add("up", cmd_up, "build a lab from its file", "sfclab up scenarios/chain5.yaml")
    sp.add_argument("file")
    sp = add("down", cmd_down, "remove a lab completely, by name", "sfclab down chain5")
    sp.add_argument("name", nargs="?")
    sp.add_argument("--all", action="store_true", help="remove every lab")
    add("ls", cmd_ls, "list labs", "sfclab ls --json")
    sp = add("inspect", cmd_inspect, "show a lab's nodes, interfaces, routes and bridges",
             "sfclab inspect chain5 --json")
    sp.add_argument("name")
    sp = add("exec", cmd_exec, "run a command in a node's namespace (its status passes through)",
             "sfclab exec chain5 src -- ping -c 3 198.18.3.2", json_flag=False)
    sp.add_argument("name")
    sp.add_argument("node")
    sp.add_argument("command", nargs=argparse.REMAINDER)
    sp = add("graph", cmd_graph, "draw a lab (by name, or a lab file) as mermaid or dot",
             "sfclab graph chain5 --format dot | dot -Tpng > chain5.png", json_flag=False)
    sp.add_argument("target", metavar="NAME|FILE")
    sp.add_argument("--format", choices=["mermaid", "dot"], default="mermaid")
    sp = add("validate", cmd_validate, "check a lab file without building it",
             "sfclab validate scenarios/chain5.yaml")
    sp.add_argument("file")
    sp = add("expand", cmd_expand, "print a lab file's full form (shorthands expanded)",
             "sfclab expand scenarios/chain5.yaml")
    sp.add_argument("file")
    _more_commands(sub, add)
    return p


def _more_commands(sub: Any, add: Callable) -> None:
    """Measurement, experiment and report commands (see cli_measure / cli_experiments)."""
    try:
        from . import cli_measure
    except ImportError:  # pragma: no cover - during development only
        cli_measure = None  # type: ignore[assignment]
    if cli_measure is not None:
        cli_measure.register(sub, add)
    try:
        from . import cli_experiments
    except ImportError:  # pragma: no cover
        cli_experiments = None  # type: ignore[assignment]
    if cli_experiments is not None:
        cli_experiments.register(sub, add)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        a = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    if not getattr(a, "fn", None):
        parser.print_help()
        return 2
    try:
        return a.fn(a)
    except SfclabError as e:
        if a.debug:
            import traceback
            traceback.print_exc()
        return _fail(str(e), e.exit_status)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except BrokenPipeError:
        return 0
    except Exception as e:  # a bug: say so in one line; the traceback with --debug
        if a.debug:
            raise
        return _fail(f"internal error: {type(e).__name__}: {e} (run with --debug for the "
                     "traceback)", 1)


if __name__ == "__main__":
    sys.exit(main())
