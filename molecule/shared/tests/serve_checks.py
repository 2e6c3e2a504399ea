"""Helpers shared by the scenarios' tests (test_serve.py: aarch64, the fixture vLLM's server; test_engine.py:
the real vLLM; test_rolling_update.py: three hosts)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest


def only_in_scenario(name, reason, *others):
    """Mark a test module to run only in the molecule scenario `name` (or one of `others`)."""
    return pytest.mark.skipif(os.environ.get("MOLECULE_SCENARIO_NAME") not in (name,) + others, reason=reason)


def places_without_the_key(host, unit):
    """Everything an operator could read the API key from, by where it is: ps (every process's
    command line and environment), systemctl show and the unit's journal."""
    return {
        "ps": host.check_output("cat /proc/[0-9]*/cmdline /proc/[0-9]*/environ 2>/dev/null | tr '\\0' ' '; true"),
        "systemctl show": host.check_output("systemctl show %s" % unit),
        "journal": host.check_output("journalctl --no-pager -u %s" % unit),
    }


def run_playbook(playbook, *extra_vars):
    """ansible-playbook `playbook` (an FQCN) against this scenario's hosts with `-e` for each of
    `extra_vars`, as an operator would run it: (exit status, stdout + stderr without colour)."""
    command = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], playbook]
    for extra in extra_vars:
        command += ["-e", extra]
    run = subprocess.run(command, capture_output=True, text=True, env=dict(os.environ, ANSIBLE_NOCOLOR="1"), check=False)
    return run.returncode, run.stdout + run.stderr


def write_report(name, figures):
    """Figures for the closing notes: .cache/reports/<name>.json, printed by `make molecule` after the
    scenarios (they are not asserted; a 2-core CI machine is noisy)."""
    reports = os.path.join(os.environ.get("MOLECULE_PROJECT_DIRECTORY", "."), ".cache", "reports")
    os.makedirs(reports, exist_ok=True)
    with open(os.path.join(reports, name + ".json"), "w", encoding="utf-8") as handle:
        json.dump(figures, handle)
