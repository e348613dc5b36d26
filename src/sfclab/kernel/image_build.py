"""Building and listing sfclab's images with podman (the recipes: :mod:`.image_recipes`).

Objects: a :class:`Runner` runs the commands (:class:`LocalRunner` for real, a fake in unit
tests), :func:`build` turns recipes into images, :func:`listing` says which are built.

- the root recipe: ``mmdebstrap --variant=apt --include=<packages> --format=tar <suite> -
  <mirror>`` piped into ``podman import`` (tagged, with a ``CMD`` of ``/bin/sh`` and a label
  holding a token of this build's own); if ``mmdebstrap`` fails, ``podman import`` may still
  have tagged the part it got: that image is removed, after its label proves this build made it;
- a derived recipe: ``podman build --network host --build-arg BASE=<base tag> -t <tag>
  <folder>`` (``--network host``: its ``RUN apt-get`` reaches Debian's archive as the machine's
  apt does; the build changes nothing in the machine's network); a recipe that takes files
  from this checkout (:mod:`.image_checkout`) is built from a temporary context: its folder
  and those files under ``checkout/``;
- an image whose tag ``podman image exists`` reports is skipped (cached): building an unchanged
  recipe again runs one ``podman image exists`` and one ``podman tag``;
- either way ``podman tag <tag> localhost/sfclab/<name>:latest`` points the name lab files use
  at the recipe's current version;
- one build at a time on the machine (:data:`LOCK_PATH`, an exclusive ``flock`` held for the
  whole of :func:`build`): two ``podman build`` runs of one recipe at once met podman's own race
  ("checking if cached image exists from a previous build: getting top layer info: layer not
  known"), and the second would build what the first was building; waiting, it finds the image
  built and takes it as cached.

podman runs with sfclab's own configuration (``CONTAINERS_CONF``, :func:`sfclab.kernel.podman.env`),
never the machine's ``/etc/containers`` settings alone, and uses the machine's image store, so
images built here are what ``podman images`` shows and what nodes run.
"""

from __future__ import annotations

import abc
import contextlib
import fcntl
import json
import secrets
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..errors import ToolError
from . import image_checkout, image_recipes, podman
from .image_recipes import Recipe

#: what a build says while it runs: (image name, a line of its tool's output)
Progress = Callable[[str, str], None]

@dataclass(frozen=True)
class Done:
    """How a command ended: its exit status, its standard output and its error output."""

    status: int
    stdout: str
    stderr: str


#: the machine's one image build at a time (beside sfclab's podman configuration)
LOCK_PATH = podman.CONF_PATH.parent / "image-build.lock"


class Runner(abc.ABC):
    """Runs the programs a build needs (argv lists, never shell strings)."""

    @contextlib.contextmanager
    def exclusive(self, waiting: Callable[[], None]) -> Iterator[None]:
        """The build's turn on the machine (``waiting`` called first if another holds it);
        this default holds nothing (a fake runner's)."""
        yield

    @abc.abstractmethod
    def run(self, argv: list[str], on_line: Callable[[str], None] | None = None) -> Done:
        """Run ``argv``; each line it writes to stderr or stdout goes to ``on_line`` as it
        comes (when given)."""

    @abc.abstractmethod
    def pipe(self, producer: list[str], consumer: list[str],
             on_line: Callable[[str], None] | None = None) -> Done:
        """Run ``producer | consumer``; the status is the first nonzero of the two (the
        producer's first), the stderr lines of both go to ``on_line``."""


def _pump(stream: IO[bytes], sink: list[str], on_line: Callable[[str], None] | None) -> None:
    for raw in stream:
        line = raw.decode("utf-8", "replace").rstrip("\n")
        sink.append(line)
        if on_line is not None:
            on_line(line)


class LocalRunner(Runner):
    """Runs on this machine, podman with sfclab's configuration."""

    @contextlib.contextmanager
    def exclusive(self, waiting: Callable[[], None]) -> Iterator[None]:
        LOCK_PATH.parent.mkdir(parents=True, exist_ok=True)
        with open(LOCK_PATH, "a") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                waiting()
                fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _start(self, argv: list[str], **kw: Any) -> subprocess.Popen[bytes]:
        try:
            return subprocess.Popen(argv, env=podman.env(), stderr=subprocess.PIPE, **kw)
        except FileNotFoundError:
            raise ToolError(argv, 127, f"{argv[0]}: not installed (make setup installs it)") \
                from None

    def run(self, argv: list[str], on_line: Callable[[str], None] | None = None) -> Done:
        p = self._start(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        assert p.stdout is not None and p.stderr is not None
        out: list[str] = []
        err: list[str] = []
        t = threading.Thread(target=_pump, args=(p.stderr, err, on_line), daemon=True)
        t.start()
        _pump(p.stdout, out, on_line)  # both as they come: podman build says STEP on stdout
        status = p.wait()
        t.join()
        return Done(status, "\n".join(out), "\n".join(err))

    def pipe(self, producer: list[str], consumer: list[str],
             on_line: Callable[[str], None] | None = None) -> Done:
        first = self._start(producer, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        try:
            second = self._start(consumer, stdin=first.stdout, stdout=subprocess.PIPE)
        except BaseException:
            first.kill()
            first.wait()
            raise
        assert first.stdout is not None and first.stderr is not None
        assert second.stdout is not None and second.stderr is not None
        first.stdout.close()  # the consumer holds it now: the producer sees EPIPE if it dies
        err1: list[str] = []
        err2: list[str] = []
        pumps = [threading.Thread(target=_pump, args=(first.stderr, err1, on_line), daemon=True),
                 threading.Thread(target=_pump, args=(second.stderr, err2, on_line),
                                  daemon=True)]
        for t in pumps:
            t.start()
        out = second.stdout.read().decode("utf-8", "replace")
        s2 = second.wait()
        s1 = first.wait()
        for t in pumps:
            t.join()
        if s1 != 0:
            return Done(s1, out, "\n".join(err1))
        return Done(s2, out, "\n".join(err2))


def _check(argv: list[str], done: Done) -> Done:
    if done.status != 0:
        raise ToolError(argv, done.status, done.stderr or done.stdout)
    return done


def exists(runner: Runner, tag: str) -> bool:
    """Whether podman's store has an image with ``tag``."""
    argv = ["podman", "image", "exists", tag]
    done = runner.run(argv)
    if done.status not in (0, 1):
        _check(argv, done)
    return done.status == 0


def _latest(runner: Runner, r: Recipe) -> None:
    argv = ["podman", "tag", r.tag, r.latest]
    _check(argv, runner.run(argv))


#: the label that proves which build made an image (a token of that build's own)
BUILD_LABEL = "sfclab.build"


def root_commands(recipe: Recipe, token: str) -> tuple[list[str], list[str]]:
    """The two commands piped together to make the root image; the image carries
    :data:`BUILD_LABEL` ``=token``."""
    producer = ["mmdebstrap", "--variant=apt", "--include=" + ",".join(recipe.packages),
                "--format=tar", image_recipes.SUITE, "-", image_recipes.MIRROR]
    consumer = ["podman", "import", "--change", 'CMD ["/bin/sh"]',
                "--change", f"LABEL {BUILD_LABEL}={token}",
                "--message", f"sfclab recipe {recipe.name} {recipe.version}", "-", recipe.tag]
    return producer, consumer


def _discard_partial(runner: Runner, tag: str, token: str) -> None:
    """After a failed root build: if ``podman import`` tagged what it got of a broken stream,
    remove that image -- only when it carries this build's token (never another's image) --
    so that the next build does not take it for a cached one."""
    argv = ["podman", "image", "inspect", "--format",
            "{{index .Config.Labels \"" + BUILD_LABEL + "\"}}", tag]
    done = runner.run(argv)
    if done.status == 0 and done.stdout.strip() == token:
        runner.run(["podman", "image", "rm", tag])


def derived_command(recipe: Recipe, base: Recipe, context: Path | None = None) -> list[str]:
    """The ``podman build`` that makes a derived image on ``base`` (from ``context``, by
    default the recipe's folder)."""
    context = context or recipe.folder
    return ["podman", "build", "--network", "host", "--pull=never",
            "--build-arg", f"BASE={base.tag}", "--label", f"sfclab.recipe={recipe.name}",
            "--label", f"sfclab.version={recipe.version}", "-t", recipe.tag,
            "-f", str(context / image_recipes.CONTAINERFILE), str(context)]


def _derived(runner: Runner, recipe: Recipe, base: Recipe, say: Callable[[str], None]) -> None:
    """Build derived ``recipe``; one that takes files from the checkout from a temporary
    context holding them (removed after)."""
    if recipe.staged is None:
        argv = derived_command(recipe, base)
        _check(argv, runner.run(argv, say))
        return
    with tempfile.TemporaryDirectory(prefix=f"sfclab-image-{recipe.name}-") as tmp:
        context = Path(tmp) / "context"
        image_checkout.stage(recipe.staged, recipe.folder, context)
        argv = derived_command(recipe, base, context)
        _check(argv, runner.run(argv, say))


def build(recipes: Iterable[Recipe], runner: Runner | None = None,
          progress: Progress | None = None) -> list[dict[str, Any]]:
    """Build each recipe whose tag the store lacks (the root recipe must come first when it is
    among them; it is the base of the rest).  One row per recipe: name, tag, ``built`` (False:
    it was cached) and seconds."""
    runner = runner or LocalRunner()
    recipes = list(recipes)

    def waiting() -> None:
        if progress is not None and recipes:
            progress(recipes[0].name, "waiting for another image build on this machine")

    with runner.exclusive(waiting):
        return _build(recipes, runner, progress)


def _build(recipes: list[Recipe], runner: Runner, progress: Progress | None
           ) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    base: Recipe | None = None
    for r in recipes:
        if r.root:
            base = r
        t0 = time.monotonic()
        if exists(runner, r.tag):
            _latest(runner, r)
            rows.append({"name": r.name, "tag": r.tag, "latest": r.latest, "built": False,
                         "seconds": 0.0})
            continue

        def say(line: str, name: str = r.name) -> None:
            if progress is not None and line.strip():
                progress(name, line)

        if progress is not None:
            progress(r.name, f"building {r.tag}")
        if r.root:
            token = secrets.token_hex(8)
            producer, consumer = root_commands(r, token)
            done = runner.pipe(producer, consumer, say)
            if done.status != 0:
                _discard_partial(runner, r.tag, token)
            _check(producer + ["|"] + consumer, done)
        else:
            if base is None:
                raise ValueError("the root recipe must be built before derived ones")
            _derived(runner, r, base, say)
        _latest(runner, r)
        rows.append({"name": r.name, "tag": r.tag, "latest": r.latest, "built": True,
                     "seconds": round(time.monotonic() - t0, 3)})
    return rows


#: podman's words when an image it was listing was removed meanwhile (a build discarding its
#: partial image, ``podman rmi`` elsewhere): the listing is asked again, up to LIST_TRIES times
GONE_WHILE_LISTED = "image not known"
LIST_TRIES = 3


def listing(recipes: Iterable[Recipe], runner: Runner | None = None) -> dict[str, Any]:
    """Each recipe with its tag and whether it is built (its size and creation time then), and
    the other ``localhost/sfclab/`` images in the store (earlier versions of recipes)."""
    runner = runner or LocalRunner()
    argv = ["podman", "images", "--format", "json",
            "--filter", f"reference={image_recipes.REPOSITORY}/*"]
    for _ in range(LIST_TRIES):
        done = runner.run(argv)
        if done.status == 0 or GONE_WHILE_LISTED not in done.stderr:
            break
    stored = json.loads(_check(argv, done).stdout or "[]")
    by_tag: dict[str, dict[str, Any]] = {}
    for img in stored:
        for name in img.get("Names") or []:
            by_tag[name] = img
    rows, current = [], set()
    for r in recipes:
        current.add(r.tag)
        img = by_tag.get(r.tag)
        rows.append({"name": r.name, "tag": r.tag, "version": r.version,
                     "built": img is not None, "size": img.get("Size") if img else None,
                     "created": img.get("CreatedAt") if img else None,
                     "description": r.description, "recipe": str(r.folder)})
    others = sorted(t for t in by_tag if t not in current and not t.endswith(":latest"))
    return {"images": rows, "other_tags": others}
