"""The stall meter's answers (``sfc-stall``'s lines) and its bounds, without the kernel."""

import pytest

from sfclab.errors import MeasurementError
from sfclab.kernel.stall import MAX_THREADS, Holds, StallMeter, parse


def test_a_line_gives_each_threads_holds_in_seconds():
    got = parse("1530:3870000:612000000:20418 1531:0:0:0\n")
    assert got == {1530: Holds(0.00387, 0.612, 20418), 1531: Holds(0.0, 0.0, 0)}


@pytest.mark.parametrize("line", ["", "ready", "1530:1:2", "1530:x:1:2", "Failed to read"])
def test_anything_else_is_a_measurement_error_that_quotes_it(line):
    with pytest.raises(MeasurementError, match="the stall meter answered"):
        parse(line)


@pytest.mark.parametrize("n", [0, MAX_THREADS + 1])
def test_a_meter_watches_one_to_sixty_four_threads(n):
    with pytest.raises(ValueError, match="1 to 64 threads"):
        StallMeter(list(range(1, n + 1)))


def test_a_missing_binary_is_a_clear_error(tmp_path):
    with pytest.raises(MeasurementError, match="cannot start the stall meter"):
        with StallMeter([1], str(tmp_path / "sfc-stall")):
            pass
