"""Refusal classes of issue 22: each is refused by the check ``validate`` and ``up`` both run
(:func:`sfclab.realize.lifecycle.check`), with exit status 2 and the place named, and nothing
of the lab is made (no root needed: ``validate`` through ``main``, the library check)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from sfclab.cli import main
from sfclab.errors import SpecError
from sfclab.realize.kinds import load_lab_dict
from sfclab.realize.lifecycle import check
from sfclab.spec import measurement

BASE: dict[str, Any] = {
    "name": "refuse",
    "nodes": {"src": {"kind": "host"}, "fw": {"kind": "firewall", "rules": []},
              "fw2": {"kind": "firewall", "rules": []}, "dst": {"kind": "host"}},
    "links": [{"endpoints": ["src", "fw"]}, {"endpoints": ["fw", "fw2"]},
              {"endpoints": ["fw2", "dst"]}],
}
HOSTS = {"hosts": {"h1": {}, "h2": {}}}


def with_(**parts: Any) -> dict[str, Any]:
    d = copy.deepcopy(BASE)
    d.update(copy.deepcopy(parts))
    return d


def chain(ingress: str = "src", egress: str = "dst", **cl: Any) -> dict[str, Any]:
    return {"classifiers": [{"ingress": ingress, "proto": "udp", "dport": 7000, **cl}],
            "functions": ["fw"], "egress": egress}


def endpoint(node: str, iface: str) -> list[dict[str, Any]]:
    links = copy.deepcopy(BASE["links"])
    links[0]["endpoints"][0] = f"{node}:{iface}"
    return links


def tun(**params: Any) -> dict[str, Any]:
    d = with_()
    d["nodes"]["fw2"] = {"kind": "tun", "exec": ["cat"], **params}
    return d


CASES: dict[str, tuple[dict[str, Any], str, str]] = {
    # id: (lab, place, words of the message)
    "egress is the ingress": (with_(chains={"c": chain(egress="src")}),
                              "chains.c.classifiers[0].ingress", "egress too"),
    "two chains, one classifier": (
        with_(chains={"a": chain(), "b": {**chain(priority=9), "functions": ["fw2"]}}),
        "chains.b.classifiers[0]", "shadow"),
    "underlay 127.0.0.0/24": (with_(**HOSTS, underlay={"subnet": "127.0.0.0/24"}),
                              "underlay.subnet", "loopback"),
    "underlay 169.254.0.0/24": (with_(**HOSTS, underlay={"subnet": "169.254.0.0/24"}),
                                "underlay.subnet", "link-local"),
    "underlay 0.0.0.0/24": (with_(**HOSTS, underlay={"subnet": "0.0.0.0/24"}),
                            "underlay.subnet", "unspecified"),
    "underlay 224.0.0.0/24": (with_(**HOSTS, underlay={"subnet": "224.0.0.0/24"}),
                              "underlay.subnet", "multicast"),
    "underlay in the lab's plan": (with_(**HOSTS, underlay={"subnet": "198.18.1.0/24"}),
                                   "underlay.subnet", "overlaps the lab's subnet"),
    "ssh state with ..": (
        with_(hosts={"h1": {"address": "198.19.255.2",
                            "ssh": {"state": "/run/sfclab/../../etc"}}}),
        "hosts.h1.ssh.state", "'..'"),
    "NUL in a tun argument": (tun(exec=["cat", "a\0b"]), "nodes.fw2.exec[1]", "NUL"),
    "NUL in a key": (with_(nodes={**BASE["nodes"], "x\0y": {"kind": "host"}}),
                     "nodes.x\0y", "NUL"),
    "interface lo": (with_(links=endpoint("src", "lo")), "links[0].endpoints[0].interface",
                     "other than all, default, lo"),
    "interface all": (with_(links=endpoint("src", "all")), "links[0].endpoints[0].interface",
                      "other than"),
    "interface default": (with_(links=endpoint("src", "default")),
                          "links[0].endpoints[0].interface", "other than"),
    "tun device all": (tun(device="all"), "nodes.fw2.device", "other than"),
    "tun device ..": (tun(device=".."), "nodes.fw2.device", "other than"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_class_is_refused_by_the_check_validate_and_up_run(case: str) -> None:
    d, place, words = CASES[case]
    with pytest.raises(SpecError) as e:
        check(load_lab_dict(d, "lab.yaml"))
    assert e.value.exit_status == 2
    assert e.value.place == place, str(e.value)
    assert words in e.value.message, str(e.value)


@pytest.mark.parametrize("case", ["egress is the ingress", "two chains, one classifier",
                                  "underlay in the lab's plan", "interface all"])
def test_validate_exits_2_naming_the_place_and_makes_nothing(
        case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    d, place, _ = CASES[case]
    monkeypatch.setenv("SFCLAB_STATE_DIR", str(tmp_path / "state"))
    f = tmp_path / "lab.yaml"
    f.write_text(yaml.safe_dump(d))
    assert main(["validate", str(f)]) == 2
    err = capsys.readouterr().err
    assert f"{f}:" in err and place in err, err
    assert not (tmp_path / "state").exists()


def test_a_file_that_is_no_key_is_refused_as_an_ssh_key(tmp_path: Path) -> None:
    key = tmp_path / "id_not_a_key"
    key.write_text("hello\n")
    d = with_(hosts={"h1": {"address": "198.19.255.2", "ssh": {"key": str(key)}}})
    with pytest.raises(SpecError) as e:
        check(load_lab_dict(d, "lab.yaml"))
    assert e.value.place == "hosts.h1.ssh.key" and "private key" in e.value.message


@pytest.mark.parametrize("kind", [["ndr"], {"ndr": 1}])
def test_a_measure_type_that_is_no_name_is_refused(kind: Any) -> None:
    with pytest.raises(measurement.RequestInvalid) as e:
        measurement.validate({"type": kind})
    assert e.value.loc == ("type",) and "expected one of" in e.value.message
    with pytest.raises(SpecError) as e2:
        measurement.from_options({"type": kind})
    assert e2.value.place == "--type"


def test_a_chain_add_file_whose_egress_is_its_ingress_is_refused() -> None:
    from sfclab.spec import chainfile
    from sfclab.spec.source import Document

    doc = Document(yaml.safe_dump(
        {"name": "v", "classifiers": [{"ingress": "src"}], "egress": "src",
         "functions": [{"name": "f", "kind": "firewall"}]}), "chain.yaml")
    with pytest.raises(SpecError) as e:
        chainfile.parse(doc)
    assert e.value.place == "classifiers[0].ingress"


@pytest.mark.parametrize("to", ["", "..", "a/b", "h\0"])
def test_chain_migrate_to_an_empty_or_bad_host_name_is_refused(
        to: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Was: ``--to ''`` read as "the same host", exit 0, and the instance migrated."""
    from sfclab.live.request import MigrateInstance

    with pytest.raises(SpecError) as e:
        MigrateInstance("lab", "meter-1", to)
    assert e.value.place == "--to"
    assert main(["chain", "migrate", "refuse-no-such-lab", "meter-1", "--to", to]) == 2
    assert "--to" in capsys.readouterr().err


def test_a_measurement_request_with_a_nul_is_refused_at_its_place() -> None:
    with pytest.raises(measurement.RequestInvalid) as e:
        measurement.validate({"type": "iperf", "from": "src\0dst", "to": "dst"})
    assert e.value.loc == ("from",) and "NUL" in e.value.message


def test_host_add_refuses_a_key_file_that_is_no_key(tmp_path: Path) -> None:
    from sfclab.live.hosts.join import check_request

    key = tmp_path / "id"
    key.write_text("hello\n")
    with pytest.raises(SpecError) as e:
        check_request("root@198.19.255.9", str(key), None)
    assert e.value.place == "--key" and "private key" in e.value.message
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n")
    assert check_request("root@198.19.255.9", str(key), None) == ("root", "198.19.255.9")
