"""The help examples' lanes (``tests/example_lanes.py``): every example runs once, in its order,
and examples that touch one lab, file or shared thing never run at once."""

from __future__ import annotations

import shlex

import pytest

from tests.example_lanes import keys, lanes
from tests.help_examples import examples

#: the lab files the examples name, with their labs (as the integration test reads them)
FILES = {"scenarios/chain5.yaml": "chain5", "scenarios/sfc-web.yaml": "sfcweb",
         "scenarios/sfc-video-chain.yaml": "video", "scenarios/demo-chain-length.yaml": "demo"}
LAB_OF = {**FILES, **{lab: lab for lab in FILES.values()}}


def copy_lanes(plan: list[list[str]]) -> list[list[str]]:
    return [ln for ln in plan if any(shlex.split(c)[1] == "traffic" and "chain5" in c for c in ln)]


def test_every_example_is_in_one_lane_in_its_order() -> None:
    cmds = examples()
    plan = lanes(cmds, LAB_OF, 3)
    copies = copy_lanes(plan)
    for lane in plan:
        assert lane == sorted(lane, key=cmds.index), lane  # the order the help gives
    ups_downs = [c for c in cmds if shlex.split(c)[1] in ("up", "down") and "chain5" in c]
    seen = [c for lane in plan for c in lane]
    for c in cmds:
        assert seen.count(c) == 1 + (len(copies) if c in ups_downs else 0), c


def test_examples_that_touch_one_thing_share_a_lane() -> None:
    """Apart from the measurements dealt over copies, two lanes never touch one thing: one lab,
    one file, the API's token or the stored calibration."""
    plan = lanes(examples(), LAB_OF, 3)
    own = [ln for ln in plan if ln not in copy_lanes(plan)]
    touched = [set().union(*(keys(c, LAB_OF) for c in ln)) for ln in own]
    for i, a in enumerate(touched):
        for b in touched[i + 1:]:
            assert not a & b, (a & b)
    lane_of = {c: n for n, ln in enumerate(own) for c in ln}
    assert lane_of["sfclab serve"] == lane_of["sfclab serve --db results.db --listen 127.0.0.1:8471"]
    assert lane_of["sfclab run scenarios/demo-chain-length.yaml --db results.db"] == \
        lane_of["sfclab report --db results.db --out report/"]


def test_each_copy_builds_measures_and_removes_its_own_chain5() -> None:
    cmds = examples()
    copies = copy_lanes(lanes(cmds, LAB_OF, 3))
    assert len(copies) == 3
    for lane in copies:
        assert lane[0] == "sfclab up scenarios/chain5.yaml" and lane[-1] == "sfclab down chain5"
        assert all(shlex.split(c)[1] == "traffic" for c in lane[1:-1]), lane
    ndrs = [sum(shlex.split(c)[2] == "ndr" for c in lane) for lane in copies]
    assert ndrs == [1, 1, 1], copies  # the three long searches on three copies


def test_a_copy_per_measurement_at_most_and_none_below_one() -> None:
    cmds = ["sfclab up scenarios/chain5.yaml", "sfclab traffic ndr chain5",
            "sfclab traffic iperf chain5", "sfclab down chain5"]
    plan = lanes(cmds, LAB_OF, 5)
    assert copy_lanes(plan) == [[cmds[0], cmds[1], cmds[3]], [cmds[0], cmds[2], cmds[3]]]
    assert lanes(cmds, LAB_OF, 1)[-1] == cmds
    with pytest.raises(ValueError):
        lanes(cmds, LAB_OF, 0)


def test_a_command_that_names_nothing_touches_only_itself() -> None:
    assert keys("sfclab ls", LAB_OF) == {"cmd:sfclab ls"}
    assert keys("sfclab exec chain5 src -- ping -c 3 198.18.3.2", LAB_OF) == {"lab:chain5"}
    assert keys("sfclab traffic calibrate --sizes 64", LAB_OF) == {"shared:the stored calibration"}
