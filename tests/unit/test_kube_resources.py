"""The Kubernetes runtime's pure parts: kubeconfigs read, quantities, a lab split into its
resources (and back into its file), its hosts placed on Nodes (no cluster needed)."""

from __future__ import annotations

import base64
import json

import pytest
import yaml

from sfclab.errors import ClusterRefused, SpecError
from sfclab.plan.placement import Host
from sfclab.realize.kinds import load_lab_dict, load_lab_text
from sfclab.realize.runtime import kubernetes as kube
from sfclab.realize.runtime import kubernetes_controller as ctl
from sfclab.realize.runtime.kubernetes_api import KubeConfig

THREE_HOSTS = {
    "name": "kt",
    "hosts": {"h1": {"cpus": 1, "memory": "512M"}, "h2": {"cpus": 1, "memory": "512M"},
              "h3": {"cpus": 1}},
    "tenants": {"red": {"nodes": ["a", "b", "c"]}},
    "nodes": {"a": {"kind": "host", "host": "h1"}, "b": {"kind": "host", "host": "h2"},
              "c": {"kind": "host", "host": "h3"}},
    "links": [{"endpoints": ["a", "b"]}, {"endpoints": ["b", "c"]}],
}


def kubeconfig(user: dict, server: str = "https://127.0.0.1:6443", **extra) -> dict:
    return {"clusters": [{"name": "c", "cluster": {"server": server, **extra}}],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x"}


def test_a_kubeconfig_gives_server_token_and_ca(tmp_path):
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()
    c = KubeConfig.parse(kubeconfig({"token": "abc"}, **{"certificate-authority-data": ca}),
                         "k")
    assert (c.server, c.token, c.ca_pem) == ("https://127.0.0.1:6443", "abc",
                                            b"-----BEGIN CERTIFICATE-----\n")
    (tmp_path / "tok").write_text("fromfile\n")
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(kubeconfig({"tokenFile": "tok"})))
    assert KubeConfig.load(str(path)).token == "fromfile"  # relative to the kubeconfig


@pytest.mark.parametrize("doc,said", [
    (kubeconfig({"exec": {"command": "aws"}}), "'exec' credentials are not supported"),
    (kubeconfig({"token": "t"}, server="http://127.0.0.1:8080"), "is not an https:// URL"),
    ({**kubeconfig({"token": "t"}), "current-context": None}, "no context given"),
    (kubeconfig({"token": "t"}, **{"certificate-authority-data": "%%%"}), "not base64"),
    ([1, 2], "expected a mapping"),
])
def test_a_kubeconfig_sfclab_cannot_use_is_refused_by_name(doc, said):
    with pytest.raises(ClusterRefused, match=said) as e:
        KubeConfig.parse(doc, "/k/config")
    assert e.value.exit_status == 2 and str(e.value).startswith("kubeconfig /k/config: ")


def test_a_missing_context_and_an_oversized_kubeconfig_are_refused(tmp_path):
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump(kubeconfig({"token": "t"})))
    with pytest.raises(ClusterRefused, match="no context named 'y'"):
        KubeConfig.load(str(path), "y")
    path.write_text("#" * ((1 << 20) + 1))
    with pytest.raises(ClusterRefused, match="larger than"):
        KubeConfig.load(str(path))


@pytest.mark.parametrize("text,value", [("2", 2), ("1500m", 1.5), ("4Gi", 4 << 30),
                                        ("512M", 512e6), ("1024Ki", 1 << 20)])
def test_quantities(text, value):
    assert kube.quantity(text, "q") == value


def test_a_quantity_sfclab_cannot_read_is_refused():
    with pytest.raises(ClusterRefused, match="Node n cpu: '2x' is not a quantity"):
        kube.quantity("2x", "Node n cpu")


def nodes(*specs: tuple[str, float, int]) -> list[Host]:
    return [Host(n, c, m) for n, c, m in specs]


def test_a_lab_is_split_per_host_and_its_hosts_spread_over_nodes():
    lab = load_lab_dict(THREE_HOSTS)
    res = kube.resources(lab)
    assert ctl.place_lab(lab, nodes(("n1", 2, 4 << 30), ("n2", 2, 4 << 30),
                                    ("n3", 2, 4 << 30))) == {"h1": "n1", "h2": "n2", "h3": "n3"}
    parts = {p["spec"]["host"]: p for p in res.parts}
    assert set(parts["h1"]["spec"]["nodes"]) == {"a"}
    assert [ln["endpoints"] for ln in parts["h2"]["spec"]["links"]] == \
        [lab.raw["links"][0]["endpoints"], lab.raw["links"][1]["endpoints"]]
    assert parts["h2"]["spec"]["order"] == {"nodes": {"b": 1}, "links": [0, 1]}
    assert len(parts["h3"]["spec"]["links"]) == 1
    # written unplaced and unplanned: the controller adds both
    assert all("node" not in p["spec"] and "plan" not in p["spec"] and
               kube.NODE_LABEL not in p["metadata"]["labels"] for p in parts.values())
    assert parts["h1"]["spec"]["memory"] == 512 * 10**6 or \
        parts["h1"]["spec"]["memory"] == 512 << 20
    # the Lab holds the lab-wide keys, not the nodes and links
    assert "nodes" not in res.lab["spec"]["file"] and "hosts" in res.lab["spec"]["file"]
    assert res.lab["spec"]["hostCount"] == 3
    assert res.lab["spec"]["order"]["hosts"] == ["h1", "h2", "h3"]


def test_the_lab_file_comes_back_from_its_objects_in_its_own_order():
    doc = {**THREE_HOSTS, "hosts": {"z": {}, "h1": {}},
           "nodes": {"c": {"kind": "host", "host": "z"}, "a": {"kind": "host", "host": "h1"},
                     "b": {"kind": "host", "host": "z"}},
           "links": [{"endpoints": ["c", "a"]}, {"endpoints": ["b", "c"]},
                     {"endpoints": ["a", "b"]}]}
    doc["tenants"] = {"red": {"nodes": ["a", "b", "c"]}}
    lab = load_lab_dict(doc)
    res = kube.resources(lab)

    def server(x):  # as the API server gives it back: every mapping's keys sorted
        return json.loads(json.dumps(x, sort_keys=True))

    got = kube.lab_file(server(res.lab), [server(p) for p in reversed(res.parts)])
    assert list(got["hosts"]) == ["z", "h1"] and list(got["nodes"]) == ["c", "a", "b"]
    assert got["links"] == doc["links"]  # each once, in the file's order
    assert load_lab_dict(got).nodes.keys() == lab.nodes.keys()


def test_capacity_decides_the_node():
    lab = load_lab_dict(THREE_HOSTS)
    # n1 has no room for a 1-CPU host: the hosts go to the others, one each
    got = ctl.place_lab(lab, nodes(("n1", 0.5, 4 << 30), ("n2", 4, 4 << 30),
                                   ("n3", 1, 4 << 30), ("n4", 1, 4 << 30)))
    assert sorted(got.values()) == ["n2", "n3", "n4"]
    # a host placed already (a pass stopped half-way) keeps its Node
    assert ctl.place_lab(lab, nodes(("n1", 1, 4 << 30), ("n2", 4, 4 << 30),
                                    ("n3", 4, 4 << 30)), {"h3": "n1"})["h3"] == "n1"
    # two hosts cannot share a Node (a host's address is its Node's): refused
    with pytest.raises(SpecError, match="does not fit the cluster's Nodes: hosts h. and h. "
                       "would share Node n2"):
        ctl.place_lab(lab, nodes(("n1", 1, 4 << 30), ("n2", 4, 4 << 30)))


def test_a_node_selector_takes_only_nodes_with_its_labels():
    doc = {**THREE_HOSTS, "hosts": {**THREE_HOSTS["hosts"],
                                    "h1": {"cpus": 1, "node_selector": {"zone": "b"}},
                                    "h3": {"cpus": 1, "node_selector": {
                                        "zone": "a", "sfclab.dev/nic": "fast"}}}}
    lab = load_lab_dict(doc)
    labelled = [Host("n1", 4, 4 << 30, labels={"zone": "a"}),
                Host("n2", 4, 4 << 30, labels={"zone": "a", "sfclab.dev/nic": "fast"}),
                Host("n3", 4, 4 << 30, labels={"zone": "b"})]
    # without selectors, first fit would give h1 n1 and h3 n3
    assert ctl.place_lab(lab, labelled) == {"h1": "n3", "h2": "n1", "h3": "n2"}
    # no Node has the labels: refused at the host's node_selector, before any placement
    with pytest.raises(SpecError, match="no schedulable Kubernetes Node carries the labels "
                       "zone=b .3 schedulable") as e:
        ctl.place_lab(lab, [h if h.name != "n3" else Host("n3", 4, 4 << 30) for h in labelled])
    assert e.value.place == "hosts.h1.node_selector"
    # the matching Node is full: the message names the largest free one among those allowed
    with pytest.raises(SpecError, match="the largest free Node its node_selector allows is n3 "
                       "with 0.5 CPU"):
        ctl.place_lab(lab, [*labelled[:2], Host("n3", 0.5, 4 << 30, labels={"zone": "b"})])


@pytest.mark.parametrize("selector, said", [
    ({"bad key": "x"}, "a Kubernetes label key"),
    ({"zone": "-a"}, "a Kubernetes label value for zone"),
    ({}, "1 to 16 Node labels"),
    ({f"k{i}": "v" for i in range(17)}, "1 to 16 Node labels"),
])
def test_a_node_selector_kubernetes_does_not_take_is_refused_at_its_place(selector, said):
    doc = {**THREE_HOSTS, "hosts": {**THREE_HOSTS["hosts"],
                                    "h2": {"cpus": 1, "node_selector": selector}}}
    with pytest.raises(SpecError, match=said) as e:
        load_lab_dict(doc)
    assert e.value.place == "hosts.h2.node_selector"


def test_a_node_selector_is_refused_by_up_anywhere_but_kubernetes(tmp_path, monkeypatch):
    from sfclab.realize import lifecycle

    monkeypatch.setenv("SFCLAB_STATE_DIR", str(tmp_path))
    doc = {**THREE_HOSTS, "hosts": {**THREE_HOSTS["hosts"],
                                    "h3": {"cpus": 1, "node_selector": {"zone": "a"}}}}
    with pytest.raises(SpecError, match="only for 'sfclab up --kube'") as e:
        lifecycle.up(load_lab_dict(doc))
    assert e.value.place == "hosts.h3.node_selector" and e.value.exit_status == 2
    assert list(tmp_path.iterdir()) == []  # nothing made, not even the lab's state


def test_a_lab_that_does_not_fit_the_nodes_is_refused():
    lab = load_lab_dict(THREE_HOSTS)
    with pytest.raises(SpecError, match="does not fit the cluster's Nodes: host h[123] needs "
                       "1 CPU and .*; the largest free Node is n1 with 0.5 CPU"):
        ctl.place_lab(lab, nodes(("n1", 0.5, 4 << 30)))
    with pytest.raises(SpecError, match="no schedulable Kubernetes Node"):
        ctl.place_lab(lab, [])


def test_a_lab_without_hosts_is_one_part_named_local():
    lab = load_lab_text("name: kl\nchain: {length: 3}\n", "kl.yaml")
    res = kube.resources(lab)
    assert [p["metadata"]["name"] for p in res.parts] == ["kl.local"]
    assert len(res.parts[0]["spec"]["nodes"]) == 3


def test_an_object_larger_than_etcd_takes_is_refused(monkeypatch):
    monkeypatch.setattr(kube, "MAX_OBJECT", 300)
    lab = load_lab_dict(THREE_HOSTS)
    with pytest.raises(SpecError, match="would be [0-9]+ bytes, more than the 300"):
        kube.resources(lab)
    monkeypatch.setattr(kube, "MAX_OBJECT", 1 << 20)
    res = kube.resources(lab)
    assert all(len(json.dumps(o)) < 1 << 20 for o in [res.lab, *res.parts])


def test_down_removes_only_parts_that_carry_the_labs_mark():
    part = {"metadata": {"labels": {kube.LAB_LABEL: "a"},
                         "ownerReferences": [{"kind": "Lab", "uid": "u1"}]},
            "spec": {"lab": "a"}}
    assert kube.owned_part(part, "a", "u1")
    assert not kube.owned_part(part, "a", "u2")  # another Lab of that name
    assert not kube.owned_part({**part, "spec": {"lab": "b"}}, "a", "u1")
    assert not kube.owned_part({**part, "metadata": {"labels": {}}}, "a", None)


def test_a_lease_expires_when_its_duration_passes_without_a_renewal():
    from sfclab.realize.runtime.kubernetes_agent import expired, micro_time

    now = 1_800_000_000.0
    lease = {"spec": {"renewTime": micro_time(now - 10), "leaseDurationSeconds": 15}}
    assert not expired(lease, now)
    assert expired(lease, now + 6)
    assert expired({"spec": {"leaseDurationSeconds": 15}}, now)  # never renewed
    assert micro_time(now) == "2027-01-15T08:00:00.000000Z"


@pytest.mark.parametrize("change,said", [
    ({"name": "Kt_1"}, "kt.yaml:1: name: 'Kt_1' is not a name Kubernetes takes"),
    ({"name": "k.t"}, "name: 'k.t' is not a name Kubernetes takes"),
    ({"hosts": {"H1": {}}, "nodes": {"a": {"kind": "host", "host": "H1"}}, "links": []},
     "kt.yaml:3: hosts.H1: 'H1' is not a name Kubernetes takes"),
])
def test_a_name_kubernetes_does_not_take_is_refused_at_its_place(change, said):
    doc = {**THREE_HOSTS, "tenants": None, **change}
    lab = load_lab_text(yaml.safe_dump({k: v for k, v in doc.items() if v is not None},
                                       sort_keys=False), "kt.yaml")
    with pytest.raises(SpecError, match=said.replace(".", r"\.")) as e:
        kube.resources(lab)
    assert e.value.exit_status == 2
