"""The bad-input promise, fuzzed as root against the machine: bad lab files given to ``sfclab
up``, bad chain and classifier files given to ``chain add`` and ``chain classify`` on one small
running lab, and bad bodies posted to the API in process, each exit 2 (HTTP 422) with one
located line, no traceback, and the machine as it was.

The cases are :mod:`tests.fuzzgrammar`'s, fewer than the unit tier's (each one here runs the
command line as a program).  A case the library accepts is skipped (it would build, add or
start something).  *The machine as it was* is judged over what this module owns, because other
tests build labs on the same machine at the same time: the network namespaces and bpffs entries
of the labs a case names (every seed lab is renamed to this module's own name first), the whole
of the module's own state directory (``SFCLAB_STATE_DIR``), and the processes that inherited
that state directory in their environment, as everything sfclab starts does.

Reproducible and bounded as the unit tier (``SFCLAB_FUZZ_EXAMPLES`` and friends, see
``tests/unit/test_fuzz_inputs.py``).  ``KNOWN`` lists failures left to another class of work.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import event as _event
from hypothesis.control import currently_in_test_context
from hypothesis import strategies as st

from tests.fuzzcheck import (COMPLEX_KEY_CHAIN, COMPLEX_KEY_CLASSIFIERS, COMPLEX_KEY_LAB,
                             COMPLEX_KEYS, MEASURE_TYPE, MEASURE_TYPE_LIST, Failure, Known,
                             known_case, refusal, verdict)
from tests.fuzzgrammar import NAME, Case, cases
from tests.integration.weblab import web_lab


#: failures found by fuzzing whose fix came from another class of work; each reproducer is
#: held to the promise by ``test_known_reproducers``; the
#: pattern starts with the command ('up', 'chain add', 'chain classify') or 'POST'
KNOWN: list[Known] = [
    Known("up-complex-key", COMPLEX_KEYS, "lab", "exit 1", r"^up .*unhashable",
          COMPLEX_KEY_LAB),
    Known("chain-add-complex-key", COMPLEX_KEYS, "chain", "exit 1", r"^chain add .*unhashable",
          COMPLEX_KEY_CHAIN),
    Known("classify-complex-key", COMPLEX_KEYS, "classifiers", "exit 1",
          r"^chain classify .*unhashable", COMPLEX_KEY_CLASSIFIERS),
    Known("post-lab-complex-key", COMPLEX_KEYS, "lab", "status 500", r"^POST ",
          COMPLEX_KEY_LAB),
    Known("post-measure-type-list", MEASURE_TYPE, "measure", "status 500", r"^POST ",
          MEASURE_TYPE_LIST),
]

#: failures the fuzz tests let pass (none: every one found is fixed)
TOLERATED: list[Known] = []

ROOT = Path(__file__).resolve().parents[2]
#: this module's lab: every case's lab is renamed to it, the running lab is it with a suffix
LAB = f"fz{secrets.token_hex(3)}"
RUNNING = f"{LAB}r"
EXAMPLES = int(os.environ.get("SFCLAB_FUZZ_EXAMPLES", "0"))


def fuzz_settings(examples: int) -> settings:
    """As the unit tier's, without shrinking (each example runs a program: a failure is
    reported as found, with its input, rather than minimised for minutes)."""
    return settings(max_examples=EXAMPLES or examples, deadline=timedelta(seconds=60),
                    derandomize=os.environ.get("SFCLAB_FUZZ_RANDOM") != "1", database=None,
                    phases=[Phase.explicit, Phase.reuse, Phase.generate],
                    suppress_health_check=list(HealthCheck), print_blob=False)


def event(what: str) -> None:
    """What an example did, for ``--hypothesis-show-statistics``; a reproducer run as a plain
    test (outside Hypothesis) records nothing."""
    if currently_in_test_context():
        _event(what)


# ------------------------------------------------------------------ what this module owns

def _tree(path: Path) -> list[str]:
    """Every file and directory below ``path``, relative, with the size of each file (one
    removed while it is listed is left out)."""
    out = []
    try:
        there = path.exists()
    except OSError:  # a case's lab name too long to be a file name: nothing can be there
        there = False
    for p in path.rglob("*") if there else []:
        try:
            out.append(f"{p.relative_to(path)}:{'dir' if p.is_dir() else p.stat().st_size}")
        except OSError:
            continue
    return sorted(out)


def machine(state: Path, labs: set[str]) -> dict[str, list[str]]:
    """What a refused command must not change: the namespaces and bpffs entries of ``labs``,
    the state directory, and the processes started with it."""
    netns = sorted(n for n in os.listdir("/run/netns") if n.split(":")[1:2] and
                   n.split(":")[1] in labs) if os.path.isdir("/run/netns") else []
    bpffs = [f"{lab}/{p}" for lab in sorted(labs)
             for p in _tree(Path("/sys/fs/bpf/sfclab") / lab)]
    want = f"SFCLAB_STATE_DIR={state}".encode()
    procs = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            continue
        if want in env:
            procs.append(f"{comm}:{pid}")
    return {"netns": netns, "bpffs": bpffs, "state": _tree(state), "processes": sorted(procs)}


def names_in(case: Case) -> set[str]:
    """The labs a case could make: this module's, and the name the case gives (if any)."""
    out = {LAB, RUNNING}
    name = case.data.get("name") if isinstance(case.data, dict) else None
    if isinstance(name, str) and NAME.fullmatch(name):  # only a name can name a lab
        out.add(name)
    return out


@pytest.fixture(scope="module")
def state(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A state directory of this module's own (the session's is restored after)."""
    d = tmp_path_factory.mktemp("fuzz-state")
    old = os.environ.get("SFCLAB_STATE_DIR")
    os.environ["SFCLAB_STATE_DIR"] = str(d)
    yield d
    if old is None:
        os.environ.pop("SFCLAB_STATE_DIR", None)
    else:
        os.environ["SFCLAB_STATE_DIR"] = old


@pytest.fixture(scope="module")
def running(state: Path) -> Iterator[str]:
    """One small running lab with chains (``web``: src through a firewall pool and a NAT)."""
    from sfclab.api import Lab

    lab = Lab.from_dict(web_lab(RUNNING)).up()
    try:
        yield RUNNING
    finally:
        lab.down()


def sfclab(state: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SFCLAB_STATE_DIR": str(state)}
    return subprocess.run([sys.executable, "-m", "sfclab.cli", *argv], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def refused_by_cli(case: Case, cp: subprocess.CompletedProcess[str], command: str,
                   before: dict[str, list[str]], after: dict[str, list[str]]) -> Failure | None:
    """Exit 2, one ``sfclab: error:`` line naming the file, no traceback, nothing changed."""
    lines = [ln for ln in cp.stderr.splitlines() if ln.strip()]
    if cp.returncode != 2 or "Traceback" in cp.stderr or len(lines) != 1 or \
            not lines[0].startswith("sfclab: error: "):
        return Failure(case.kind, f"exit {cp.returncode}", command, cp.stderr[-400:], case.text)
    changed = {k: sorted(set(after[k]) ^ set(before[k])) for k in after if after[k] != before[k]}
    if changed:
        return Failure(case.kind, "left", command, json.dumps(changed)[:400], case.text)
    return None


def holds(failure: Failure | None) -> None:
    failed = verdict(failure, TOLERATED)
    assert failed is None, failed


def test_machine_sees_what_a_case_would_leave(state: Path) -> None:
    """The judge is not blind: a namespace of the case's lab, a file in the state directory
    and a process started with the state directory each show as a change."""
    labs = {LAB}
    before = machine(state, labs)
    ns = f"sfclab:{LAB}:probe"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    (state / "probe").write_text("x")
    proc = subprocess.Popen(["sleep", "30"], env={**os.environ, "SFCLAB_STATE_DIR": str(state)})
    try:
        comm = Path(f"/proc/{proc.pid}/comm")
        for _ in range(500):  # until the child has exec'd (its environment is sleep's then)
            if comm.read_text().strip() == "sleep":
                break
            time.sleep(0.01)
        after = machine(state, labs)
        assert after["netns"] == before["netns"] + [ns]
        assert after["state"] == sorted(before["state"] + ["probe:1"])
        assert f"sleep:{proc.pid}" in after["processes"]
    finally:
        proc.kill()
        proc.wait()
        (state / "probe").unlink()
        subprocess.run(["ip", "netns", "delete", ns], check=True)
    assert machine(state, labs) == before


# ------------------------------------------------------------------------ the command line

def try_up(state: Path, running: str, case: Case, f: Path) -> Failure | None:
    if refusal(case, f) is None:
        event("skipped: valid")
        return None  # valid: 'up' would build it
    labs = names_in(case)
    before = machine(state, labs)
    cp = sfclab(state, "up", str(f))
    event(f"up exit {cp.returncode}")
    return refused_by_cli(case, cp, "up", before, machine(state, labs))


def try_chain_add(state: Path, running: str, case: Case, f: Path) -> Failure | None:
    if refusal(case, f, running) is None:
        event("skipped: valid")
        return None  # valid: 'chain add' would add it
    before = machine(state, names_in(case))
    cp = sfclab(state, "chain", "add", running, str(f), "--wait", "10")
    event(f"chain add exit {cp.returncode}")
    return refused_by_cli(case, cp, "chain add", before, machine(state, names_in(case)))


def classifiers_of(lab: str) -> str:
    """The running lab's chain ``web`` as ``chain inspect`` reads it from the maps (entries
    and classifiers; counters left out)."""
    from sfclab.live.ops.chains import inspect

    web = inspect(lab, "web")["chains"]["web"]
    return json.dumps({k: v for k, v in web.items() if "counter" not in k and k != "nodes"},
                      sort_keys=True, default=str)


def try_classify(state: Path, running: str, case: Case, f: Path) -> Failure | None:
    """Every case runs (the lab checks what the file cannot: the ingress is the chain's); one
    the lab accepts adds its entries, and what follows is judged from there."""
    f.write_text(case.text, encoding="utf-8")
    before = {**machine(state, names_in(case)), "web": [classifiers_of(running)]}
    cp = sfclab(state, "chain", "classify", running, "web", "--from-file", str(f))
    event(f"chain classify exit {cp.returncode}")
    if cp.returncode == 0 and refusal(case, f) is None:
        event("skipped: valid")
        return None  # valid: added
    after = {**machine(state, names_in(case)), "web": [classifiers_of(running)]}
    return refused_by_cli(case, cp, "chain classify", before, after)


@fuzz_settings(12)
@given(case=cases("lab", lab_name=LAB))
def test_up_refuses_bad_lab_files(state: Path, tmp_path_factory: pytest.TempPathFactory,
                                  case: Case) -> None:
    holds(try_up(state, RUNNING, case, tmp_path_factory.getbasetemp() / f"{LAB}-lab.yaml"))


@fuzz_settings(8)
@given(case=cases("chain"))
def test_chain_add_refuses_bad_chain_files(state: Path, running: str,
                                           tmp_path_factory: pytest.TempPathFactory,
                                           case: Case) -> None:
    holds(try_chain_add(state, running, case,
                        tmp_path_factory.getbasetemp() / f"{LAB}-chain.yaml"))


@fuzz_settings(8)
@given(case=cases("classifiers"))
def test_chain_classify_refuses_bad_classifier_files(
        state: Path, running: str, tmp_path_factory: pytest.TempPathFactory, case: Case) -> None:
    holds(try_classify(state, running, case,
                       tmp_path_factory.getbasetemp() / f"{LAB}-classifiers.yaml"))


# ----------------------------------------------------------------------------------- the API

def api_client() -> TestClient:
    """The one place the API client is set up: the tests' app and token
    (:mod:`tests.webclient`: a loopback Host the server listens on), JSON bodies."""
    from tests import webclient

    return TestClient(webclient.make_app(), base_url=webclient.BASE,
                      raise_server_exceptions=False,
                      headers={**webclient.AUTH, "Content-Type": "application/json"})


@pytest.fixture(scope="module")
def api(running: str) -> Iterator[TestClient]:
    with api_client() as c:
        yield c


def post(api: TestClient, case: Case, lab: str) -> Any:
    if case.kind == "lab":  # the lab file itself, as YAML text
        return api.post("/api/labs", content=case.text.encode(),
                        headers={"Content-Type": "application/yaml"})
    route = {"chain": "chains", "measure": "measurements", "host": "hosts",
             "migrate": "chains/web/migrate"}[case.kind]
    return api.post(f"/api/labs/{lab}/{route}", content=case.json_body().encode())


def refused_by_api(case: Case, r: Any, before: dict[str, list[str]],
                   after: dict[str, list[str]]) -> Failure | None:
    """422 with a SpecError body that names a place or a line, in one line; nothing changed."""
    try:
        body = r.json()
    except ValueError:
        body = {}
    whole = not isinstance(case.data, dict)  # the body itself is the place
    ok = r.status_code == 422 and body.get("type") == "SpecError" and \
        "\n" not in str(body.get("error")) and \
        (body.get("place") or body.get("line") or whole)
    if not ok:
        return Failure(case.kind, f"status {r.status_code}", "POST", r.text[:400],
                       case.json_body() if case.kind != "lab" else case.text)
    changed = {k: sorted(set(after[k]) ^ set(before[k])) for k in after if after[k] != before[k]}
    if changed:
        return Failure(case.kind, "left", "POST", json.dumps(changed)[:400], case.text)
    return None


def try_post(state: Path, running: str, api: TestClient, case: Case,
             f: Path) -> Failure | None:
    if case.kind == "chain":
        case.text = case.json_body()  # the library reads the posted JSON as this text
    if refusal(case, f, running) is None:
        event("skipped: valid")
        return None  # valid: the API would build, add or start it
    labs = names_in(case)
    before = machine(state, labs)
    r = post(api, case, running)
    event(f"POST {case.kind} {r.status_code}")
    return refused_by_api(case, r, before, machine(state, labs))


@fuzz_settings(40)
@given(case=st.one_of(cases("lab", lab_name=LAB), *(cases(k, text_mutations=False)
                                                     for k in ("chain", "measure", "host",
                                                               "migrate"))))
def test_api_refuses_bad_bodies(state: Path, running: str, api: TestClient,
                                tmp_path_factory: pytest.TempPathFactory, case: Case) -> None:
    holds(try_post(state, running, api, case,
                   tmp_path_factory.getbasetemp() / f"{LAB}-body.yaml"))


@pytest.mark.parametrize("known", [pytest.param(k, id=k.id) for k in KNOWN])
def test_known_reproducers(state: Path, running: str, api: TestClient, tmp_path: Path,
                           known: Known) -> None:
    """Each known failure's smallest input, through the command or route it failed in."""
    case, f = known_case(known), tmp_path / "reproducer.yaml"
    if known.pattern.lstrip("^").startswith("POST"):
        failed = try_post(state, running, api, case, f)
    else:
        command = {"lab": try_up, "chain": try_chain_add, "classifiers": try_classify}
        failed = command[known.kind](state, running, case, f)
    if failed is not None and not known.matches(failed):
        raise RuntimeError(f"the reproducer fails otherwise than listed: {failed}")
    assert failed is None, failed
