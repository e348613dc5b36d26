"""Image recipes and the image builder without root or podman: the recipe table (the
repository's recipes, a user's beside them, names refused), the version from content, and the
command lines the builder runs, through a fake :class:`~sfclab.kernel.image_build.Runner`."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sfclab.cli import main
from sfclab.cli.status import ExitStatus
from sfclab.errors import SpecError, ToolError
from sfclab.kernel import image_build, image_recipes
from sfclab.kernel.image_build import Done, Runner

BUILTIN = image_recipes.builtin_dir()


class FakeRunner(Runner):
    """Records every command; ``present`` is the fake store's tags (a build adds its tag)."""

    def __init__(self, present: set[str] | None = None, fail: str | None = None):
        self.present = set(present or ())
        self.fail = fail
        self.calls: list[list[str]] = []

    def run(self, argv: list[str], on_line: Callable[[str], None] | None = None) -> Done:
        self.calls.append(argv)
        if argv[:3] == ["podman", "image", "exists"]:
            return Done(0 if argv[3] in self.present else 1, "", "")
        if argv[:2] == ["podman", "tag"]:
            self.present.add(argv[3])
            return Done(0 if argv[2] in self.present else 125, "", "")
        if argv[:2] == ["podman", "images"]:
            rows = [{"Names": [t], "Size": 1000, "CreatedAt": "now"} for t in self.present]
            import json
            return Done(0, json.dumps(rows), "")
        if on_line is not None:
            on_line("STEP 1/2: FROM ...")
        if self.fail and self.fail in argv[argv.index("-t") + 1]:
            return Done(1, "", "Error: building at STEP 2: exit status 100")
        self.present.add(argv[argv.index("-t") + 1])
        return Done(0, "", "")

    def pipe(self, producer: list[str], consumer: list[str],
             on_line: Callable[[str], None] | None = None) -> Done:
        self.calls.append(producer + ["|"] + consumer)
        self.present.add(consumer[-1])
        return Done(0, "", "")


class BrokenStream(FakeRunner):
    """mmdebstrap fails midway but podman import tags what it got, labelled ``made_by``
    (``None``: with the token of the build that ran it)."""

    def __init__(self, made_by: str | None = None):
        super().__init__()
        self.made_by = made_by
        self.token = ""

    def pipe(self, producer: list[str], consumer: list[str],
             on_line: Callable[[str], None] | None = None) -> Done:
        super().pipe(producer, consumer, on_line)
        label = next(c for c in consumer if c.startswith("LABEL sfclab.build="))
        self.token = label.split("=", 1)[1]
        return Done(100, "", "E: mmdebstrap failed to download packages")

    def run(self, argv: list[str], on_line: Callable[[str], None] | None = None) -> Done:
        if argv[:3] == ["podman", "image", "inspect"]:
            self.calls.append(argv)
            return Done(0, (self.made_by or self.token) + "\n", "")
        if argv[:3] == ["podman", "image", "rm"]:
            self.calls.append(argv)
            self.present.discard(argv[3])
            return Done(0, "", "")
        return super().run(argv, on_line)


@pytest.fixture(autouse=True)
def no_user_recipes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SFCLAB_IMAGES", raising=False)


def copy_builtin(to: Path) -> Path:
    shutil.copytree(BUILTIN, to)
    return to


# ------------------------------------------------------------------ the recipe table

def test_the_repository_holds_the_four_recipes_base_first() -> None:
    t = image_recipes.table()
    assert list(t)[0] == "base" and {"base", "haproxy", "frr", "squid"} <= set(t)
    assert {"iproute2", "nftables", "iperf3", "iputils-ping", "procps"} <= set(t["base"].packages)
    for name in ("haproxy", "frr", "squid"):
        r = t[name]
        assert r.tag == f"localhost/sfclab/{name}:{r.version}" and len(r.version) == 12
        assert name.lower() in (r.folder / "Containerfile").read_text().lower()
        assert r.description  # the recipe's first comment lines
    assert "ospfd=yes" in (t["frr"].folder / "daemons").read_text().splitlines()


def test_version_follows_content_and_the_base(tmp_path: Path) -> None:
    before = image_recipes.table([copy_builtin(tmp_path / "images")])
    again = image_recipes.table([tmp_path / "images"])
    assert {n: r.tag for n, r in before.items()} == {n: r.tag for n, r in again.items()}
    conf = tmp_path / "images" / "squid" / "squid.conf"
    conf.write_text(conf.read_text() + "# one more line\n")
    changed = image_recipes.table([tmp_path / "images"])
    assert changed["squid"].version != before["squid"].version
    assert changed["haproxy"].version == before["haproxy"].version
    # a file's mode is content too
    start = tmp_path / "images" / "frr" / "start-frr"
    start.chmod(0o644)
    assert image_recipes.table([tmp_path / "images"])["frr"].version != before["frr"].version
    # a change in the base changes every image that stands on it
    pk = tmp_path / "images" / "base" / "packages"
    pk.write_text(pk.read_text() + "curl\n")
    rebased = image_recipes.table([tmp_path / "images"])
    assert all(rebased[n].version != changed[n].version for n in ("base", "haproxy", "squid"))


def test_a_users_recipes_join_the_table_and_a_name_twice_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mine = tmp_path / "mine"
    (mine / "echo").mkdir(parents=True)
    (mine / "echo" / "Containerfile").write_text(
        "# my echo server\nARG BASE\nFROM ${BASE}\nCMD [\"sleep\", \"1\"]\n")
    monkeypatch.setenv("SFCLAB_IMAGES", str(mine))
    t = image_recipes.table()
    assert t["echo"].description == "my echo server" and "haproxy" in t
    (mine / "haproxy").mkdir()
    (mine / "haproxy" / "Containerfile").write_text("ARG BASE\nFROM ${BASE}\n")
    with pytest.raises(SpecError, match="recipe 'haproxy' is given twice"):
        image_recipes.table()


@pytest.mark.parametrize("name, files, expected", [
    ("Bad_Name", {"Containerfile": "ARG BASE\nFROM ${BASE}\n"}, "folder name matching"),
    ("nobase", {"Containerfile": "FROM debian:12\n"}, "begin 'ARG BASE'"),
    ("empty", {"README": "hello"}, "expected a Containerfile"),
])
def test_a_bad_recipe_is_refused_naming_its_file(tmp_path: Path, name: str,
                                                 files: dict[str, str], expected: str) -> None:
    d = copy_builtin(tmp_path / "images")
    (d / name).mkdir()
    for f, text in files.items():
        (d / name / f).write_text(text)
    with pytest.raises(SpecError, match=expected) as e:
        image_recipes.table([d])
    assert name in str(e.value)


def test_a_bad_package_name_in_the_base_names_the_line(tmp_path: Path) -> None:
    d = copy_builtin(tmp_path / "images")
    (d / "base" / "packages").write_text("iproute2\n../../etc\n")
    with pytest.raises(SpecError, match=r"packages:2: expected a Debian package name"):
        image_recipes.table([d])


def test_a_recipe_too_big_is_refused_before_it_is_read(tmp_path: Path) -> None:
    d = copy_builtin(tmp_path / "images")
    (d / "haproxy" / "blob").write_bytes(b"x" * (image_recipes.MAX_BYTES + 1))
    with pytest.raises(SpecError, match="at most"):
        image_recipes.table([d])


def test_pick_puts_the_base_first_and_refuses_a_path() -> None:
    t = image_recipes.table()
    assert [r.name for r in image_recipes.pick(t, ["squid"])] == ["base", "squid"]
    assert [r.name for r in image_recipes.pick(t, [])] == list(t)
    for bad in ("../images/base", "/etc", "nope"):
        with pytest.raises(SpecError, match="expected an image recipe name"):
            image_recipes.pick(t, ["base", bad])


# ------------------------------------------------------------------ the builder's commands

def test_build_runs_mmdebstrap_into_podman_import_then_podman_build() -> None:
    t = image_recipes.table()
    runner = FakeRunner()
    said: list[tuple[str, str]] = []
    rows = image_build.build(image_recipes.pick(t, ["haproxy"]), runner,
                             lambda n, line: said.append((n, line)))
    assert [r["built"] for r in rows] == [True, True]
    base, hap = t["base"], t["haproxy"]
    assert runner.calls[0] == ["podman", "image", "exists", base.tag]
    pipe = runner.calls[1]
    producer, consumer = pipe[:pipe.index("|")], pipe[pipe.index("|") + 1:]
    assert producer[:2] == ["mmdebstrap", "--variant=apt"]
    assert "--include=" + ",".join(base.packages) in producer
    assert producer[-3:] == ["bookworm", "-", "http://deb.debian.org/debian"]
    assert consumer[:2] == ["podman", "import"] and consumer[-2:] == ["-", base.tag]
    assert runner.calls[2] == ["podman", "tag", base.tag, "localhost/sfclab/base:latest"]
    assert runner.calls[3] == ["podman", "image", "exists", hap.tag]
    argv = runner.calls[4]
    assert argv[:2] == ["podman", "build"]
    assert argv[argv.index("--build-arg") + 1] == f"BASE={base.tag}"
    assert argv[argv.index("-t") + 1] == hap.tag and argv[-1] == str(hap.folder)
    assert argv[argv.index("--network") + 1] == "host" and "--pull=never" in argv
    assert ("haproxy", f"building {hap.tag}") in said and ("haproxy", "STEP 1/2: FROM ...") in said
    assert runner.calls[5] == ["podman", "tag", hap.tag, "localhost/sfclab/haproxy:latest"]
    assert rows[1]["latest"] == "localhost/sfclab/haproxy:latest"


def test_an_unchanged_recipe_is_cached_and_not_rebuilt() -> None:
    t = image_recipes.table()
    runner = FakeRunner()
    image_build.build(image_recipes.pick(t, []), runner)
    runner.calls.clear()
    rows = image_build.build(image_recipes.pick(t, []), runner)
    assert not any(r["built"] for r in rows)
    assert [c[:2] for c in runner.calls] == [["podman", "image"], ["podman", "tag"]] * len(t)


def test_a_failed_build_raises_with_podmans_words() -> None:
    t = image_recipes.table()
    runner = FakeRunner(present={t["base"].tag}, fail="squid")
    with pytest.raises(ToolError, match="exit status 100"):
        image_build.build(image_recipes.pick(t, ["squid"]), runner)


@pytest.mark.parametrize("made_by, removed", [(None, True), ("another-build", False)])
def test_a_broken_base_stream_leaves_no_image_it_made(made_by: str | None,
                                                      removed: bool) -> None:
    base = image_recipes.table()["base"]
    runner = BrokenStream(made_by)
    with pytest.raises(ToolError, match="failed to download"):
        image_build.build([base], runner)
    assert ["podman", "image", "rm", base.tag] in runner.calls if removed else \
        not any(c[:3] == ["podman", "image", "rm"] for c in runner.calls)
    assert (base.tag in runner.present) is not removed


def test_listing_says_which_are_built_and_names_older_versions() -> None:
    t = image_recipes.table()
    runner = FakeRunner(present={t["base"].tag, "localhost/sfclab/squid:000000000000"})
    d = image_build.listing(t.values(), runner)
    built = {r["name"]: r["built"] for r in d["images"]}
    assert built["base"] and not built["squid"]
    assert d["other_tags"] == ["localhost/sfclab/squid:000000000000"]



class RemovedWhileListed(FakeRunner):
    """``podman images`` fails ``failures`` times as it does when an image it listed is removed
    before it read it, then answers."""

    def __init__(self, failures: int, **kw: Any):
        super().__init__(**kw)
        self.failures = failures

    def run(self, argv: list[str], on_line: Callable[[str], None] | None = None) -> Done:
        if argv[:2] == ["podman", "images"] and self.failures:
            self.failures -= 1
            self.calls.append(argv)
            return Done(125, "", 'Error: retrieving label for image "5f78": image not known')
        return super().run(argv, on_line)


def test_listing_asks_again_when_an_image_goes_while_listed() -> None:
    t = image_recipes.table()
    runner = RemovedWhileListed(image_build.LIST_TRIES - 1, present={t["base"].tag})
    d = image_build.listing(t.values(), runner)
    assert {r["name"]: r["built"] for r in d["images"]}["base"]
    assert sum(c[:2] == ["podman", "images"] for c in runner.calls) == image_build.LIST_TRIES


def test_listing_gives_up_after_its_tries() -> None:
    t = image_recipes.table()
    runner = RemovedWhileListed(image_build.LIST_TRIES, present={t["base"].tag})
    with pytest.raises(ToolError, match="image not known"):
        image_build.listing(t.values(), runner)
    assert sum(c[:2] == ["podman", "images"] for c in runner.calls) == image_build.LIST_TRIES


# ------------------------------------------------------------------ the command line

def test_image_build_refuses_a_name_not_in_the_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["image", "build", "base", "../../etc"]) == ExitStatus.BAD_INPUT
    err = capsys.readouterr().err
    assert "expected an image recipe name" in err and "'../../etc'" in err


def test_image_without_a_subcommand_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["image"]) == ExitStatus.BAD_INPUT
    assert "build" in capsys.readouterr().out


def test_one_image_build_at_a_time_on_the_machine(tmp_path: Path, monkeypatch) -> None:
    """Two builds at once (two commands, or a test beside a command) take turns: the second
    says it waits and starts only when the first has ended (podman raced with itself when two
    builds of one recipe ran together)."""
    import threading
    import time

    monkeypatch.setattr(image_build, "LOCK_PATH", tmp_path / "lock")
    order: list[str] = []
    said: list[str] = []
    inside = threading.Event()

    def first() -> None:
        with image_build.LocalRunner().exclusive(lambda: order.append("first waited")):
            order.append("first in")
            inside.set()
            time.sleep(0.3)
            order.append("first out")

    t = threading.Thread(target=first)
    t.start()
    assert inside.wait(5)
    with image_build.LocalRunner().exclusive(lambda: said.append("waiting")):
        order.append("second in")
    t.join()
    assert order == ["first in", "first out", "second in"] and said == ["waiting"]
