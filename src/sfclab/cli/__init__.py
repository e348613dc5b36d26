"""The ``sfclab`` command: argument parsing, printing and exit codes; no logic.

One module per command group: :mod:`.lab` (up, down, ls, inspect, exec, graph, validate,
expand; with :mod:`.kube` for their ``--kube`` form), :mod:`.chain` (chain ...) and :mod:`.chain_ops` (chain add, rm, migrate, watch),
with :mod:`.chain_functions` (chain inspect's view of the eBPF functions' rules),
:mod:`.host` (host add, rm, ls), :mod:`.image` (image build, ls), :mod:`.measure` (traffic ...), :mod:`.experiments` (run,
results, report), :mod:`.serve` (serve).  :mod:`.group` makes a command group's parser,
:mod:`.output` what every command shares for talking to people (error lines, progress, JSON or
text).  Exit statuses are :class:`~sfclab.cli.status.ExitStatus` (:mod:`.status`); ``exec``
passes the command's own status through.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from .. import __version__
from ..errors import SfclabError
from ..kernel import process
from . import chain, experiments, host, image, lab, measure, serve
from .output import fail
from .status import ExitStatus

EXAMPLES = """\
examples:
  sfclab up scenarios/chain5.yaml          build the lab (namespaces, links, routes)
  sfclab ls                                list labs
  sfclab inspect chain5 --json             nodes, interfaces, addresses, routes, bridges
  sfclab exec chain5 src -- ping -c 3 198.18.3.2
  sfclab graph chain5 --format mermaid
  sfclab chain ls sfcweb                   chains of a lab with chains (see chain --help)
  sfclab host ls sfcweb                    hosts: capacity, use, functions (see host --help)
  sfclab traffic iperf chain5 --from src --to dst --flows 4 --json
  sfclab traffic ndr chain5 --from src --to dst --size 64
  sfclab run scenarios/demo-chain-length.yaml --db results.db
  sfclab report --db results.db --out report/
  sfclab down chain5                       remove it completely (no file needed)
  sfclab image build                       container images from recipes (see image --help)
"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]  # bad options: exit 2
        self.print_usage(sys.stderr)
        raise SystemExit(fail(f"{message}", ExitStatus.BAD_INPUT))


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="sfclab", description="Build, steer and benchmark service function chains "
                "of namespaced network functions.", epilog=EXAMPLES,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"sfclab {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND", parser_class=_Parser)

    def add(name: str, fn: Callable[[argparse.Namespace], int], help: str, example: str,
            json_flag: bool = True) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help, description=help, epilog="example:\n  " + example,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        sp.set_defaults(fn=fn)
        if json_flag:
            sp.add_argument("--json", action="store_true", help="print JSON")
        return sp

    lab.register(sub, add)
    chain.register(sub, add)
    host.register(sub, add)
    measure.register(sub, add)
    experiments.register(sub, add)
    serve.register(sub, add)
    image.register(sub, add)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        a = parser.parse_args(argv)
    except SystemExit as e:
        return int(e.code or ExitStatus.OK)
    if not getattr(a, "fn", None):
        parser.print_help()
        return ExitStatus.BAD_INPUT
    process.interrupts_never_lost()  # Ctrl-C while a tool is forked still stops the command
    try:
        return a.fn(a)
    except SfclabError as e:
        if a.debug:
            import traceback  # light start-up: only with --debug
            traceback.print_exc()
        return fail(str(e), ExitStatus(e.exit_status))
    except KeyboardInterrupt:
        return fail("interrupted", ExitStatus.INTERRUPTED)
    except BrokenPipeError:
        return ExitStatus.OK
    except Exception as e:  # a bug: say so in one line; the traceback with --debug
        if a.debug:
            raise
        return fail(f"internal error: {type(e).__name__}: {e} (run with --debug for the "
                     "traceback)", ExitStatus.FAILURE)
