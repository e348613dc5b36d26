"""``sfclab image build | ls``: sfclab's container images (the library:
:mod:`sfclab.kernel.image_recipes` for the recipe table, :mod:`sfclab.kernel.image_build` for
podman; this file only parses and prints)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

from .output import emit
from .status import ExitStatus

EXAMPLES = """\
examples:
  sfclab image ls                       the recipes, their tags, which are built
  sfclab image build base               build the base image (about 20 s the first time)
  sfclab image build                    build every recipe's image (cached: a no-op when built)
  sfclab image ls --json
(recipes: images/<name>/ in the repository and the folders of $SFCLAB_IMAGES;
 see docs/containers.md)
"""


def _mb(n: int | None) -> str:
    return "-" if n is None else f"{n / 1e6:.0f} MB"


def _ls_text(d: dict[str, Any]) -> str:
    lines = [f"{'IMAGE':<10} {'TAG':<40} {'BUILT':<5} {'SIZE':>8}  DESCRIPTION"]
    for r in d["images"]:
        desc = r["description"]
        lines.append(f"{r['name']:<10} {r['tag']:<40} {'yes' if r['built'] else 'no':<5} "
                     f"{_mb(r['size']):>8}  {desc[:60] + ('...' if len(desc) > 60 else '')}")
    if d["other_tags"]:
        lines.append("other versions in the store: " + ", ".join(d["other_tags"]))
    return "\n".join(lines)


def _printer() -> Callable[[str, str], None]:
    t0 = time.monotonic()

    def say(name: str, line: str) -> None:
        print(f"  [{time.monotonic() - t0:6.1f}s] {name}: {line}", file=sys.stderr, flush=True)

    return say


def cmd_build(a: argparse.Namespace) -> int:
    from ..kernel import image_build, image_recipes  # light start-up

    chosen = image_recipes.pick(image_recipes.table(), a.names)
    rows = image_build.build(chosen, progress=None if a.quiet else _printer())
    emit(rows, a.json, lambda rows: "\n".join(
        f"{r['name']}: {r['tag']} " + (f"built in {r['seconds']:.1f} s" if r["built"]
                                       else "(cached)") for r in rows))
    return ExitStatus.OK


def cmd_ls(a: argparse.Namespace) -> int:
    from ..kernel import image_build, image_recipes  # light start-up

    emit(image_build.listing(image_recipes.table().values()), a.json, _ls_text)
    return ExitStatus.OK


def _group_help(a: argparse.Namespace) -> int:
    a.parser.print_help()
    return ExitStatus.BAD_INPUT


def register(sub: Any, add: Callable[..., argparse.ArgumentParser]) -> None:
    """The ``image`` command group."""
    sp = add("image", _group_help, "container images built from recipes: build, list",
             "sfclab image ls", json_flag=False)
    sp.epilog = EXAMPLES
    sp.set_defaults(parser=sp)
    inner = sp.add_subparsers(dest="image_cmd", metavar="SUBCOMMAND", parser_class=type(sp))

    def one(name: str, fn: Callable[[argparse.Namespace], int], help: str,
            example: str) -> argparse.ArgumentParser:
        p = inner.add_parser(name, help=help, description=help, epilog="example:\n  " + example,
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        p.set_defaults(fn=fn)
        p.add_argument("--json", action="store_true", help="print JSON")
        return p

    p = one("build", cmd_build, "build the images of the recipes named (all when none), each "
            "only if its tag is not in the store already", "sfclab image build base haproxy")
    p.add_argument("names", nargs="*", metavar="NAME",
                   help="a recipe's name (see 'sfclab image ls'), never a path")
    p.add_argument("--quiet", action="store_true",
                   help="print no progress lines on stderr while building")
    one("ls", cmd_ls, "the recipes, their tags and which are built", "sfclab image ls --json")
