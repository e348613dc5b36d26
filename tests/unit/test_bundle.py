"""The evidence of a reproduction run (sfclab.experiments.bundle, scripts/repro_page.py bundle,
render and check): a small bundle fixture made by the store API, the page rendered from it
with every block stamped, ``check`` passing on it and failing on a tampered page and on a mixed
bundle; the run id and resuming; the host facts read from a copied /proc and /sys tree."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from sfclab.errors import SpecError
from sfclab.experiments.bundle import BundleError, keep, run_id, verify, write_sums
from sfclab.experiments.hostfacts import cpu_frequencies, hypervisor, sysctls
from sfclab.experiments.reprorun import Record
from sfclab.experiments.store import Store

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = [sys.executable, str(ROOT / "scripts" / "repro_page.py")]

FINDINGS = """tolerance: 0.1
findings:
  - {id: X1, study: T, claim: "a beats b", published: "2x", db: d, metric: m, unit: kpps,
     a: {variant: a}, b: {variant: b}, expect: [1.5, 3]}
tables:
  - {id: tab, db: d, metric: m, unit: kpps, rows: variant}
"""

PAGE = """# a page
<!-- repro:begin findings -->
old
<!-- repro:end -->
hand-written
<!-- repro:begin finding X1 -->
old
<!-- repro:end -->
<!-- repro:begin table tab -->
old
<!-- repro:end -->
<!-- repro:begin environment -->
old
<!-- repro:end -->
"""


def _db(path: Path, values: dict[str, list[float]], t: float) -> None:
    with Store(path) as s:
        eid = s.register_experiment("d", "h", {}, 1, "/s/d.yaml")
        s.add_runs(eid, [SimpleNamespace(key=f"{v}-{i}", params={"variant": v}, repetition=i,
                                         lab={}, measure={}, lab_hash="x")
                         for v, xs in values.items() for i in range(len(xs))])
        for r in s.runs(eid):
            s.mark_running(r.id, started=t)
            s.finish_run(r.id, {"m": values[r.params["variant"]][r.repetition] * 1e3},
                         {"points": "[]"}, ended=t + 10)


def _bundle(tmp_path: Path, name: str, t0: float, commit: str = "abc123") -> Path:
    """A finished run of group d: record, findings copy, database, trials, SHA256SUMS."""
    out = tmp_path / name
    out.mkdir()
    (tmp_path / "f.yaml").write_text(FINDINGS)
    clock = iter([t0, t0 + 1, t0 + 90, t0 + 100]).__next__
    rec = Record(out, clock=clock, load=lambda: [0.5, 0.4, 0.3])
    rec.begin({"kernel": {"release": "6.18"}, "commit": commit,
               "cpu_frequency_mhz": [2100.0, 2100.0], "cpu_governor": ["none"],
               "hypervisor": {"cpu_flag": True, "detect_virt": "kvm"},
               "packages": {"iperf3": "3.12-1"}, "sysctls": {"net.core.rmem_max": "212992"},
               "ovs": "not running"}, tmp_path / "f.yaml")
    rec.group("d", "start")
    _db(out / "d.db", {"a": [200, 210, 205], "b": [100, 104, 102]}, t0 + 10)
    rec.group("d", "end")
    rec.finish()
    cp = subprocess.run(SCRIPT + ["bundle", str(out)], capture_output=True, text=True,
                        timeout=60)
    assert cp.returncode == 0, cp.stderr
    return out


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(SCRIPT + list(args), capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "FINDINGS": "/nonexistent.yaml"})


def test_bundle_holds_trials_checksums_and_the_findings_it_was_judged_by(tmp_path):
    out = _bundle(tmp_path, "out", 1000.0)
    rid = json.loads((out / "reproduce.json").read_text())["run_id"]
    assert rid == "19700101T001640Z-abc123" and verify(out) == rid
    trials = json.loads((out / "trials" / "d.json").read_text())
    assert trials["run_id"] == rid and len(trials["runs"]) == 6
    assert trials["runs"][0]["raw"] == {"points": "[]"} and "m" in trials["runs"][0]["metrics"]
    sums = (out / "SHA256SUMS").read_text().splitlines()
    assert sorted(line.split("  ")[1] for line in sums) == [
        "d.db", "findings.yaml", "reproduce.json", "trials/d.json"]
    # sha256sum itself agrees
    if shutil.which("sha256sum"):
        assert subprocess.run(["sha256sum", "-c", "--quiet", "SHA256SUMS"], cwd=out).returncode == 0


def test_page_rendered_from_a_bundle_is_stamped_and_checks(tmp_path):
    out = _bundle(tmp_path, "out", 1000.0)
    rid = verify(out)
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    cp = _run("render", str(out), "--page", str(page))
    assert cp.returncode == 0, cp.stderr
    text = page.read_text()
    for b in ("findings", "finding X1", "table tab", "environment"):
        assert f"<!-- repro:begin {b} run={rid} -->" in text
    assert "\nold\n" not in text and "hand-written" in text
    assert "verdict **holds**" in text and "hypervisor: kvm" in text and "iperf3 3.12-1" in text
    cp = _run("check", str(out), "--page", str(page))
    assert cp.returncode == 0 and rid in cp.stdout, cp.stderr

    # a figure changed by hand in the page
    page.write_text(text.replace("| a | 205 ± ", "| a | 215 ± "))
    cp = _run("check", str(out), "--page", str(page))
    assert cp.returncode == 1 and "block 'table tab' differs" in cp.stderr
    # a block stamped with another run
    page.write_text(text.replace(f"finding X1 run={rid}", "finding X1 run=19700101T000000Z-old"))
    cp = _run("check", str(out), "--page", str(page))
    assert cp.returncode == 1 and "block 'finding X1' is stamped run=19700101T000000Z-old" \
        in cp.stderr


def test_check_fails_on_a_mixed_bundle(tmp_path):
    out = _bundle(tmp_path, "out", 1000.0)
    other = _bundle(tmp_path, "other", 5000.0)
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    assert _run("render", str(out), "--page", str(page)).returncode == 0
    # another run's database dropped in: not in SHA256SUMS
    shutil.copy(other / "d.db", out / "e.db")
    cp = _run("check", str(out), "--page", str(page))
    assert cp.returncode == 1 and "e.db" in cp.stderr and "not in SHA256SUMS" in cp.stderr
    # ... and with the checksums written again: its trials lie outside this run's window
    write_sums(out)
    cp = _run("check", str(out), "--page", str(page))
    assert cp.returncode == 1 and "e.db" in cp.stderr and "another run" in cp.stderr
    # a database replaced by another run's: the checksum differs
    (out / "e.db").unlink()
    write_sums(out)
    assert _run("check", str(out), "--page", str(page)).returncode == 0
    shutil.copy(other / "d.db", out / "d.db")
    cp = _run("check", str(out), "--page", str(page))
    assert cp.returncode == 1 and "d.db" in cp.stderr and "checksum differs" in cp.stderr
    # another run's trials, checksummed again
    shutil.copy(other / "trials" / "d.json", out / "trials" / "d.json")
    shutil.copy(other / "d.db", out / "d.db")
    write_sums(out)
    with pytest.raises(BundleError, match="trials of run"):
        verify(out)


def test_a_whole_render_refuses_to_mix_runs_and_a_partial_one_keeps_them(tmp_path):
    out = _bundle(tmp_path, "out", 1000.0)
    page = tmp_path / "page.md"
    page.write_text(PAGE + "<!-- repro:begin table elsewhere run=19700101T000000Z-old -->\n"
                           "kept\n<!-- repro:end -->\n")
    (out / "findings.yaml").chmod(0o644)
    # the bundle's findings copy names no table 'elsewhere': add one whose db it lacks
    text = FINDINGS + "  - {id: elsewhere, db: missing, metric: m, rows: variant}\n"
    (out / "findings.yaml").write_text(text)
    write_sums(out)
    cp = _run("render", str(out), "--page", str(page))
    assert cp.returncode == 2 and "block 'table elsewhere' has no data" in cp.stderr
    assert "\nold\n" in page.read_text()  # nothing written
    cp = _run("render", str(out), "--page", str(page), "--partial")
    assert cp.returncode == 0, cp.stderr
    assert "table elsewhere run=19700101T000000Z-old -->\nkept" in page.read_text()
    cp = _run("check", str(out), "--page", str(page))
    assert cp.returncode == 1 and "table elsewhere" in cp.stderr


def test_an_unfinished_run_is_no_bundle(tmp_path):
    out = _bundle(tmp_path, "out", 1000.0)
    (out / "SHA256SUMS").unlink()
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    cp = _run("render", str(out), "--page", str(page))
    assert cp.returncode == 2 and "SHA256SUMS" in cp.stderr and cp.stderr.count("\n") == 1
    assert _run("check", str(out), "--page", str(page)).returncode == 1


def test_run_id_resuming_and_refusing_another_commit(tmp_path):
    assert run_id(0.0, "2add73eef8db") == "19700101T000000Z-2add73eef8db"
    assert run_id(0.0, "2add73eef8db (with uncommitted changes)") == \
        "19700101T000000Z-2add73eef8db+dirty"
    rec = Record(tmp_path, clock=iter([10.0, 20.0]).__next__)
    rid = rec.begin({"commit": "abc"})
    again = Record(tmp_path, clock=iter([30.0]).__next__)
    assert again.begin({"commit": "abc"}) == rid and again.data["resumed"] == [30.0]
    with pytest.raises(SpecError, match="new OUT_DIR"):
        Record(tmp_path).begin({"commit": "def"})


def test_keep_copies_a_small_bundle_and_only_checksums_of_a_big_one(tmp_path):
    out = _bundle(tmp_path, "out", 1000.0)
    dest = tmp_path / "repo" / "bundle"
    assert "copied" in keep(out, dest)
    assert verify(dest) == verify(out)
    big = tmp_path / "big"
    assert "over the limit" in keep(out, big, limit=10)
    assert (big / "SHA256SUMS").read_text() == (out / "SHA256SUMS").read_text()
    readme = (big / "README").read_text()
    assert "scripts/reproduce.sh" in readme and "repro_page.py check" in readme
    assert "checksums differ" in readme  # a rerun measures anew: its sums are not these
    assert not (big / "d.db").exists()
    # a second keep replaces the previous bundle's files, and only those
    assert "copied" in keep(out, dest)
    (dest / "notes.txt").write_text("someone's own file")
    with pytest.raises(BundleError, match="notes.txt"):
        keep(out, dest)
    assert (dest / "notes.txt").exists() and (dest / "d.db").exists()  # nothing removed


def test_host_facts_from_a_copied_tree(tmp_path):
    cpu = tmp_path / "sys/devices/system/cpu"
    for i, (f, g) in enumerate((("2100000", "performance"), ("1800000", "powersave"))):
        (cpu / f"cpu{i}" / "cpufreq").mkdir(parents=True)
        (cpu / f"cpu{i}" / "cpufreq" / "scaling_cur_freq").write_text(f + "\n")
        (cpu / f"cpu{i}" / "cpufreq" / "scaling_governor").write_text(g + "\n")
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text("processor\t: 0\ncpu MHz\t\t: 2095.078\n"
                                           "flags\t\t: fpu vme hypervisor lahf_lm\n")
    assert cpu_frequencies(str(tmp_path)) == ([2100.0, 1800.0], ["performance", "powersave"])
    assert hypervisor(str(tmp_path))["cpu_flag"] is True
    shutil.rmtree(cpu / "cpu0" / "cpufreq")
    shutil.rmtree(cpu / "cpu1" / "cpufreq")
    assert cpu_frequencies(str(tmp_path)) == ([2095.078], ["none"])  # a VM without cpufreq
    (tmp_path / "proc/sys/net/core").mkdir(parents=True)
    (tmp_path / "proc/sys/net/core/rmem_max").write_text("212992\n")
    got = sysctls(str(tmp_path), ("net.core.rmem_max", "net.core.nothing"))
    assert got == {"net.core.rmem_max": "212992", "net.core.nothing": "absent"}
