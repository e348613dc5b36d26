"""Bounds before work on a real lab: ``chain classify`` checks the whole file against the maps
before it writes and writes all or nothing (also when the kernel refuses midway), reads a pipe
once and records it before writing; ``chain add`` and ``up`` count a chain's paths and labels
before they make anything.  Each refusal: exit 2, the place and the limit named, nothing made
(no map entry, no record, no namespace, no state directory, no lock file).

Commands that ran away before these bounds run in a child with a memory cap and a timeout.
"""

from __future__ import annotations

import json
import os
import resource
import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from sfclab.api import Lab
from sfclab.errors import RealizeError
from sfclab.realize.dataplane import DataPlane
from sfclab.realize.state import LabState, labs_dir
from sfclab.spec.limits import MAX_CLASSES, MAX_MASKS
from sfclab.live import record

FW = {"kind": "firewall", "rules": []}
CLI = [sys.executable, "-m", "sfclab.cli"]


def _capped() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def sfclab(*argv: str, stdin: bytes | None = None, timeout: float = 120
           ) -> subprocess.CompletedProcess[str]:
    cp = subprocess.run([*CLI, *argv], input=stdin, capture_output=True, timeout=timeout,
                        preexec_fn=_capped)
    return subprocess.CompletedProcess(cp.args, cp.returncode, cp.stdout.decode(),
                                       cp.stderr.decode())


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    d = {"name": "b" + secrets.token_hex(3),
         "nodes": {"src": {"kind": "host"}, "f1": FW, "r1": {"kind": "router"},
                   "dst": {"kind": "host"}},
         "links": [{"endpoints": ["src", "f1"]}, {"endpoints": ["f1", "r1"]},
                   {"endpoints": ["r1", "dst"]}],
         "chains": {"c": {"classifiers": [{"ingress": "src", "proto": "udp", "dport": 7000}],
                          "functions": ["f1"], "egress": "dst"}}}
    lab = Lab.from_dict(d, source="test_bounds")
    lab.up()
    try:
        yield lab
    finally:
        lab.down()


def maps(lab: Lab) -> tuple[dict[bytes, bytes], list[Any]]:
    with DataPlane(lab.name) as dp:
        return dp.maps["sfc_classes"].items(), dp.masks()


def netns_list(lab: str) -> set[str]:
    """The namespaces of lab ``lab`` (other labs may come and go meanwhile)."""
    names = os.listdir("/run/netns") if os.path.isdir("/run/netns") else []
    return {n for n in names if n.startswith(f"sfclab:{lab}:")}


def classifiers_file(tmp_path: Path, items: list[dict[str, Any]], name: str) -> Path:
    f = tmp_path / name
    f.write_text(json.dumps(items))
    return f


# ------------------------------------------------------------------------------ classify
def test_classify_past_the_map_is_refused_before_a_single_entry(lab: Lab,
                                                                  tmp_path: Path) -> None:
    # 18,750 classifiers of 16 entries each (ports 1-6 are 4 prefixes), 4 masks: 300,000
    items = [{"ingress": "src", "proto": "udp", "src": f"10.{i >> 16}.{(i >> 8) & 255}."
              f"{i & 255}/32", "sport": "1-6", "dport": "1-6"} for i in range(18_750)]
    f = classifiers_file(tmp_path, items, "many.json")
    before = maps(lab)
    cp = sfclab("chain", "classify", lab.name, "c", "--from-file", str(f))
    assert cp.returncode == 2, cp.stderr
    first_over = MAX_CLASSES // 16  # the classifier whose entries pass the map
    assert f"{f}: [{first_over}]: " in cp.stderr and f"at most {MAX_CLASSES:,}" in cp.stderr
    assert "Traceback" not in cp.stderr
    assert maps(lab) == before
    assert not record.classify_dir(LabState(lab.name), "c").exists()


def test_classify_past_the_mask_table_is_refused_before_a_single_mask(
        lab: Lab, tmp_path: Path) -> None:
    f = classifiers_file(tmp_path, [{"ingress": "src", "proto": "udp", "dport": 9000},
                                    {"ingress": "src", "proto": "tcp", "sport": "1-65534",
                                     "dport": "1-65534"}], "masks.json")
    before = maps(lab)
    cp = sfclab("chain", "classify", lab.name, "c", "--from-file", str(f))
    assert cp.returncode == 2, cp.stderr
    assert f"{f}: [1]: " in cp.stderr and f"at most {MAX_MASKS}" in cp.stderr, cp.stderr
    assert maps(lab) == before
    assert not record.classify_dir(LabState(lab.name), "c").exists()


@pytest.mark.parametrize("name", ["-", "/dev/stdin"])
def test_classify_from_a_pipe_reads_once_and_records_before_it_writes(
        lab: Lab, name: str) -> None:
    port = 9100 if name == "-" else 9200
    text = "".join(f"- {{ingress: src, proto: udp, dport: {port + k}}}\n"
                   for k in range(3)).encode()
    state = LabState(lab.name)
    notes = len(record.saved_classifiers(state, "c"))
    before, _ = maps(lab)
    cp = sfclab("chain", "classify", lab.name, "c", "--from-file", name, "--json", stdin=text)
    assert cp.returncode == 0, cp.stderr
    assert json.loads(cp.stdout)["entries"] == 3
    saved = record.saved_classifiers(state, "c")
    assert len(saved) == notes + 1
    note = saved[-1]
    assert note["status"] == "written" and note["entries"] == 3
    assert note["source"] == ("<stdin>" if name == "-" else name)
    assert Path(note["file"]).read_bytes() == text  # the bytes read once are the ones kept
    after, _ = maps(lab)
    assert len(after) == len(before) + 3


def test_a_kernel_refusal_midway_takes_out_everything_the_write_made(lab: Lab) -> None:
    sp = lab._plan().steering
    before, masks_before = maps(lab)
    room = MAX_CLASSES - len(before)
    # first the lab's own entry again (another priority: a replaced value), then one entry
    # more than the map has room for, under a mask no entry used yet
    rows = [("src", 0, 0, 0, 0, 0, 0, 7000, 16, 17, 9, 4)]
    rows += [("src", 0x0A000000 + i, 32, 0, 0, 0, 0, 9999, 16, 17, 0, 4)
             for i in range(room + 1)]
    with DataPlane(lab.name) as dp:
        with pytest.raises(RealizeError) as ei:
            dp.add_rows(sp.node_ids, 0, rows, order=4000)
    assert "sfc_classes" in str(ei.value)
    assert maps(lab) == (before, masks_before)


# ---------------------------------------------------------------------- chain add and up
def chain_file(tmp_path: Path, n: int, k: int) -> Path:
    f = tmp_path / f"chain-{n}x{k}.yaml"
    f.write_text(yaml.safe_dump({
        "name": "grow", "classifiers": [{"ingress": "src", "proto": "udp", "dport": 5004}],
        "egress": "dst", "functions": [{"name": f"g{i}", "kind": "firewall", "rules": [],
                                        "instances": k, "cpu": 0.01, "memory": "8M"}
                                       for i in range(n)]}))
    return f


@pytest.mark.parametrize("n, k, words", [(16, 3, "at most 8 functions"),
                                         (2, 9, "the groups make 81 paths")],
                         ids=["3^16", "9^2"])
def test_chain_add_counts_paths_and_labels_before_it_makes_anything(
        lab: Lab, tmp_path: Path, n: int, k: int, words: str) -> None:
    f = chain_file(tmp_path, n, k)
    state = LabState(lab.name)
    plan_before = (state.dir / "plan.json").read_bytes()
    spaces = netns_list(lab.name)
    cp = sfclab("chain", "add", lab.name, str(f), timeout=60)
    assert cp.returncode == 2, cp.stderr
    assert f"{f}:" in cp.stderr and " functions: " in cp.stderr and words in cp.stderr, cp.stderr
    assert record.load_addition(state, "grow") is None
    assert (state.dir / "plan.json").read_bytes() == plan_before
    assert netns_list(lab.name) == spaces


def test_up_counts_a_chain_before_it_plans_it(tmp_path: Path) -> None:
    name = "b" + secrets.token_hex(3)
    fns = {f"f{i}": FW for i in range(3)}
    lab_file = tmp_path / "grow.yaml"
    lab_file.write_text(yaml.safe_dump({
        "name": name, "nodes": {"src": {"kind": "host"}, "dst": {"kind": "host"}, **fns},
        "links": [{"endpoints": ["src", f]} for f in fns] +
                 [{"endpoints": [f, "dst"]} for f in fns],
        "groups": {"g": {"instances": list(fns)}},
        "chains": {"c": {"classifiers": [{"ingress": "src"}], "functions": ["g"] * 16,
                         "egress": "dst"}}}))
    for command in ("validate", "up"):
        cp = sfclab(command, str(lab_file), timeout=60)
        assert cp.returncode == 2, cp.stderr
        assert "chains.c.functions: " in cp.stderr and "at most 8 functions" in cp.stderr
    assert not (labs_dir() / name).exists() and not list(labs_dir().glob(f"{name}*"))
    assert netns_list(name) == set()


def test_chain_add_checks_the_live_mask_table_before_it_makes_anything(
        lab: Lab, tmp_path: Path) -> None:
    # 32 masks of its own (one per source prefix length) fit the table alone, not with the lab's
    f = tmp_path / "masks.yaml"
    f.write_text(yaml.safe_dump({
        "name": "wide", "egress": "dst",
        "classifiers": [{"ingress": "src", "proto": "udp", "src": f"0.0.0.0/{n}", "dport": 5004}
                        for n in range(1, 33)],
        "functions": [{"name": "w", "kind": "firewall", "rules": [], "cpu": 0.01,
                       "memory": "8M"}]}))
    state = LabState(lab.name)
    plan_before = (state.dir / "plan.json").read_bytes()
    spaces = netns_list(lab.name)
    before = maps(lab)
    cp = sfclab("chain", "add", lab.name, str(f), timeout=60)
    assert cp.returncode == 2, cp.stderr
    assert f"{f}: classifiers: " in cp.stderr and f"at most {MAX_MASKS}" in cp.stderr, cp.stderr
    assert record.load_addition(state, "wide") is None
    assert (state.dir / "plan.json").read_bytes() == plan_before
    assert netns_list(lab.name) == spaces and maps(lab) == before
