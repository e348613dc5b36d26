"""sfclab's images, built by ``sfclab image build`` with the real podman and Debian's archive:
an unchanged recipe is not built again, and each image runs its program.

A recipe of this test's own (a unique name in a directory of ``$SFCLAB_IMAGES``) shows the cache:
built the first time, cached the second (one ``podman image exists``, the same image ID), built
again once its content changes; its images are removed at the end by their tags, which only
this test made."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from sfclab.kernel import image_recipes, podman

pytestmark = pytest.mark.long  # the first build on a fresh machine takes about half a minute

ROOT = Path(__file__).resolve().parents[2]


def sfclab(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sfclab.cli", *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=900)


def image_id(tag: str) -> str:
    return subprocess.run(["podman", "image", "inspect", "--format", "{{.Id}}", tag],
                          capture_output=True, text=True, env=podman.env(),
                          check=True).stdout.strip()


def root_network() -> tuple[str, list[str], str]:
    """What a build must never change in the root namespace: ``ip_forward``, its interfaces
    and its iptables rules (podman's own bridge network would change all three)."""
    forward = Path("/proc/sys/net/ipv4/ip_forward").read_text().strip()
    links = sorted(p.name for p in Path("/sys/class/net").iterdir()
                   if not p.name.startswith(("veth", "sfc")))  # other tests' lab ends come and go
    rules = "".join(subprocess.run(["iptables", "-t", table, "-S"], capture_output=True,
                                   text=True, check=False).stdout for table in ("filter", "nat"))
    return forward, links, rules


def test_a_recipe_is_built_once_then_cached_until_it_changes(tmp_path: Path) -> None:
    root_before = root_network()
    name = f"t{secrets.token_hex(4)}"
    (tmp_path / name).mkdir()
    cf = tmp_path / name / "Containerfile"
    cf.write_text(f"# a test's own image\nARG BASE\nFROM ${{BASE}}\nRUN echo {name} > /token\n")
    env = {**os.environ, "SFCLAB_IMAGES": str(tmp_path)}
    tags: list[str] = []
    try:
        first = sfclab("image", "build", name, "--json", env=env)
        assert first.returncode == 0, first.stderr
        rows = {r["name"]: r for r in json.loads(first.stdout)}
        assert rows[name]["built"] is True and f"{name}: STEP" in first.stderr  # progress
        tag = rows[name]["tag"]
        tags.append(tag)
        built_id = image_id(tag)
        second = sfclab("image", "build", name, "--json", env=env)
        assert second.returncode == 0, second.stderr
        again = {r["name"]: r for r in json.loads(second.stdout)}
        assert again[name] == {**rows[name], "built": False, "seconds": 0.0}
        assert again["base"]["built"] is False and image_id(tag) == built_id
        assert image_id(rows[name]["latest"]) == built_id
        listed = json.loads(sfclab("image", "ls", "--json", env=env).stdout)
        assert {r["name"]: r["built"] for r in listed["images"]}[name] is True

        cf.write_text(cf.read_text() + "RUN echo changed >> /token\n")
        third = sfclab("image", "build", name, "--json", env=env)
        assert third.returncode == 0, third.stderr
        new = {r["name"]: r for r in json.loads(third.stdout)}[name]
        tags.append(new["tag"])
        assert new["built"] is True and new["tag"] != tag
        assert image_id(new["latest"]) == image_id(new["tag"]) != built_id
        assert root_network() == root_before  # the RUN steps changed nothing of the machine's
    finally:
        tags.append(f"{image_recipes.REPOSITORY}/{name}:latest")
        for t in tags:
            subprocess.run(["podman", "rmi", "--", t], capture_output=True, env=podman.env())


def test_building_base_again_is_cached() -> None:
    base = image_recipes.table()["base"]
    first = sfclab("image", "build", "base", "--json")  # built here if the machine lacks it
    assert first.returncode == 0, first.stderr
    built_id = image_id(base.tag)
    second = sfclab("image", "build", "base", "--json")
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout) == [{"name": "base", "tag": base.tag, "built": False,
                                          "latest": base.latest, "seconds": 0.0}]
    assert image_id(base.tag) == built_id and "building" not in second.stderr


@pytest.mark.parametrize("image, argv, says", [
    ("base", ["iperf3", "-v"], "iperf 3."),
    ("base", ["nft", "--version"], "nftables v"),
    ("base", ["ping", "-V"], "iputils"),
    ("haproxy", ["haproxy", "-v"], "HAProxy version 2.6"),
    ("frr", ["/usr/lib/frr/zebra", "-v"], "zebra version 8.4"),
    ("frr", ["/usr/lib/frr/ospfd", "-v"], "ospfd version 8.4"),
    ("squid", ["squid", "-v"], "Squid Cache: Version 5.7"),
])
def test_each_image_runs_its_program(image: str, argv: list[str], says: str) -> None:
    tag = image_recipes.table()[image].tag
    built = sfclab("image", "build", image, "--quiet")
    assert built.returncode == 0, built.stderr
    ran = subprocess.run(["podman", "run", "--rm", "--network", "none", "--pull", "never", "--",
                          tag, *argv], capture_output=True, text=True, env=podman.env(),
                         timeout=120)
    assert ran.returncode == 0 and says in ran.stdout + ran.stderr, ran.stderr


def test_the_frr_image_starts_ospfd_with_the_capabilities_its_recipe_names() -> None:
    tag = image_recipes.table()["frr"].tag
    assert sfclab("image", "build", "frr", "--quiet").returncode == 0
    cid = subprocess.run(["podman", "run", "--detach", "--network", "none", "--pull", "never",
                          "--cap-add", "NET_ADMIN,NET_RAW,SYS_ADMIN", "--", tag],
                         capture_output=True, text=True, env=podman.env(),
                         check=True).stdout.strip()
    try:
        import time
        deadline = time.monotonic() + 20
        daemons = ""
        while time.monotonic() < deadline and "ospfd" not in daemons.split():
            time.sleep(0.5)
            daemons = subprocess.run(["podman", "exec", cid, "vtysh", "-c", "show daemons"],
                                     capture_output=True, text=True, env=podman.env()).stdout
        assert {"zebra", "ospfd", "staticd"} <= set(daemons.split()), daemons
    finally:
        subprocess.run(["podman", "rm", "--force", "--time", "5", cid], capture_output=True,
                       env=podman.env())
