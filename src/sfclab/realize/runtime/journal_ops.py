"""The journal entries that say where a running lab's hosts are, one per runtime that reaches
hosts through their agents: what :func:`sfclab.realize.runtime.kind_for` reads without loading
the runtimes themselves.

- :data:`SSH_HOST`: a host driven over SSH (:mod:`sfclab.realize.remote`), one entry each;
- :data:`KUBE_CLUSTER`: the Kubernetes cluster the lab was written to
  (:mod:`.kubernetes_runtime`, ``up --kube``).
"""

from __future__ import annotations

SSH_HOST = "remote-host"
KUBE_CLUSTER = "kube-cluster"
