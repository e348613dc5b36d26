"""Every experiment file under scenarios/ validates, with each lab variant it expands to, the way
``sfclab run`` checks it before anything is built (so a broken reproduction scenario fails here,
not half-way through scripts/reproduce.sh).  Lab files (no ``measure``) validate as labs, chain
files (``functions`` defined inline, for ``sfclab chain add``) as chain files; other files (a
list of classifier entries) are not scenarios and are left to their own tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from sfclab.realize.kinds import load_lab, load_lab_dict
from sfclab.spec import chainfile
from sfclab.spec.experiment import expand, load_experiment
from sfclab.spec.source import Document

ROOT = Path(__file__).resolve().parents[2]
#: not a scenario: the key comparisons of docs/reproduction.md (tests/unit/test_findings.py)
FINDINGS = ROOT / "scenarios" / "findings.yaml"
FILES = [p for p in sorted((ROOT / "scenarios").glob("*.yaml"))
         if isinstance(yaml.safe_load(p.read_text()), dict) and p != FINDINGS]


def is_experiment(path: Path) -> bool:
    return "measure" in yaml.safe_load(path.read_text())


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_scenario_file_validates(path):
    data = yaml.safe_load(path.read_text())
    if "functions" in data and "nodes" not in data:
        assert chainfile.parse(Document.from_file(str(path))).functions
        return
    if not is_experiment(path):
        load_lab(str(path))
        return
    exp = load_experiment(path)
    points = expand(exp, load_lab_dict)
    assert len(points) == exp.size() > 0
    assert len({p.key for p in points}) == len(points)


REPRO = ["trellis-forwarding", "trellis-frame-size", "openstack-single-tenant",
         "openstack-dedicated", "openstack-shared", "openstack-bypass", "openstack-bypass-tcp"]


@pytest.mark.parametrize("name", REPRO)
def test_reproduction_scenarios_exist_and_are_run_by_the_script(name):
    assert (ROOT / "scenarios" / f"{name}.yaml").is_file()
    assert name in (ROOT / "scripts" / "reproduce.sh").read_text()


def test_trellis_variants_are_the_papers_setups():
    exp = load_experiment(ROOT / "scenarios" / "trellis-forwarding.yaml")
    assert set(exp.variants) == {"native", "bridged-if", "bridge", "direct", "shortbridge",
                                 "shortbridge-vxlandev", "userspace"}
    labs = {p.params["variant"]: p.lab for p in expand(exp, load_lab_dict)}
    assert "hosts" not in labs["native"] and "hosts" not in labs["userspace"]
    assert labs["userspace"]["nodes"]["nut"]["kind"] == "tun"
    assert {lk["attach"] for lk in labs["shortbridge"]["links"]} == {"shortbridge"}
    assert {lk["attach"] for lk in labs["direct"]["links"]} == {"direct"}
    # T1's primary comparison: [T]'s shortbridge kept the tunnel device
    assert {lk["attach"] for lk in labs["shortbridge-vxlandev"]["links"]} == \
        {"shortbridge-vxlandev"}
    assert labs["bridged-if"]["nodes"]["src"]["host"] == labs["bridged-if"]["nodes"]["dst"]["host"]


def test_fig20_runs_the_tenants_tcp_flows_in_one_trial():
    exp = load_experiment(ROOT / "scenarios" / "openstack-bypass-tcp.yaml")
    pts = {p.params["variant"]: p.measure for p in expand(exp, load_lab_dict)}
    assert pts["four"]["type"] == "iperf" and not pts["four"]["udp"]
    assert [f"{p['from']}:{p['to']}" for p in pts["four"]["pairs"]] == [
        "vm1:dst", "vm2:dst", "vm3:dst", "vm4:dst"]
