"""A recorded process is alive only while its pid still names the process that started then."""

from __future__ import annotations

import subprocess

from subagent_host.backends.liveness import process_is_alive, this_process


def test_this_process_is_alive_by_its_pid_and_start_time() -> None:
    pid, create_time = this_process()

    assert process_is_alive(pid, create_time)
    assert not process_is_alive(pid, create_time - 5.0)  # another process of that pid


def test_a_process_that_has_exited_is_not_alive() -> None:
    child = subprocess.Popen(["true"])
    _, create_time = this_process()
    child.wait()

    assert not process_is_alive(child.pid, create_time)
