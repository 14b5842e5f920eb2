"""The default memory limit of a call: scaled to the job, never the machine.

Unset, ``TFCOMPRESS_MEMORY_LIMIT`` gives each call what its child holds already plus 2 GiB
plus 16 times the bytes the job brings, at most half the machine; set, it holds for every
call; fine-tuning gets the whole limit (its memory grows with the batch and the model).
"""

from __future__ import annotations

import sys

import pytest

from tfcompress._limits import (
    CALL_FACTOR,
    CALL_HEADROOM,
    CHILD_MEMORY,
    call_memory,
    job_bytes,
    note_job_bytes,
)
from tfcompress.errors import ResourceLimitError

GIB = 2**30


def test_the_rule_held_plus_headroom_scaled_to_the_job_at_most_the_ceiling():
    assert (CALL_HEADROOM, CALL_FACTOR) == (2 * GIB, 16)
    assert call_memory(12 * GIB, GIB, 2048) == GIB + 2 * GIB + 16 * 2048  # a 2 KB model
    assert call_memory(12 * GIB, GIB, 300 * 2**20) == 3 * GIB + 16 * 300 * 2**20  # 300 MB data
    assert call_memory(2 * GIB, GIB, 2048) == 2 * GIB  # a small machine: its ceiling
    assert call_memory(12 * GIB, None, 2048) == 12 * GIB  # held unknown (not Linux): ceiling
    note_job_bytes(5000)  # a model file read in this process: the job brings at least that
    assert job_bytes(2048) >= 5000 and job_bytes(10**9) == 10**9


def test_a_job_that_brings_little_cannot_take_gigabytes(monkeypatch):
    from tfcompress._child import Worker

    monkeypatch.delenv("TFCOMPRESS_MEMORY_LIMIT", raising=False)
    with Worker(fork="never") as worker, pytest.raises(ResourceLimitError, match="more memory"):
        worker.call("builtins:bytearray", 3 * GIB, what="allocating 3 GiB")


def test_a_limit_the_user_sets_holds_for_every_call(monkeypatch):
    """Outside a command the caller's own memory (a notebook's, this test run's) is not counted."""
    from tfcompress._child import Worker

    monkeypatch.setenv("TFCOMPRESS_MEMORY_LIMIT", "1GiB")
    assert CHILD_MEMORY.is_set() and CHILD_MEMORY.value() == GIB
    with Worker(fork="never") as worker:
        assert worker.call("builtins:len", bytes(10 * 2**20), what="a 10 MB request") == 10 * 2**20
        with pytest.raises(ResourceLimitError, match="1 GiB"):
            worker.call("builtins:bytearray", GIB, what="allocating 1 GiB")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and RLIMIT_DATA")
def test_the_limit_bounds_the_caller_and_its_children_together(monkeypatch):
    import numpy as np

    from tfcompress._child import Worker
    from tfcompress._child.process import command_memory, command_resident

    # A command (the CLI's main enters command_memory) may use 1.5 GiB more than the warm
    # children this test run already holds: its caller's growth and its children together.
    with command_memory():
        monkeypatch.setenv("TFCOMPRESS_MEMORY_LIMIT", str(command_resident() + GIB + GIB // 2))
    with command_memory(), Worker(fork="never") as worker:
        # Margins of a quarter GiB or more both ways: the child's own start and this process's
        # other growth (a test run's) move the sums by a few hundred MB.
        assert worker.call("_child_fakes:allocate", GIB // 2, what="0.5 GiB") > 0
        held_here = np.ones(GIB, np.uint8)  # the caller takes 1 GiB meanwhile: 0.5 GiB left
        with pytest.raises(ResourceLimitError, match="more memory"):
            worker.call("_child_fakes:allocate", 3 * GIB // 4, what="0.75 GiB more")
        del held_here
