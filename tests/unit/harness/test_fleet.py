"""The pure parts of `make fleet-scale` (tests/harness/fleet.py): reading ansible-playbook's recap and task profile,
a process tree's memory, the serving decision, the ratios, the table and the SVG."""

from __future__ import annotations

import configparser

import pytest

from harness import fleet

OUTPUT = """\
PLAY RECAP *********************************************************************
arm-inference-it-1a2b3c4d  : ok=180  changed=0    unreachable=0    failed=0    skipped=95   rescued=0    ignored=0
arm-inference-it-5e6f7a8b  : ok=181  changed=2    unreachable=0    failed=0    skipped=94   rescued=1    ignored=0

Friday 27 November 2026  04:30:00 +0000 (0:00:00.321)       0:01:23.456 ******
===============================================================================
arm_inference.vllm.preflight : Gather the facts the roles use ----------------------------------------- 4.20s
arm_inference.vllm.build_deps : Ask the package database ---------------------------------------------- 12.34s
arm_inference.vllm.vllm_build : Smoke-test the release | import vllm ---------------------------------- 7.01s
arm_inference.vllm.python_venv : Install the pinned tools ---------------------------------------------- 0.50s
arm_inference.vllm.vllm_serve : Wait until every instance answers /health, or one's unit - will not serve - 110.51s
"""


def row(run, hosts, wall, serving=False):
    return fleet.run_row(run, hosts, serving, wall, wall / 2, {"h": {"changed": 0}}, [])


def test_recap_counts_per_host():
    recap = fleet.parse_recap(OUTPUT)
    assert recap["arm-inference-it-1a2b3c4d"] == {"ok": 180, "changed": 0, "unreachable": 0, "failed": 0,
                                                  "skipped": 95, "rescued": 0, "ignored": 0}
    assert recap["arm-inference-it-5e6f7a8b"]["changed"] == 2
    assert fleet.parse_recap("no recap here") == {}


def test_profile_is_slowest_first_and_keeps_the_task_name():
    tasks = fleet.parse_profile(OUTPUT, top=4)
    assert [task["seconds"] for task in tasks] == [110.51, 12.34, 7.01, 4.2]
    assert tasks[0]["task"] == "arm_inference.vllm.vllm_serve : Wait until every instance answers /health, or one's unit - will not serve"
    assert tasks[1]["task"] == "arm_inference.vllm.build_deps : Ask the package database"
    assert tasks[2]["task"] == "arm_inference.vllm.vllm_build : Smoke-test the release | import vllm"
    # Only the summary counts: a task's own output before it that looks like a profile line does not.
    assert fleet.parse_profile("Copy ---- 99.00s\n" + OUTPUT)[0]["seconds"] == 110.51


def test_per_role_sums_each_roles_tasks():
    roles = fleet.per_role(fleet.parse_profile(OUTPUT, top=None))
    assert list(roles) == ["vllm_serve", "build_deps", "vllm_build", "preflight", "python_venv"]
    assert roles["vllm_serve"] == [110.51, 1] and roles["python_venv"] == [0.5, 1]
    assert fleet.per_role([{"task": "Gathering Facts", "seconds": 2.0}, {"task": "a.b.c : x", "seconds": 1.0},
                           {"task": "a.b.c : y", "seconds": 1.5}]) == {"Gathering Facts": [2.0, 1], "c": [2.5, 2]}


def stat(pid, ppid, pages, comm="python3"):
    return "%d (%s) S %d 1 1 0 -1 4194560 100 0 0 0 1 1 0 0 20 0 1 0 100 1000 %d 18446744073709551615" % (
        pid, comm, ppid, pages)


def test_tree_rss_sums_the_root_and_its_descendants_only():
    text = "\n".join([stat(1, 0, 100, "systemd"), stat(50, 1, 1000, "python3 -m vllm"),
                      stat(51, 50, 2000, "VLLM::Engine (core)"), stat(52, 51, 30), stat(60, 1, 5000, "haproxy")])
    assert fleet.tree_rss_kib(text, 50) == (1000 + 2000 + 30) * 4
    assert fleet.tree_rss_kib(text, 50, page_kib=64) == 3030 * 64
    assert fleet.tree_rss_kib(text, 999) == 0


def test_fleet_serves_only_when_the_largest_size_fits():
    gib = 2 ** 20
    serves, why = fleet.fleet_serves("auto", 2 * gib, [1, 8, 16, 32], 22 * gib)
    assert not serves and "32 hosts" in why and "exceeds" in why
    serves, why = fleet.fleet_serves("auto", 2 * gib, [1, 2], 22 * gib)
    assert serves and "fits" in why
    assert fleet.fleet_serves("no", 1, [1], 22 * gib) == (False, "FLEET_SERVE=no")
    assert fleet.fleet_serves("yes", 100 * gib, [32], 22 * gib) == (True, "FLEET_SERVE=yes")
    assert fleet.fleet_serves("auto", 0, [1], 22 * gib)[0] is False
    with pytest.raises(SystemExit, match="FLEET_SERVE"):
        fleet.fleet_serves("maybe", 1, [1], 1)


def test_fleet_sizes():
    assert fleet.fleet_sizes("8 1 16,32 8") == [1, 8, 16, 32]
    for bad in ("", "one", "0 8"):
        with pytest.raises(SystemExit, match="FLEET_SIZES"):
            fleet.fleet_sizes(bad)


def test_ratios_p1_and_largest_against_one():
    rows = [row("first converge (one host)", 1, 400.0, True), row("converged re-run (one host)", 1, 60.0, True),
            row("fleet re-run", 1, 50.0), row("fleet re-run", 8, 75.0), row("fleet re-run", 32, 150.0)]
    assert fleet.ratios(rows) == {"p1": 0.15, "p1_fresh": None, "largest": 32, "largest_vs_one": 3.0}
    assert fleet.ratios(rows[2:3]) == {"p1": None, "p1_fresh": None, "largest": None, "largest_vs_one": None}
    fresh = [row(fleet.FRESH_FIRST, 1, 500.0, True), row(fleet.FRESH_RERUN, 1, 40.0, True)]
    assert fleet.ratios(fresh + rows)["p1_fresh"] == 0.08
    assert fleet.ratios(fresh + rows)["p1"] == 0.15


def test_row_per_host():
    measured = fleet.run_row("fleet re-run", 8, False, 80.0, 40.0, {"a": {"changed": 0}, "b": {"changed": 1}}, [])
    assert measured["wall_per_host_s"] == 10.0 and measured["cpu_per_host_s"] == 5.0 and measured["changed"] == 1


def test_table_says_what_the_fleet_rows_exclude():
    rows = [row("first converge (one host)", 1, 400.0, True), row("converged re-run (one host)", 1, 60.0, True),
            row("converged re-run (one host)", 1, 40.0), row("fleet re-run", 1, 50.0), row("fleet re-run", 8, 75.0)]
    rows[-1]["top_tasks"] = [{"task": "role : a | b", "seconds": 3.0}]
    report = {"cpu": "AMD EPYC", "cpus": 2, "memory_gib": 23.4, "pipelining": True, "strategy": "linear",
              "serve_rss_kib": 2 * 2 ** 20, "fleet_serving": False, "fleet_serving_why": "too big", "rows": rows,
              "ratios": fleet.ratios(rows),
              "seconds_per_role": {"first-converge-one-host-1.log": {"vllm_build": [300.0, 40]},
                                   "fleet-re-run-8.log": {"python_venv": [24.7, 19], "preflight": [8.4, 3]}}}
    table = fleet.table_markdown(report)
    assert "fleet-re-run-8, seconds (tasks) per role: python_venv 25 (19), preflight 8 (3)." in table
    assert "first-converge-one-host-1, seconds" not in table
    assert "EXCLUDE serving" in table and "measured both with and without serving" in table
    assert "| fleet re-run | 8 | no | 75.0 | 37.5 | 9.38 | 4.69 | 0 | role : a / b 3.0s |" in table
    assert "P1 (converged re-run / first converge, one host, serving): 0.15" in table
    assert "on 8 hosts / on 1 host: 1.5" in table
    assert "2.00 GiB" in table and "pipelining on" in table
    assert "fresh Debian 12" not in table
    rows[:0] = [row(fleet.FRESH_FIRST, 1, 500.0, True), row(fleet.FRESH_RERUN, 1, 40.0, True)]
    report["ratios"] = fleet.ratios(rows)
    assert "P1 of a fresh Debian 12 host (its re-run / its first converge, OS packages included): 0.08." in (
        fleet.table_markdown(report))


def test_svg_plots_the_fleet_reruns_only():
    rows = [row("first converge (one host)", 1, 400.0, True), row("fleet re-run", 1, 50.0), row("fleet re-run", 8, 75.0)]
    svg = fleet.wall_svg(rows)
    assert svg.startswith("<svg") and svg.count('data-label="') == 2
    assert 'data-label="8 hosts: 75 s"' in svg and 'data-label="1 host: 50 s"' in svg
    assert fleet.wall_svg(rows[:1]) is None


def test_the_inotify_limit_is_raised_for_a_fleet_and_never_lowered(tmp_path, monkeypatch):
    limit = tmp_path / "max_user_instances"
    monkeypatch.setattr(fleet, "INOTIFY_SYSCTL", str(limit))
    limit.write_text("128\n")
    fleet.inotify_for(32)
    assert int(limit.read_text()) == 16 * (32 + 8)
    limit.write_text("8192\n")
    fleet.inotify_for(32)
    assert limit.read_text() == "8192\n"


def test_the_controller_config_names_mitogens_strategies_only_for_mitogen(tmp_path):
    fleet.fleet_config(tmp_path / "linear.cfg", "linear", True)
    fleet.fleet_config(tmp_path / "mitogen.cfg", "mitogen_linear", True, tmp_path / "strategy")
    linear, mitogen = configparser.ConfigParser(), configparser.ConfigParser()
    linear.read(tmp_path / "linear.cfg")
    mitogen.read(tmp_path / "mitogen.cfg")
    assert linear["defaults"]["strategy"] == "linear" and "strategy_plugins" not in linear["defaults"]
    assert mitogen["defaults"]["strategy"] == "mitogen_linear"
    assert mitogen["defaults"]["strategy_plugins"] == str(tmp_path / "strategy")
    assert mitogen["defaults"]["host_key_checking"] == "False"
    assert mitogen["ssh_connection"]["pipelining"] == "True"
    assert fleet.mitogen_strategies("linear") is None and fleet.mitogen_strategies("free") is None


def test_mitogen_is_pinned_exactly():
    lines = [line for line in (fleet.REPO_ROOT / "requirements-fleet.txt").read_text().splitlines()
             if line and not line.startswith("#")]
    assert lines and all(line.startswith("mitogen==") for line in lines)


def test_no_fresh_row_under_mitogen_or_when_turned_off():
    assert fleet.fresh_row_wanted("yes", "linear") and fleet.fresh_row_wanted("yes", "free")
    assert not fleet.fresh_row_wanted("no", "linear")
    assert not fleet.fresh_row_wanted("yes", "mitogen_linear")
