"""The Go modules ``make kube`` builds Kubernetes' binaries from (``kube/apiserver``,
``kube/node``) pin one release: the same ``k8s.io/kubernetes`` version, the same staging
modules replaced by the same versions, each with its checksums in its go.sum."""

from __future__ import annotations

import re
from pathlib import Path

KUBE = Path(__file__).resolve().parents[2] / "kube"


def pins(module: str) -> tuple[str, dict[str, str]]:
    text = (KUBE / module / "go.mod").read_text()
    version = re.search(r"^\s*k8s\.io/kubernetes (v\S+)$", text, re.M)
    assert version, f"{module}: no k8s.io/kubernetes requirement"
    block = re.search(r"^replace \($(.*?)^\)$", text, re.M | re.S)
    assert block, f"{module}: no replace block"
    replaced = dict(re.findall(r"^\s*(\S+) => \S+ (v\S+)$", block.group(1), re.M))
    return version.group(1), replaced


def test_both_modules_pin_one_kubernetes_release():
    api_version, api_replaced = pins("apiserver")
    node_version, node_replaced = pins("node")
    assert api_version == node_version
    assert node_replaced == api_replaced and len(node_replaced) > 20
    staging = "v0." + api_version.removeprefix("v1.")
    assert set(api_replaced.values()) == {staging}


def test_every_pinned_module_has_its_checksum():
    for module in ("apiserver", "node"):
        version, replaced = pins(module)
        summed = (KUBE / module / "go.sum").read_text()
        assert f"k8s.io/kubernetes {version} h1:" in summed
        for name, v in replaced.items():
            if f"{name} " in (KUBE / module / "go.mod").read_text().split("replace (")[0]:
                assert f"{name} {v}" in summed, (module, name)
