import pytest

from trainers.engine import intervals


def test_fires_on_positive_multiples_only():
    assert [intervals.fires(s, 5) for s in (0, 4, 5, 10, 11)] == [False, False, True, True, False]
    assert not intervals.fires(10, 0)


@pytest.mark.parametrize("step, total, per_loop, periods, expected", [
    (0, 100, 50, [], 50),
    (0, 30, 50, [], 30),
    (0, 100, 50, [20], 20),
    (20, 100, 50, [20, 0], 40),
    (45, 100, 50, [20, 30], 60),
    (95, 100, 50, [200], 100),
    (7, 100, 1, [5], 8),
    (95, None, 50, [200], 145),  # no total: a run only a time budget ends
    (95, None, 50, [20], 100),
])
def test_next_stop(step, total, per_loop, periods, expected):
    assert intervals.next_stop(step, total=total, cycles_per_loop=per_loop, intervals=periods) == expected


def test_next_stop_rejects_finished_run():
    with pytest.raises(ValueError, match="already"):
        intervals.next_stop(10, total=10, cycles_per_loop=5, intervals=[])
