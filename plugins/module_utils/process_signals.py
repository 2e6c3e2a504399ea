# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which signal ended a process, by name and meaning: for vllm_build's release smoke test and vllm_serve's
health wait alike. No other import, so modules that ship it to a host carry nothing else."""

from __future__ import annotations

# What a signal that killed a release's Python means for the operator (signal.Signals names, no import of
# the signal module's platform-dependent numbers: Linux's are the same on x86_64 and aarch64).
SIGNALS = {4: ("SIGILL", "illegal instruction"), 6: ("SIGABRT", "aborted"), 7: ("SIGBUS", "bus error"),
           8: ("SIGFPE", "floating-point exception"), 9: ("SIGKILL", "killed, often by the kernel's OOM killer"),
           11: ("SIGSEGV", "segmentation fault"), 15: ("SIGTERM", "terminated")}


def killed_by(rc):
    """The signal that ended a process from its return code: negative from subprocess/run_command, 128+N from
    a shell; None when it exited by itself."""
    if rc is None or rc >= 0 and not 128 < rc <= 128 + 64:
        return None
    number = -rc if rc < 0 else rc - 128
    name, meaning = SIGNALS.get(number, ("signal %d" % number, "killed by a signal"))
    return {"number": number, "name": name, "meaning": meaning}


def exit_words(rc):
    """How a process ended, for a message: 'exit code 2', or 'killed by SIGILL (illegal instruction)'."""
    signal = killed_by(rc)
    return "exit code %s" % rc if signal is None else "killed by %s (%s)" % (signal["name"], signal["meaning"])
