"""The harness itself must be able to fail: a runaway child and a traceback are caught."""

from __future__ import annotations

import pytest

from ._harness import assert_clean, run_python


def test_a_runaway_allocation_hits_the_ceiling_not_the_machine() -> None:
    outcome = run_python(["-c", "x = bytearray(4 * 1024**3)"], memory_mib=512)
    assert outcome.returncode != 0
    assert "MemoryError" in outcome.stderr
    with pytest.raises(AssertionError):
        assert_clean(outcome, exit_code=0)


def test_a_traceback_is_never_a_clean_ending() -> None:
    outcome = run_python(["-c", "1/0"])
    with pytest.raises(AssertionError, match="Traceback"):
        assert_clean(outcome, exit_code=outcome.returncode)


def test_peak_memory_is_the_childs_own() -> None:
    # The child's own peak, not the test process's nor the largest child's so far:
    # a 300 MiB string shows as at least that, a bare interpreter as far less
    # (whatever this process or earlier children used).
    big = run_python(["-c", "x = b'1' * (300 * 1024**2)"])
    small = run_python(["-c", "pass"])
    assert big.peak_rss_mib >= 300, big
    assert small.peak_rss_mib < 200, small


def test_a_hang_is_cut_by_the_safety_net() -> None:
    outcome = run_python(["-c", "import time; time.sleep(60)"], timeout=1)
    assert outcome.timed_out
    with pytest.raises(AssertionError):
        assert_clean(outcome, exit_code=outcome.returncode)


def test_peak_memory_leaves_out_the_forked_test_process() -> None:
    # Regression: wait4's ru_maxrss keeps the peak of the forked copy of the test
    # process from before exec, so late in a full suite run (a large pytest process)
    # every child looked that large. Here the test process holds 300 MiB more.
    ballast = b"1" * (300 * 1024**2)
    small = run_python(["-c", "pass"])
    assert len(ballast) and small.peak_rss_mib < 200, small
