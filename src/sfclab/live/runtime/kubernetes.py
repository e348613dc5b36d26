"""The ``kubernetes`` runtime's operations on a running lab (:class:`KubeLive`): none yet.

A lab on Kubernetes (:mod:`sfclab.realize.runtime.kubernetes_runtime`) is built and removed
whole by its Nodes' agents; ``chain add``/``rm``/``migrate``, the classifier, ``chain trace``,
the health watcher and hosts joining need the host agent's verbs run by a Node's agent on
request, which is not done yet (``docs/kubernetes.md``: what is left).  Each operation is
refused with one line (:class:`~sfclab.errors.LabError`, exit 2), before anything is made.
"""

from __future__ import annotations

from typing import Any, NoReturn

from ...realize.runtime.kubernetes_runtime import KubeRuntime, not_here
from .base import LiveRuntime


def _refuse(what: str) -> NoReturn:
    raise not_here(what)


class KubeLive(KubeRuntime, LiveRuntime):
    """A running lab on Kubernetes: every operation refused (see the module)."""

    def check_free(self, *a: Any, **k: Any) -> None:
        _refuse("chain add")

    def image_problem(self, *a: Any, **k: Any) -> Any:
        _refuse("chain add")

    def journal_chain(self, *a: Any, **k: Any) -> None:
        _refuse("chain add")

    def make_chain(self, *a: Any, **k: Any) -> None:
        _refuse("chain add")

    def undo_chain(self, *a: Any, **k: Any) -> None:
        _refuse("chain add")

    def remove_chain(self, *a: Any, **k: Any) -> list[str]:
        _refuse("chain rm")

    def classify(self, *a: Any, **k: Any) -> Any:
        _refuse("writing the classifier")

    def trace_paths(self, *a: Any, **k: Any) -> dict[str, Any]:
        _refuse("chain trace")

    def watch(self, *a: Any, **k: Any) -> dict[str, Any]:
        _refuse("the health watcher")

    def health(self, *a: Any, **k: Any) -> dict[str, Any]:
        _refuse("chain health")

    def migrate(self, *a: Any, **k: Any) -> dict[str, Any]:
        _refuse("chain migrate")

    def refuse_emulated_join(self) -> None:
        _refuse("host add")

    def refuse_machine_join(self, *a: Any, **k: Any) -> None:
        _refuse("host add")

    def join_machine(self, *a: Any, **k: Any) -> dict[str, Any]:
        _refuse("host add")
