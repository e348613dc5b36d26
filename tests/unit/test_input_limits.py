"""Bounds before work, without root: every input that could make work grow faster than its
size is refused (exit 2 / HTTP 422) with the place and the limit, before it grows.

Inputs that crashed or ran away before these bounds (a document nested 100,000 deep, a chain
of 64^8 paths) run in a child process with a memory cap and a timeout, so a regression fails
the test instead of taking the machine down with it.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient

from sfclab.cli import main
from sfclab.cli.status import ExitStatus
from sfclab.errors import SpecError
from sfclab.realize.kinds import load_lab_dict
from sfclab.spec import chainfile, limits
from sfclab.spec.experiment import load_experiment_text
from sfclab.spec.reading import read_bytes
from sfclab.spec.source import Document
from tests.webclient import YAML, api_client, fake_up

ROOT = Path(__file__).resolve().parents[2]
SFC = ROOT / "scenarios" / "sfc-web.yaml"


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "state"
    monkeypatch.setenv("SFCLAB_STATE_DIR", str(d))
    return d


def _capped() -> None:  # a child that runs away fails instead of swapping the machine out
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def run_capped(code: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    """``code`` in a child Python (1 GiB of address space); it prints a SpecError and exits 2."""
    wrapper = ("import sys\nfrom sfclab.errors import SpecError\ntry:\n"
               + textwrap.indent(textwrap.dedent(code), "    ")
               + "\nexcept SpecError as e:\n    print(e)\n    sys.exit(2)\n")
    return subprocess.run([sys.executable, "-c", wrapper], capture_output=True, text=True,
                          timeout=timeout, preexec_fn=_capped, cwd=ROOT)


# ----------------------------------------------------------------------- nesting, keys, bytes
@pytest.mark.parametrize("form, text", [
    ("yaml-flow", "[" * 100_000 + "]" * 100_000),
    ("yaml-block", "- " * 100_000 + "x\n"),
    ("json", "[" * 100_000 + "{}" + "]" * 100_000),
    ("json-in-mapping", '{"classifiers": ' + "[" * 100_000 + "]" * 100_000 + "}"),
], ids=["yaml-flow", "yaml-block", "json", "json-in-mapping"])
def test_a_classifier_file_nested_100000_deep_is_refused_at_its_line(
        tmp_path: Path, form: str, text: str) -> None:
    f = tmp_path / f"deep-{form}.yaml"
    f.write_text(text)
    cp = run_capped(f"from sfclab.spec import classifier_file\n"
                    f"classifier_file.read({str(f)!r})\n")
    assert cp.returncode == 2, (cp.returncode, cp.stderr[-500:])
    assert f"{f}:1:" in cp.stdout and f"at most {limits.MAX_DEPTH} levels of nesting" \
        in cp.stdout, cp.stdout


COMPLEX = [("question-mark", "name: x\n? [a, b]\n: 1\n", 2),
           ("flow", "name: x\nnodes: {[1, 2]: x}\n", 2),
           ("alias", "name: &n x\n*n : 1\n", 2)]


@pytest.mark.parametrize("case, text, line", COMPLEX, ids=[c[0] for c in COMPLEX])
def test_complex_keys_are_refused_with_their_line_in_every_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, text: str,
        line: int) -> None:
    f = tmp_path / "lab.yaml"
    f.write_text(text)
    assert main(["validate", str(f)]) == ExitStatus.BAD_INPUT
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"{f}:{line}:" in err and "expected a plain key" in err
    for load in (lambda: chainfile.parse(Document(text, "chain.yaml")),
                 lambda: load_experiment_text(text, "exp.yaml")):
        with pytest.raises(SpecError) as ei:
            load()
        assert ei.value.line == line and "plain key" in ei.value.message


def test_a_yaml_alias_cannot_nest_deeper_than_the_limit(tmp_path: Path) -> None:
    inner = "a: &deep " + "[" * 40 + "]" * 40
    outer = "\nb: " + "[" * 40 + "*deep" + "]" * 40 + "\n"
    with pytest.raises(SpecError) as ei:
        Document(inner + outer, "lab.yaml")
    assert "levels of nesting once YAML aliases are expanded" in ei.value.message


def test_every_reader_stops_at_the_byte_limit() -> None:
    with pytest.raises(SpecError) as ei:
        read_bytes("/dev/zero")
    assert "at most 16 MiB" in str(ei.value) and ei.value.file == "/dev/zero"


# ------------------------------------------------------------------- chains: paths, labels
def group_lab(instances: int, visits: int) -> dict:
    fns = {f"f{i}": {"kind": "router"} for i in range(instances)}
    names = list(fns)
    links = [{"endpoints": ["src", "sw"]}, {"endpoints": ["dst", "sw"]}] + \
        [{"endpoints": [f, "sw"]} for f in names]
    return {"name": "grow", "nodes": {"src": {"kind": "host"}, "dst": {"kind": "host"},
                                      "sw": {"kind": "linux-bridge"}, **fns},
            "links": links, "groups": {"g": {"instances": names}},
            "chains": {"c": {"classifiers": [{"ingress": "src"}], "functions": ["g"] * visits,
                             "egress": "dst"}}}


@pytest.mark.parametrize("instances, visits, words", [
    (3, 16, "at most 8 functions"),                 # the audit's 3^16: labels first
    (64, 8, "the groups make 281,474,976,710,656 paths"),  # 64^8, within the labels
])
def test_a_chain_is_counted_before_its_paths_are_made(
        tmp_path: Path, instances: int, visits: int, words: str) -> None:
    f = tmp_path / "grow.yaml"
    f.write_text(yaml.safe_dump(group_lab(instances, visits)))
    cp = run_capped(f"from sfclab.realize.kinds import load_lab\n"
                    f"from sfclab.realize.lifecycle import plan_for\n"
                    f"plan_for(load_lab({str(f)!r}))\n", timeout=30)
    assert cp.returncode == 2, (cp.returncode, cp.stderr[-500:])
    assert "chains.c.functions" in cp.stdout and words in cp.stdout, cp.stdout


def test_a_chain_file_is_counted_before_placement(tmp_path: Path) -> None:
    for n, k, words in ((16, 3, "at most 8 functions"), (2, 9, "make 81 paths")):
        doc = Document(json.dumps({
            "name": "v", "classifiers": [{"ingress": "src"}], "egress": "dst",
            "functions": [{"name": f"f{i}", "kind": "firewall", "rules": [], "instances": k}
                          for i in range(n)]}), "chain.json")
        with pytest.raises(SpecError) as ei:
            chainfile.parse(doc)
        assert ei.value.place == "functions" and words in ei.value.message


# ------------------------------------------------------------------------------- sweeps
def test_a_sweep_is_counted_before_it_is_expanded() -> None:
    sweep = "\n".join(f"  measure.k{i}: [{', '.join(str(v) for v in range(40))}]"
                      for i in range(8))
    text = (f"name: big\nlab: {{name: b, chain: {{length: 2}}}}\nmeasure: {{type: iperf}}\n"
            f"sweep:\n{sweep}\n")
    with pytest.raises(SpecError) as ei:
        load_experiment_text(text, "exp.yaml")
    assert ei.value.place == "sweep.measure.k2" and "64,000 run points" in ei.value.message
    assert f"at most {limits.MAX_SWEEP_POINTS:,}" in ei.value.message and ei.value.line == 7
    many = "name: reps\nlab: {name: b, chain: {length: 2}}\nmeasure: {type: iperf}\n" \
           "sweep:\n  measure.flows: [" + ", ".join(str(v) for v in range(1, 101)) + "]\n" \
           "repetitions: 10000\n"
    with pytest.raises(SpecError) as ei:
        load_experiment_text(many, "exp.yaml")
    assert ei.value.place == "repetitions" and "1,000,000 runs" in ei.value.message


# -------------------------------------------------------------------------------- hosts
@pytest.mark.parametrize("argv, place, words", [
    (["--cpus", "100000000000", "--memory", "256M"], "cpus", "(this machine's)"),
    (["--cpus", "1", "--memory", "1000G"], "memory", "(this machine's)"),
], ids=["cpus", "memory"])
def test_host_add_is_bounded_to_the_machine(capsys: pytest.CaptureFixture[str],
                                            argv: list[str], place: str, words: str) -> None:
    assert main(["host", "add", "nolab", "edge", *argv]) == ExitStatus.BAD_INPUT
    err = capsys.readouterr().err
    assert f"{place}: expected" in err and words in err and "no lab" not in err, err


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with api_client(db=str(tmp_path / "none.db")) as c:
        yield c




def test_the_api_refuses_the_same_inputs_with_422_and_leaves_no_lock(
        client: TestClient, state: Path) -> None:
    name = fake_up(SFC)
    got: list[Any] = []  # in a thread: a request that spins (as before the bound) fails here
    t = threading.Thread(target=lambda: got.append(client.post(
        f"/api/labs/{name}/hosts", json={"name": "e", "cpus": 4000, "memory": "64M"})),
        daemon=True)
    t.start()
    t.join(20)
    assert got, "host add with 4,000 CPUs did not answer within 20 s"
    r = got[0]  # within the API schema's bound, past this machine's: the library's check
    assert r.status_code == 422 and r.json()["place"] == "cpus", r.text
    assert "(this machine's)" in r.text, r.text
    chain = {"name": "v", "classifiers": [{"ingress": "src"}], "egress": "dst",
             "functions": [{"name": f"f{i}", "kind": "firewall", "rules": [], "instances": 3}
                           for i in range(16)]}
    r = client.post(f"/api/labs/{name}/chains", json=chain)
    assert r.status_code == 422 and r.json()["place"] == "functions", r.text
    lab = yaml.safe_dump(group_lab(3, 16))
    r = client.post("/api/labs", content=lab, headers=YAML)
    assert r.status_code == 422 and "at most 8 functions" in r.text, r.text
    r = client.post("/api/labs", content="name: x\n? [a, b]\n: 1\n",
                    headers=YAML)
    assert r.status_code == 422 and "plain key" in r.text, r.text
    assert not (state / "labs" / "grow").exists() and not (state / "labs" / "grow.lock").exists()


# ------------------------------------------------------- classifier entries in lab and chain files
def test_classifier_entries_and_masks_are_counted_before_they_are_made() -> None:
    # ports 1-14 are 6 prefixes of 3 lengths: 36 entries and 9 masks, both ways of a
    # symmetric chain: 72 entries per classifier
    cls = [{"ingress": "src", "proto": "udp", "src": f"10.0.{i >> 8}.{i & 255}/32",
            "sport": "1-14", "dport": "1-14"} for i in range(3700)]
    doc = Document(json.dumps({"name": "v", "classifiers": cls, "egress": "dst",
                               "symmetric": True,
                               "functions": [{"name": "f", "kind": "firewall"}]}), "chain.json")
    with pytest.raises(SpecError) as ei:
        chainfile.parse(doc)
    first_over = limits.MAX_CLASSES // 72
    assert ei.value.place == f"classifiers[{first_over}]"
    assert f"at most {limits.MAX_CLASSES:,}" in ei.value.message
    wide = [{"ingress": "src", "proto": "tcp", "sport": "1-65534", "dport": "1-65534"}]
    d = group_lab(2, 1)
    d["chains"]["c"]["classifiers"] = [{"ingress": "src", "proto": "udp"}] + wide
    with pytest.raises(SpecError) as ei:
        load_lab_dict(d, "lab.yaml")
    assert ei.value.place == "chains.c.classifiers[1]"
    assert f"at most {limits.MAX_MASKS}" in ei.value.message
