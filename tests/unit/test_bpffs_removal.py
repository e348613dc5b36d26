"""The lab's bpffs directories end with the last host's share: each host's teardown removes its
share, then the lab's directory and sfclab's when empty, while the other hosts do the same at
once (a lab over emulated SSH hosts: one bpffs).  A directory another host removed first is not
an error (CI: "No such file or directory: '/sys/fs/bpf/sfclab'"), one still holding another
lab's or host's is left, and any other failure is still raised."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from sfclab.realize import dataplane
from sfclab.realize.steering import Steering
from sfclab.realize.teardown import TeardownReport


@pytest.fixture(autouse=True)
def bpffs(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(dataplane, "BPFFS", tmp_path)


def shares(tmp_path: Path, hosts: int) -> tuple[Path, list[Path]]:
    top = dataplane.lab_dir("lab1")
    made = [top / f"@h{i}" for i in range(hosts)]
    for s in made:
        (s / "maps").mkdir(parents=True)
        (s / "maps" / "pin").write_text("")
    return top, made


def end_share(share: Path) -> list[str]:
    """One host's teardown of its share (its journal's bpffs entry): the errors it reports."""
    report = TeardownReport()
    Steering().teardown(SimpleNamespace(name="lab1"), None,  # type: ignore[arg-type]
                        [{"op": "bpffs", "path": str(share)}], report)
    return report.errors


def test_an_empty_directory_goes_a_held_one_stays_a_gone_one_is_no_error(tmp_path) -> None:
    top, (share,) = shares(tmp_path, 1)
    dataplane.remove_if_empty(top)  # holds a share
    assert share.is_dir()
    assert dataplane.remove_dir(share) == 1 and not share.exists()
    dataplane.remove_if_empty(top)
    assert not top.exists()
    dataplane.remove_if_empty(top)  # gone: nothing to do


def test_other_failures_are_raised(tmp_path) -> None:
    f = tmp_path / "file"
    f.write_text("")
    with pytest.raises(NotADirectoryError):
        dataplane.remove_if_empty(f)


def test_hosts_ending_their_shares_at_once_leave_nothing_and_raise_nothing(tmp_path) -> None:
    for _ in range(20):
        top, made = shares(tmp_path, 4)
        start = threading.Barrier(len(made))
        errors: list[str] = []

        def host(share: Path) -> None:
            start.wait()
            errors.extend(end_share(share))

        threads = [threading.Thread(target=host, args=(s,)) for s in made]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == [] and not (tmp_path / "sfclab").exists()
