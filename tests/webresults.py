"""A results database for the web tests (both tiers): two experiments run by the real runner
into a real store, with fake labs and measurements whose numbers follow known laws.

``chains``: iperf throughput against chain length (2..6) for 1 and 4 flows, 3 repetitions,
11 % per hop (so the power-law fit has something to find); ``curve``: offered-vs-received rate
curves for chain lengths 2 and 4, receiving at most 300 kpps / (n - 1)."""

from __future__ import annotations

import contextlib
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from sfclab.experiments.commands import run_experiment
from sfclab.experiments.runner import NullProgress

CHAINS = """\
name: chains
description: throughput against chain length
lab: {name: ch, chain: {length: 2}}
measure: {type: iperf, flows: 1, duration: 1}
sweep:
  chain.length: [2, 3, 4, 5, 6]
  measure.flows: [1, 4]
repetitions: 3
"""

CURVE = """\
name: curve
lab: {name: rc, chain: {length: 2}}
measure: {type: rate, rates: [50k, 100k, 200k, 400k]}
sweep:
  chain.length: [2, 4]
"""

LOSS_PER_HOP = 0.11


@contextlib.contextmanager
def _lab_up(lab: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield lab


def _measure(seed: int = 0) -> Any:
    rng = np.random.default_rng(seed)

    def measure(lab: dict[str, Any], m: dict[str, Any]) -> dict[str, Any]:
        n = lab["chain"]["length"]
        if m["type"] == "rate":
            curve = [{"offered_pps": r, "received_pps": min(r, 300e3 / (n - 1))}
                     for r in m["rates"]]
            return {"type": "rate", "params": m, "points": curve,
                    "metrics": {"max_received_pps": max(c["received_pps"] for c in curve)}}
        t = 10e9 * m["flows"] * (1 - LOSS_PER_HOP) ** (n - 2)
        return {"type": "iperf", "params": m,
                "metrics": {"throughput_bps": t * rng.lognormal(0, 0.01), "retransmits": 2.0}}
    return measure


def make_results_db(path: Path) -> Path:
    """Fill ``path`` (made if missing) with the two experiments; return it."""
    for name, text in (("chains.yaml", CHAINS), ("curve.yaml", CURVE)):
        f = path.parent / name
        f.write_text(textwrap.dedent(text))
        run_experiment(f, path, _lab_up, _measure(), NullProgress(), sleep=lambda s: None,
                       environment=lambda: {"kernel": "6.18-test", "cores": 2})
    return path


def make_reproduction_db(path: Path) -> Path:
    """``path`` with two experiments: a reproduced study's own file
    (``scenarios/paper-chain-veth-vs-ovs-tcp.yaml``, whose findings in
    ``scenarios/findings.yaml`` have published figures) and ``chains``, both with throughput
    against chain length, 11 % per hop."""
    root = Path(__file__).resolve().parents[1]
    study = root / "scenarios" / "paper-chain-veth-vs-ovs-tcp.yaml"
    f = path.parent / "chains.yaml"
    f.write_text(textwrap.dedent(CHAINS))
    for source in (study, f):
        run_experiment(source, path, _lab_up, _measure(), NullProgress(), sleep=lambda s: None,
                       environment=lambda: {"kernel": "6.18-test", "cores": 2})
    return path
