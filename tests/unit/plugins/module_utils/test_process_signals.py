"""process_signals: which signal ended a process, from subprocess's and a shell's return codes."""

from __future__ import annotations

import pytest

from ansible_collections.arm_inference.vllm.plugins.module_utils import process_signals


@pytest.mark.parametrize("rc, name", [(-4, "SIGILL"), (132, "SIGILL"), (-11, "SIGSEGV"), (-7, "SIGBUS"), (137, "SIGKILL"),
                                      (-42, "signal 42")])
def test_killed_by_reads_subprocess_and_shell_codes(rc, name):
    assert process_signals.killed_by(rc)["name"] == name


@pytest.mark.parametrize("rc", [0, 1, 2, 127, 128, 255, None])
def test_an_exit_is_no_signal(rc):
    assert process_signals.killed_by(rc) is None


def test_exit_words_name_a_signal_or_the_code():
    assert process_signals.exit_words(-11) == "killed by SIGSEGV (segmentation fault)"
    assert process_signals.exit_words(2) == "exit code 2"
