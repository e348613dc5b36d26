"""The record of one invocation of scripts/reproduce.sh, and its planned repetitions.

``OUT/reproduce.json`` (written step by step by the script through scripts/repro_page.py)::

    {"run_id": "20261123T071600Z-2add73eef8db", "started": unix s, "ended": unix s,
     "wall_s": s, "resumed": [unix s, ...],
     "environment": {kernel, cpu_model, cores, versions: {...}, clang, commit,
                     + .hostfacts: cpu_frequency_mhz, cpu_governor, hypervisor, sysctls,
                       ovs, packages},
     "groups": {NAME: {"start": {"t", "load"}, "end": {"t", "load"},
                       "rounds": [{"file", "repetitions", "findings", "seconds"}]}},
     "plan": {ID: {"pilot", "repetitions", "power", "sigma", "reason"}},  # .samplesize
     "budget": {...}}   # the per-finding budget of added repetitions: .reprobudget

``load`` is ``/proc/loadavg``'s three averages.  :func:`more_repetitions` decides, once after a
group's pilot (the files run with their own repetitions), which experiment files are brought up
to the repetitions each finding needs (:func:`.samplesize.plan`, from the pilot's variance,
kept in ``plan`` and never recomputed): a file's new total is the most any finding served by it
needs.  The rerun happens if the estimated cost (the file's mean time per repetition, from its
stored runs, times the repetitions added) fits what is left of the findings' shares of the
budget (:class:`.reprobudget.Budget`); a plan that does not fit is not run, and the page shows
the planned against the reached repetitions.  Whether the intervals already separate plays no
part (no optional stopping).  Only files run into the group's own databases are planned (the
script reruns a file into its group's database): a finding whose b side is in another database
(``b_db``) gets more repetitions of its a side only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SpecError
from ..traffic.environment import environment as host_environment
from .bundle import run_id
from .findings import Findings
from .hostfacts import host_facts
from .page import comparisons
from .reprobudget import Budget, fit
from .samplesize import plan as sample_plan
from .store import Store

RECORD = "reproduce.json"


def loadavg() -> list[float]:
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return []


def _first_line(argv: list[str], cwd: str | None = None) -> str:
    if shutil.which(argv[0]) is None:
        return "absent"
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=10, cwd=cwd)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    lines = [ln.strip() for ln in (cp.stdout + cp.stderr).splitlines() if ln.strip()]
    return lines[0] if lines and cp.returncode == 0 else "unknown"


def full_environment(repo: str) -> dict[str, Any]:
    """The host environment plus clang's version and the sfclab commit of ``repo``."""
    env = dict(host_environment())
    env.update(host_facts())
    env["clang"] = _first_line(["clang", "--version"])
    commit = _first_line(["git", "-C", repo, "rev-parse", "--short=12", "HEAD"])
    dirty = _first_line(["git", "-C", repo, "status", "--porcelain", "--untracked-files=no"])
    env["commit"] = commit + (" (with uncommitted changes)" if dirty not in ("", "unknown")
                              and commit != "unknown" else "")
    return env


class Record:
    """``OUT/reproduce.json``, read and rewritten whole at each step."""

    def __init__(self, out_dir: str | os.PathLike[str],
                 clock: Callable[[], float] = time.time,
                 load: Callable[[], list[float]] = loadavg):
        self.path = Path(out_dir) / RECORD
        self.clock, self.load = clock, load
        self.data: dict[str, Any] = {}
        if self.path.is_file():
            try:
                self.data = json.loads(self.path.read_text())
            except ValueError as e:
                raise SpecError(f"expected the JSON record of a reproduce.sh run ({e})",
                                file=str(self.path)) from None

    def save(self) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=2) + "\n")  # groups in run order
        tmp.replace(self.path)

    def begin(self, environment: Mapping[str, Any], findings: Path | None = None) -> str:
        """Start the record of a run (its run id from the start time and the commit), and
        keep a copy of the findings file it will be judged by.  A second invocation into the
        same directory resumes the same run (same id), only at the same commit: a bundle never
        mixes code versions."""
        commit = str(environment.get("commit", "unknown"))
        if self.data.get("run_id"):
            old = str(self.data.get("environment", {}).get("commit", "unknown"))
            if old != commit:
                raise SpecError(f"holds run {self.data['run_id']} at commit {old}, not "
                                f"{commit}: give a new OUT_DIR (a bundle is one run)",
                                file=str(self.path))
            self.data.setdefault("resumed", []).append(self.clock())
            self.data.pop("ended", None)
            self.data.pop("wall_s", None)
        else:
            now = self.clock()
            self.data = {"run_id": run_id(now, commit), "started": now,
                         "environment": dict(environment), "groups": {}}
        if findings is not None and not (self.path.parent / "findings.yaml").exists():
            shutil.copyfile(findings, self.path.parent / "findings.yaml")
        self.save()
        return str(self.data["run_id"])

    @property
    def run_id(self) -> str:
        return str(self.data.get("run_id", ""))

    def group(self, name: str, when: str) -> None:
        if when not in ("start", "end"):
            raise SpecError(f"expected start or end, got {when!r}")
        g = self.data.setdefault("groups", {}).setdefault(name, {"rounds": []})
        g[when] = {"t": self.clock(), "load": self.load()}
        self.save()

    @property
    def budget(self) -> Budget | None:
        """The per-finding budget of added repetitions (None before :meth:`start_budget`)."""
        b = self.data.get("budget")
        return Budget(b) if isinstance(b, dict) else None

    def start_budget(self, total_s: float, findings: Findings, groups: list[str]) -> Budget:
        """Share ``total_s`` among the findings of ``groups`` (in that order: the order the
        script runs them; a finding belongs to the group of its database)."""
        order = {g: i for i, g in enumerate(groups)}
        mine = sorted((f for f in findings.findings if f.db in order),
                      key=lambda f: order[f.db])  # stable: the findings file's order within
        b = Budget.start(total_s, [(f.id, f.db) for f in mine])
        self.data["budget"] = b.data
        self.save()
        return b

    def allowances(self, name: str) -> dict[str, float]:
        """What each of group ``name``'s findings may still spend (see :class:`Budget`)."""
        b = self.budget
        if b is None:
            raise SpecError("expected a budget in the record (repro_page.py budget first)",
                            file=str(self.path))
        out = b.allowances(name)
        self.save()
        return out

    def round(self, name: str, file: str, repetitions: int, findings: list[str],
              started: float | None = None) -> None:
        """A file run again with ``repetitions``, for ``findings``; with ``started`` (its start,
        unix s) the time it took is charged to those findings' budget."""
        g = self.data.setdefault("groups", {}).setdefault(name, {"rounds": []})
        entry: dict[str, Any] = {"file": file, "repetitions": repetitions, "findings": findings}
        if started is not None:
            entry["seconds"] = max(0.0, self.clock() - started)
            if self.budget is not None:
                self.budget.charge(findings, entry["seconds"])
        g.setdefault("rounds", []).append(entry)
        self.save()

    def close_group(self, name: str, repetitions: Mapping[str, int]) -> None:
        """Group ``name``'s findings are done, with the repetitions their comparisons ran;
        what they did not spend goes to the findings after them."""
        if self.budget is not None:
            self.budget.close(name, repetitions)
            self.save()

    def finish(self) -> None:
        self.data["ended"] = self.clock()
        self.data["wall_s"] = self.data["ended"] - self.data.get("started", self.data["ended"])
        self.save()


@dataclass(frozen=True)
class MoreReps:
    file: str  # experiment file to run again
    repetitions: int  # the new total
    estimate_s: float  # estimated time for the added repetitions
    findings: tuple[str, ...]


def planned(findings: Findings, out_dir: Path, group_dbs: list[str],
            plans: dict[str, Any]) -> dict[str, int]:
    """Finding id -> repetitions per side, for the group's findings with a pilot; a finding
    without an entry in ``plans`` gets one now, from its pilot (``plans`` is changed in place
    and kept in the record, so a plan is never recomputed from later data)."""
    out: dict[str, int] = {}
    cfg = findings.planning
    for fid, c in comparisons(findings, out_dir).items():
        if c is None or c.no_figure or c.finding.db not in group_dbs:
            continue  # no pilot to plan from
        if fid not in plans:
            p = sample_plan(c.finding.claim_rule, c.a, c.b, power=cfg.power,
                            min_effect=cfg.min_effect, cap=cfg.max_repetitions)
            plans[fid] = {"pilot": min(c.a.n, c.b.n), **p.to_dict()}
        out[fid] = int(plans[fid]["repetitions"])
    return out


def more_repetitions(findings: Findings, out_dir: Path, group_dbs: list[str],
                     budget_s: float | Mapping[str, float],
                     plans: dict[str, Any] | None = None) -> list[MoreReps]:
    """Files to bring up to their findings' planned repetitions (:func:`planned`), cheapest
    first, only while the estimated time fits: ``budget_s`` seconds in all, or per finding
    (finding id -> seconds left of its share, :meth:`.reprobudget.Budget.allowances`; a
    finding not named gets nothing)."""
    need = planned(findings, out_dir, group_dbs, {} if plans is None else plans)
    want: dict[str, dict[str, int]] = {}  # file -> finding id -> its planned repetitions
    for fid, c in comparisons(findings, out_dir).items():
        if c is None or c.no_figure or fid not in need:
            continue
        for src in c.sources:
            want.setdefault(src, {})[fid] = need[fid]
    plans_: list[MoreReps] = []
    for src, needs in want.items():
        for db in group_dbs:
            path = out_dir / f"{db}.db"
            if not path.is_file():
                continue
            with Store(path, readonly=True) as store:
                exps = [e for e in store.experiments() if e.source == src]
                if not exps:
                    continue
                runs = [r for e in exps for r in store.runs(e.id)]
            reps = 1 + max(r.repetition for r in runs)
            ids = sorted(fid for fid, n in needs.items() if n > reps)
            if not ids:
                continue
            n = max(needs[fid] for fid in ids)
            took = [r.duration for r in runs if r.status == "done" and r.duration]
            per_rep = sum(took) / reps if took else 0.0
            # a lab is built per run: count it with the run's own time (runs' started/ended
            # cover lab up, measurement and teardown)
            plans_.append(MoreReps(src, n, per_rep * (n - reps) * 1.2, tuple(ids)))
    if isinstance(budget_s, Mapping):
        return fit(plans_, budget_s)
    plans_.sort(key=lambda p: p.estimate_s)
    chosen, spent = [], 0.0
    for p in plans_:
        if spent + p.estimate_s <= budget_s:
            chosen.append(p)
            spent += p.estimate_s
    return chosen


def _hms(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600} h {s % 3600 // 60:02d} min {s % 60:02d} s" if s >= 3600 \
        else f"{s // 60} min {s % 60:02d} s"


def render_environment(record: Record) -> str:
    d = record.data
    env = d.get("environment", {})
    v = env.get("versions", {})
    kern = env.get("kernel", {})
    lines = [
        f"- kernel {kern.get('release', '?')} ({kern.get('machine', '?')}); CPU "
        f"{env.get('cpu_model', '?')} × {env.get('cores', '?')} "
        f"({env.get('cores_usable', '?')} usable)",
        f"- iperf3 {v.get('iperf3', '?')}, Open vSwitch {v.get('ovs-vswitchd', '?')} "
        f"(userspace datapath), nft {v.get('nft', '?')}, iptables {v.get('iptables', '?')}, "
        f"tc {v.get('tc', '?')}, {env.get('clang', 'clang ?')}, Python {v.get('python', '?')}, "
        f"sfclab {v.get('sfclab', '?')} at commit {env.get('commit', '?')}",
    ]
    lines += _host_lines(env)
    if d.get("run_id"):
        lines.append(f"- run id `{d['run_id']}` (the bundle's; every generated block names it)")
    if "started" in d:
        start = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(d["started"]))
        wall = _hms(d["wall_s"]) if "wall_s" in d else "(still running)"
        lines.append(f"- whole script started {start}, wall time **{wall}**")
    out = "\n".join(lines) + "\n\n| group | wall time | load at start | load at end | " \
                             "repetitions added |\n|---|---|---|---|---|\n"
    for name, g in d.get("groups", {}).items():
        t0, t1 = g.get("start", {}), g.get("end", {})
        took = _hms(t1["t"] - t0["t"]) if "t" in t0 and "t" in t1 else "–"
        rounds = "; ".join(f"{Path(r['file']).stem} → {r['repetitions']} "
                           f"({', '.join(r['findings'])})" for r in g.get("rounds", [])) or "–"
        out += (f"| {name} | {took} | {' '.join(map(str, t0.get('load', []))) or '–'} | "
                f"{' '.join(map(str, t1.get('load', []))) or '–'} | {rounds} |\n")
    return out + render_budget(record)


def _host_lines(env: Mapping[str, Any]) -> list[str]:
    """The bundle's host facts (.hostfacts), where the record has them."""
    out = []
    if "cpu_frequency_mhz" in env:
        f = env["cpu_frequency_mhz"]
        mhz = "/".join(f"{x:.0f}" for x in f) if f else "?"
        hv = env.get("hypervisor", {})
        out.append(f"- CPU frequency {mhz} MHz, governor {'/'.join(env.get('cpu_governor', []))}"
                   f"; hypervisor: {hv.get('detect_virt', '?')} (CPU flag "
                   f"{'set' if hv.get('cpu_flag') else 'not set'})")
    if "packages" in env:
        out.append("- Debian packages: " + ", ".join(f"{k} {v}" for k, v in
                                                     env["packages"].items()))
    if "sysctls" in env:
        out.append("- sysctls: " + ", ".join(f"{k} = {v}" for k, v in env["sysctls"].items()))
    if "ovs" in env:
        o = env["ovs"]
        out.append("- Open vSwitch settings: " + (o if isinstance(o, str) else
                                                  ", ".join(f"{k} {v}" for k, v in o.items())))
    return out


def render_budget(record: Record) -> str:
    """The per-finding budget of added repetitions as a table (empty without one)."""
    b = record.budget
    if b is None:
        return ""
    out = (f"\nBudget of added repetitions: {b.data['total_s']:.0f} s, shared per finding "
           f"(left unspent: {b.left_s():.0f} s).\n\n| finding | group | share | spent | "
           "pilot | planned (power) | reached |\n|---|---|---|---|---|---|---|\n")
    plans = record.data.get("plan", {})
    for fid, f in b.findings.items():
        share = "–" if f["share_s"] is None else f"{f['share_s']:.0f} s"
        reps = "–" if f["repetitions"] is None else str(f["repetitions"])
        p = plans.get(fid)
        pilot = "–" if p is None else str(p["pilot"])
        want = "–" if p is None else (f"{p['repetitions']} ({p['power']:.2f})"
                                      if p.get("power") is not None else str(p["repetitions"]))
        out += (f"| {fid} | {f['group']} | {share} | {f['spent_s']:.0f} s | {pilot} | {want} | "
                f"{reps} |\n")
    return out
