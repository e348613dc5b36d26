"""The bad-input promise, fuzzed without root: bad lab, chain, classifier and experiment files
and measurement bodies, made from the grammar (:mod:`tests.fuzzgrammar`), are refused with one
located :class:`~sfclab.errors.SpecError` and nothing else (:mod:`tests.fuzzcheck`).

Reproducible: Hypothesis runs derandomized (the same examples every run) with a deadline per
example.  By hand, longer or elsewhere::

    SFCLAB_FUZZ_EXAMPLES=5000 .venv/bin/pytest -q tests/unit/test_fuzz_inputs.py
    SFCLAB_FUZZ_RANDOM=1 ...        # new random examples instead of the fixed sequence
    SFCLAB_FUZZ_COLLECT=f.jsonl ... # append every failure to f.jsonl instead of stopping

``KNOWN`` lists failures found by the fuzzer whose fix belonged to another class of work (named in
each entry), ``FIXED`` those fixed with the fuzzer; each reproducer is a test of its own.
``TOLERATED`` is where a failure found but not yet fixed would be listed (the fuzz tests skip
exactly its signatures, and its reproducer is marked ``xfail``): it is empty.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.fuzzcheck import (COMPLEX_KEY_CHAIN, COMPLEX_KEY_CLASSIFIERS, COMPLEX_KEY_LAB,
                             COMPLEX_KEYS, IFNAMES, MEASURE_TYPE, MEASURE_TYPE_LIST, Known,
                             judge, known_case, verdict)
from tests.fuzzgrammar import Case, cases

#: failures found by fuzzing whose fix came from another class of work; each reproducer is
#: held to the promise by ``test_known_reproducers``
KNOWN: list[Known] = [
    Known("lab-complex-key", COMPLEX_KEYS, "lab", "TypeError", r"spec/source\.py:walk",
          COMPLEX_KEY_LAB),
    Known("chain-complex-key", COMPLEX_KEYS, "chain", "TypeError", r"spec/source\.py:walk",
          COMPLEX_KEY_CHAIN),
    Known("classifiers-complex-key", COMPLEX_KEYS, "classifiers", "TypeError",
          r"spec/source\.py:walk", COMPLEX_KEY_CLASSIFIERS),
    Known("experiment-complex-key", COMPLEX_KEYS, "experiment", "TypeError",
          r"spec/source\.py:walk", "? {k: v}\n: c\nname: e\n"),
    Known("ifname-final-line-break", IFNAMES, "lab", "accepted", r"endpoints",
          'name: x\nnodes: {a: {kind: host}, b: {kind: host}}\n'
          'links: [{endpoints: ["a:e0\\n", b]}]\n'),
    Known("measure-type-list", MEASURE_TYPE, "measure", "TypeError",
          r"spec/measurement\.py:validate", MEASURE_TYPE_LIST),
    Known("experiment-measure-type-mapping", MEASURE_TYPE, "experiment", "TypeError",
          r"spec/measurement\.py:validate",
          "name: e\nlab: {name: l, chain: {length: 2}}\nmeasure: {type: {a: 1}}\n"),
]

#: failures the fuzz tests let pass (none: every one found is fixed)
TOLERATED: list[Known] = []

#: failures the fuzzer found and this branch fixed, each its smallest input: held to the promise
FIXED: list[tuple[str, str, str]] = [
    ("lab-name-final-line-break", "lab", "name: 'a\n\n  '\nchain: {length: 2}\n"),
    ("node-name-final-line-break", "lab", 'name: x\nnodes: {"a\\n": {kind: host}, b: {kind: '
     'host}}\nlinks: [{endpoints: ["a\\n", b]}]\n'),
    ("experiment-name-final-line-break", "experiment",
     "name: 'e\n\n  '\nlab: {name: l, chain: {length: 2}}\nmeasure: {type: iperf}\n"),
    ("line-break-in-a-quoted-name", "lab",
     "name: x\nnodes: {a: {kind: host}}\ntenants: {t: {nodes: ['a\n\n  b']}}\n"),
    ("yaml-tag-not-constructed", "chain",
     "name: video\negress: !!python/object:os.system dst\n"),
    ("yaml-binary-bad-base64", "classifiers", "!!binary classifiers:\n- {}\n"),
    ("port-pair-of-lists", "classifiers", "- {ingress: src, proto: tcp, dport: [[], []]}\n"),
    ("port-pair-of-lists-in-a-lab", "lab",
     "name: x\nchain: {length: 3}\nchains: {c: {classifiers: [{ingress: src, proto: udp, "
     "dport: [[1], [2]]}], functions: [r1], egress: dst}}\n"),
    ("lab-keys-number-and-string", "experiment",
     "name: e\nlab: {name: l, chain: {length: 2}, tenants: {3: {nodes: [src]}, t: {nodes: "
     "[dst]}}}\nmeasure: {type: iperf}\n"),
    ("classifier-prefix-true", "classifiers", "- {ingress: src, src: true}\n"),
    ("classifier-prefix-number", "lab",
     "name: x\nchain: {length: 3}\nchains: {c: {classifiers: [{ingress: src, dst: 5}], "
     "functions: [r1], egress: dst}}\n"),
    ("variant-null-past-a-list", "experiment",
     "name: e\nlab: {name: l, nodes: {a: {kind: host}, b: {kind: host}}, "
     "links: [{endpoints: [a, b]}]}\nmeasure: {type: iperf, from: a, to: b}\n"
     "variants: {v: {links.5.attach: null}}\n"),
]

EXAMPLES = int(os.environ.get("SFCLAB_FUZZ_EXAMPLES", "0"))


def fuzz_settings(examples: int) -> settings:
    """``examples`` per run (``SFCLAB_FUZZ_EXAMPLES`` overrides), derandomized unless
    ``SFCLAB_FUZZ_RANDOM=1``, no example database, 15 s per example at most (a valid lab
    of a few hundred nodes takes seconds to plan on a loaded 2-core machine)."""
    return settings(max_examples=EXAMPLES or examples, deadline=timedelta(seconds=15),
                    derandomize=os.environ.get("SFCLAB_FUZZ_RANDOM") != "1", database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much],
                    print_blob=False)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A directory for the case files and a state directory of the module's own (validation
    reads the state directory: a lab already up is refused)."""
    d = tmp_path_factory.mktemp("fuzz")
    old = os.environ.get("SFCLAB_STATE_DIR")
    os.environ["SFCLAB_STATE_DIR"] = str(d / "state")
    yield d
    if old is None:
        os.environ.pop("SFCLAB_STATE_DIR", None)
    else:
        os.environ["SFCLAB_STATE_DIR"] = old


def promise(case: Case, tmp: Path) -> None:
    failed = verdict(judge(case, tmp), TOLERATED)
    assert failed is None, failed


@fuzz_settings(250)
@given(case=cases("lab"))
def test_bad_lab_files(tmp: Path, case: Case) -> None:
    promise(case, tmp)


@fuzz_settings(150)
@given(case=cases("chain"))
def test_bad_chain_files(tmp: Path, case: Case) -> None:
    promise(case, tmp)


@fuzz_settings(150)
@given(case=cases("classifiers"))
def test_bad_classifier_files(tmp: Path, case: Case) -> None:
    promise(case, tmp)


@fuzz_settings(150)
@given(case=cases("experiment"))
def test_bad_experiment_files(tmp: Path, case: Case) -> None:
    promise(case, tmp)


@fuzz_settings(200)
@given(case=cases("measure", text_mutations=False))
def test_bad_measurement_bodies(tmp: Path, case: Case) -> None:
    promise(case, tmp)


@pytest.mark.parametrize("known", [pytest.param(k, id=k.id) for k in KNOWN])
def test_known_reproducers(tmp: Path, known: Known) -> None:
    """Each known failure's smallest input: fails (as listed) until its owner fixes it."""
    failed = judge(known_case(known), tmp)
    if failed is not None and not known.matches(failed):
        raise RuntimeError(f"the reproducer fails otherwise than listed: {failed}")
    assert failed is None, failed


@pytest.mark.parametrize("kind, text", [(k, t) for _, k, t in FIXED], ids=[i for i, _, _ in FIXED])
def test_fixed_reproducers(tmp: Path, kind: str, text: str) -> None:
    """Each failure fixed on this branch, by its smallest input (they failed before the fix)."""
    failed = judge(Case(kind, "reproducer", [], text), tmp)
    assert failed is None, failed


def test_host_names_with_a_final_line_break_are_refused() -> None:
    """``host add`` (and its API body) take no name with a final line break (a cgroup path)."""
    from sfclab.errors import SpecError
    from sfclab.live.ops.hostops import check_host_request

    with pytest.raises(SpecError, match="expected a host name") as e:
        check_host_request("h1\n", 1, 64 << 20)
    assert e.value.place == "name" and "\n" not in str(e.value)
