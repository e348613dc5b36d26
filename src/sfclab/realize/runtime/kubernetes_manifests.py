"""sfclab's Kubernetes manifests (``deploy/kubernetes/``): read, and applied to a cluster.

The manifests are plain YAML files applied in the order of their names (namespace, CRDs,
RBAC, the agent's admission policy, the agent's DaemonSet, the controller's Deployment); the
directory's ``kustomization.yaml`` lists the same files for ``kubectl apply -k``.
:func:`install` applies each object by server-side apply, the way ``kubectl apply
--server-side`` does, or only checks it (``dry_run``: the API server validates, admits and
authorizes each object as it would store it, and stores nothing).

:data:`KINDS` is the one table of the object kinds the manifests hold: each kind's API path
(its group and version's plural, and whether it lives in a namespace).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ...errors import SpecError
from .kubernetes_api import KubeApi, resource_path

#: where the manifests are (a checkout of the repository: sfclab runs from one, editable)
MANIFESTS = Path(__file__).resolve().parents[4] / "deploy" / "kubernetes"
#: the manifests' own files that are not objects of the cluster
NOT_OBJECTS = ("kustomization.yaml",)


@dataclass(frozen=True)
class Kind:
    plural: str
    namespaced: bool


#: (apiVersion, kind) -> its API path's parts
KINDS: dict[tuple[str, str], Kind] = {
    ("v1", "Namespace"): Kind("namespaces", False),
    ("v1", "ServiceAccount"): Kind("serviceaccounts", True),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"):
        Kind("customresourcedefinitions", False),
    ("rbac.authorization.k8s.io/v1", "Role"): Kind("roles", True),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): Kind("rolebindings", True),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): Kind("clusterroles", False),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): Kind("clusterrolebindings", False),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"):
        Kind("validatingadmissionpolicies", False),
    ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"):
        Kind("validatingadmissionpolicybindings", False),
    ("apps/v1", "DaemonSet"): Kind("daemonsets", True),
    ("apps/v1", "Deployment"): Kind("deployments", True),
}


def object_path(obj: dict[str, Any], source: str = "<manifest>") -> str:
    """The API path of ``obj`` (a manifest's object); :class:`SpecError` for a kind not in
    :data:`KINDS` or an object without a name (or namespace, where its kind needs one)."""
    key = (str(obj.get("apiVersion")), str(obj.get("kind")))
    kind = KINDS.get(key)
    meta = obj.get("metadata") or {}
    if kind is None:
        raise SpecError(f"object kind {key[1]} ({key[0]}) is not one sfclab applies", file=source)
    if not meta.get("name") or (kind.namespaced and not meta.get("namespace")):
        raise SpecError(f"{key[1]} needs metadata.name"
                        + (" and metadata.namespace" if kind.namespaced else ""), file=source)
    return resource_path(key[0], kind.plural, meta.get("namespace") if kind.namespaced
                         else None, meta["name"])


def objects(directory: Path = MANIFESTS) -> list[tuple[str, dict[str, Any]]]:
    """Every object of the manifests, in applying order, each with its file's name."""
    out = []
    for f in sorted(directory.glob("*.yaml")):
        if f.name in NOT_OBJECTS:
            continue
        for doc in yaml.safe_load_all(f.read_text()):
            if doc:
                out.append((f.name, doc))
    return out


def install(api: KubeApi, *, dry_run: bool = False,
            directory: Path = MANIFESTS) -> list[str]:
    """Apply every object of the manifests (server-side apply; ``dry_run``: checked by the
    API server, nothing stored); the applied objects as ``Kind/name``."""
    done = []
    for source, obj in objects(directory):
        api.apply(object_path(obj, source), obj, dry_run=dry_run)
        done.append(f"{obj['kind']}/{obj['metadata']['name']}")
    return done
