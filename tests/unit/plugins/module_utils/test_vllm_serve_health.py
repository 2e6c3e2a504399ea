"""When the health wait stops and which journal line it names (module_utils/vllm_serve_health.py), on
journals shaped as vLLM 0.32.0, argparse, the launcher and systemd print them (tests/unit/samples/journals)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_serve_health as health

JOURNALS = Path(__file__).resolve().parents[2] / "samples" / "journals"


def _journal(name):
    return (JOURNALS / name).read_text().splitlines()


@pytest.mark.parametrize("sample, decisive", [
    ("privileged-port.txt", "PermissionError: [Errno 13] Permission denied"),
    # The API server's RuntimeError only points at the engine's cause above it.
    ("unloadable-model.txt", "OSError: /srv/models/broken does not appear to have a file named config.json."),
    ("rejected-argument.txt",
     "api_server.py: error: argument --seed: invalid int value: 'abc'"),
    ("missing-release.txt", "vllm-serve-main.service: Failed to locate executable "
                            "/opt/vllm/releases/gone/venv/bin/python: No such file or directory"),
    ("unauthenticated.txt", "vllm-serve-launch: an API key is configured but neither the systemd credential 'api_key' "
                            "(CREDENTIALS_DIRECTORY='') nor ARM_INFERENCE_API_KEY_FILE holds one; refusing to start "
                            "unauthenticated"),
])
def test_the_decisive_line_is_the_cause_not_the_tail(sample, decisive):
    lines = _journal(sample)
    assert health.decisive_line(health.last_run(lines)) == decisive
    assert decisive != lines[-1]  # not the last line, which is systemd's


def test_only_the_last_run_counts():
    earlier = _journal("privileged-port.txt")
    # A run that failed on the privileged port, then a restart with the argument the server rejects.
    lines = earlier + _journal("rejected-argument.txt")
    assert health.decisive_line(health.last_run(lines)).endswith("invalid int value: 'abc'")
    assert health.last_run(["no start line"]) == ["no start line"]


def test_a_journal_without_a_cause_names_systemds_first_failure_or_nothing():
    assert health.decisive_line(["Started x.", "x.service: Main process exited, code=killed, status=9/KILL",
                                 "Failed to start x.service."]) == "x.service: Main process exited, code=killed, " \
                                                                   "status=9/KILL"
    assert health.decisive_line(["INFO 11-26 17:02:11 [__init__.py:216] Automatically detected platform cpu."]) == ""


@pytest.mark.parametrize("state, words", [
    ({"ActiveState": "failed", "SubState": "failed", "Result": "start-limit-hit", "NRestarts": "3",
      "ExecMainCode": "1", "ExecMainStatus": "1"}, "systemd gave up on it (result start-limit-hit; its process exited "
                                                   "with status 1; 3 restarts)"),
    ({"ActiveState": "activating", "SubState": "auto-restart", "Result": "exit-code", "NRestarts": "0",
      "ExecMainCode": "1", "ExecMainStatus": "2"}, "its process exited with status 2 while starting (result exit-code)"),
    ({"ActiveState": "activating", "SubState": "auto-restart", "Result": "signal", "ExecMainCode": "2",
      "ExecMainStatus": "9"}, "its process was killed by SIGKILL (killed, often by the kernel's OOM killer) while starting"),
    # A release built for another CPU class (issue 26): systemd's signal number, named.
    ({"ActiveState": "failed", "SubState": "failed", "Result": "core-dump", "NRestarts": "3", "ExecMainCode": "3",
      "ExecMainStatus": "4"}, "its process dumped core on SIGILL (illegal instruction), the release uses CPU instructions "
     "this host lacks: build it for this host's class (vllm_build)"),
    ({"ActiveState": "inactive", "SubState": "dead", "Result": "success", "ExecMainCode": "1", "ExecMainStatus": "0"},
     "it is not running (its process exited with status 0)"),
])
def test_a_unit_that_will_not_serve_stops_the_wait(state, words):
    assert words in health.unit_verdict(state)


@pytest.mark.parametrize("state", [
    {"ActiveState": "active", "SubState": "running", "Result": "success", "ExecMainCode": "0", "ExecMainStatus": "0"},
    {"ActiveState": "activating", "SubState": "start", "Result": "success"},
    {},
])
def test_a_unit_that_runs_or_starts_is_waited_for(state):
    assert health.unit_verdict(state) is None


def test_parse_show_reads_systemctl_show():
    text = "ActiveState=failed\nSubState=failed\nResult=start-limit-hit\nExecMainStatus=1\n"
    assert health.parse_show(text) == {"ActiveState": "failed", "SubState": "failed", "Result": "start-limit-hit",
                                       "ExecMainStatus": "1"}


def test_the_message_puts_each_cause_before_the_journal_tails():
    failure = {"unit": "vllm-serve-main.service", "url": "http://127.0.0.1:80/health",
               "reason": "systemd gave up on it", "decisive": "PermissionError: [Errno 13] Permission denied",
               "tail": _journal("privileged-port.txt")}
    message = health.failure_message([failure])
    first = message.splitlines()[0]
    assert first == ("vllm_serve: not every instance can serve: vllm-serve-main.service (http://127.0.0.1:80/health): "
                     "systemd gave up on it; decisive journal line: PermissionError: [Errno 13] Permission denied.")
    assert "---- vllm-serve-main.service, last journal lines:" in message
    waited = health.failure_message([dict(failure, reason="/health did not answer 200", decisive="")], 5)
    assert waited.startswith("vllm_serve: not every instance answered /health within 5 s (vllm_serve_health_timeout): ")
