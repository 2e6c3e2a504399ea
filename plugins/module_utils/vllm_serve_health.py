# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""When to stop waiting for a vLLM instance's /health, and what its journal says went wrong.

The vllm_serve_health module polls each instance's /health; between polls it asks systemd about the
instance's unit (unit_verdict) and, for a unit that will not serve, reads its journal and picks the
line that says why (decisive_line). A server that exits while it starts exits again the same way:
its unit, environment and files do not change between systemd's restarts, so waiting out the start
limit and the health timeout tells nothing more.
"""

from __future__ import annotations

import re

from ansible_collections.arm_inference.vllm.plugins.module_utils.process_signals import killed_by

# Properties read with `systemctl show --property=...`.
UNIT_PROPERTIES = ("ActiveState", "SubState", "Result", "NRestarts", "ExecMainCode", "ExecMainStatus")
# A Python exception line as a traceback ends: "PermissionError: [Errno 13] Permission denied",
# "torch.OutOfMemoryError: ...", "SystemExit: 2".
EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Za-z_][A-Za-z0-9_]*(?:Error|Exception|Exit|Interrupt)"
                            r"(?::\s.*)?$")
# What vLLM puts before a line: its process ("(APIServer pid=4121) ", "(EngineCore_DP0 pid=5012) ") and its
# logger's level, date and source ("ERROR 11-26 17:02:14 [core.py:708] ").
VLLM_PREFIX = re.compile(r"^(?:\([A-Za-z0-9_]+ pid=\d+\)\s*)?(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) "
                         r"\d\d-\d\d [0-9:.]+ \[[^\]]*\]\s*)?")
# Lines that point at an earlier one ("See root cause above."): the cause is the exception before.
POINTS_ABOVE = re.compile(r"\babove\b", re.IGNORECASE)
# argparse ("api_server.py: error: unrecognized arguments: --bogus"), log levels, the launcher's refusal.
ERROR_LINE = re.compile(r"(\b[Ee]rror:|^ERROR\b|\bERROR \d|\bFATAL\b|\bKilled\b|\brefusing to\b)")
# systemd's own lines about the unit (from PID 1): a start that failed before Python ran, then how it ended.
SYSTEMD_FAILURE = re.compile(r"(Failed to |Failed at step|code=(?:exited|killed|dumped), status=)")


def parse_show(text):
    """{property: value} from `systemctl show` output."""
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def _code_words(state):
    """How the main process ended, in words (ExecMainCode is a CLD_* number: 1 exited, 2 killed, 3 dumped), a
    signal by its name (process_signals, as the release smoke test names it) and SIGILL with what it means."""
    code, status = str(state.get("ExecMainCode", "")), str(state.get("ExecMainStatus", ""))
    if code in ("2", "3") and status.isdigit() and int(status) > 0:
        signal = killed_by(-int(status))
        words = "%s %s (%s)" % ("was killed by" if code == "2" else "dumped core on", signal["name"], signal["meaning"])
        if signal["name"] == "SIGILL":
            words += ", the release uses CPU instructions this host lacks: build it for this host's class (vllm_build)"
        return words
    return {"1": "exited with status %s" % status, "2": "was killed by signal %s" % status,
            "3": "dumped core on signal %s" % status}.get(code, "ended (code %s, status %s)" % (code, status))


def unit_verdict(state):
    """Why the unit will not serve, from its `systemctl show` properties, or None while it may still.

    Failed (systemd gave up: the start limit hit, or no restart configured), inactive (stopped, or
    exited with status 0, which Restart=on-failure does not restart), or waiting to be restarted after
    its process exited (auto-restart): the same unit exits again the same way."""
    active, sub, result = state.get("ActiveState", ""), state.get("SubState", ""), state.get("Result", "")
    if active == "failed":
        return "systemd gave up on it (result %s; its process %s; %s restarts)" % (
            result or "failed", _code_words(state), state.get("NRestarts") or "0")
    if active == "inactive":
        return "it is not running (its process %s)" % _code_words(state)
    if sub == "auto-restart":
        return "its process %s while starting (result %s), and systemd would only start the same again" % (
            _code_words(state), result or "?")
    return None


def decisive_line(lines):
    """The journal line that says why the server stopped, from its last lines (oldest first), or "".

    The last exception line of a traceback, without vLLM's prefix (one that only points at an earlier cause yields to the
    exception before it), else the last error line (argparse's "error:", an ERROR log line, the
    launcher's refusal, "Killed"), else systemd's first failure line about the unit."""
    lines = [line.strip() for line in lines if line.strip()]
    exceptions = [text for text in (VLLM_PREFIX.sub("", line) for line in lines) if EXCEPTION_LINE.match(text)]
    if exceptions:
        own = [line for line in exceptions if not POINTS_ABOVE.search(line)]
        return (own or exceptions)[-1]
    errors = [line for line in lines if ERROR_LINE.search(line)]
    if errors:
        return errors[-1]
    # systemd's first: "Failed to execute ...", then "Main process exited, ..." and "Failed to start" follow.
    return next((line for line in lines if SYSTEMD_FAILURE.search(line)), "")


def last_run(lines):
    """The journal lines of the unit's last run: after systemd's last "Started"/"Starting" line (all of
    them when there is none in the lines read)."""
    starts = [index for index, line in enumerate(lines) if re.match(r"^(Started|Starting) ", line)]
    return list(lines[starts[-1] + 1:]) if starts else list(lines)


def failure_message(failures, timeout=None):
    """One message for every instance that will not serve, each with why and its decisive line, then
    its journal tail. failures: [{unit, url, reason, decisive, tail}]; timeout: the seconds waited
    when the reason is that /health never answered."""
    head = ("vllm_serve: not every instance answered /health within %s s (vllm_serve_health_timeout)" % timeout
            if timeout is not None else "vllm_serve: not every instance can serve")
    parts = [head + ": " + "; ".join(
        "%s (%s): %s%s" % (entry["unit"], entry["url"], entry["reason"],
                           "; decisive journal line: %s" % entry["decisive"] if entry.get("decisive") else "")
        for entry in failures) + "."]
    for entry in failures:
        parts.append("---- %s, last journal lines:\n%s" % (entry["unit"], "\n".join(entry.get("tail") or [])))
    return "\n".join(parts)
