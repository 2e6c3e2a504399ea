"""What lets a role's own check reuse the preflight play's of the same run (input_rules.check_fingerprint,
checked_before, checked_record; used by the input_check action): a fingerprint changes with any value or steady host
fact, never shows a secret, and means nothing under another run's key; only the roles whose check asks the host
nothing but its packages are taken on preflight's word."""

from __future__ import annotations

import copy

import yaml

import input_rules_doc
from bad_inputs import SECRET, VALID
from conftest import REPO_ROOT
from ansible_collections.arm_inference.vllm.plugins.action import input_check
from ansible_collections.arm_inference.vllm.plugins.module_utils import input_rules

KEY = "k" * 43


def facts():
    return copy.deepcopy(input_rules_doc.debian12_altra()["facts"])


def fingerprint(role="vllm_gateway", variables=None, key=KEY, host=None):
    names = input_check.load_spec(role)
    return input_rules.check_fingerprint(key, role, dict(VALID, **(variables or {})), names,
                                         facts() if host is None else host)


def test_the_same_values_and_facts_give_the_same_fingerprint_and_any_change_another():
    assert fingerprint() == fingerprint()
    assert fingerprint(variables={"vllm_gateway_port": 9443}) != fingerprint()
    fewer = facts()
    fewer["cpus"]["usable_count"] -= 1
    assert fingerprint(host=fewer) != fingerprint()
    assert fingerprint(key="another run's key" + "x" * 26) != fingerprint()
    # A variable of another role is not the gateway's to vouch for.
    assert fingerprint(variables={"build_deps_cmake_min_version": "3.99"}) == fingerprint()


def test_what_changes_from_one_reading_to_the_next_is_left_out():
    later = facts()
    later["memory"]["available_mib"] = (later["memory"]["available_mib"] or 0) + 512
    later["build_max_jobs"] = later.get("build_max_jobs", 1) + 1
    assert fingerprint(host=later) == fingerprint()
    resized = facts()
    resized["memory"]["total_mib"] += 1024
    assert fingerprint(host=resized) != fingerprint()


def test_a_fingerprint_shows_nothing_of_a_secret():
    printed = fingerprint(role="vllm_serve", variables={"vllm_serve_api_key": SECRET})
    assert SECRET not in printed and len(printed) == 64
    assert printed != fingerprint(role="vllm_serve", variables={"vllm_serve_api_key": SECRET + "x"})


def test_values_json_cannot_order_give_no_fingerprint_and_no_reuse():
    mixed = {"vllm_serve_environment": {1: "a", "B": "b"}}
    assert fingerprint(role="vllm_serve", variables=mixed) is None
    now = {"python_venv": input_rules.check_fingerprint(KEY, "python_venv", {"python_venv_path": {1: 2, "x": 3}},
                                                        ["python_venv_path"], facts())}
    assert now == {"python_venv": None}
    assert input_rules.checked_record(now, None) == {"preflight": {}, "packages_to_install": {}}
    assert not input_rules.checked_before({"preflight": {"python_venv": "None"}}, now)


def test_preflight_vouches_only_for_the_roles_whose_check_asks_the_host_nothing_but_packages():
    roles = ("build_deps", "tcmalloc", "python_venv", "vllm_build", "vllm_serve", "vllm_gateway")
    now = dict((role, fingerprint(role)) for role in roles)
    record = input_rules.checked_record(now, {"build_deps": ["g++"]})
    assert record == {"preflight": dict((role, now[role]) for role in ("build_deps", "tcmalloc", "python_venv")),
                      "packages_to_install": {"build_deps": ["g++"]}}
    for role in ("build_deps", "tcmalloc", "python_venv"):
        assert input_rules.checked_before(record, {role: now[role]})
    # The disk the run fills before the build, the models it places, the listeners vllm_serve starts: asked again.
    for role in ("vllm_build", "vllm_serve", "vllm_gateway"):
        assert not input_rules.checked_before(record, {role: now[role]})
        assert not input_rules.checked_before({"preflight": now}, {role: now[role]})
    assert not input_rules.checked_before(record, {"tcmalloc": now["tcmalloc"], "vllm_serve": now["vllm_serve"]})


def test_other_values_another_run_or_no_record_check_in_full():
    record = input_rules.checked_record({"tcmalloc": fingerprint("tcmalloc")}, None)
    assert not input_rules.checked_before(record, {"tcmalloc": fingerprint("tcmalloc", {"tcmalloc_variant": "full"})})
    assert not input_rules.checked_before(record, {"tcmalloc": fingerprint("tcmalloc", key="k" * 42 + "j")})
    assert not input_rules.checked_before(record, {"build_deps": fingerprint("build_deps")})
    assert not input_rules.checked_before({}, {"tcmalloc": fingerprint("tcmalloc")})
    assert not input_rules.checked_before(record, {})


def test_the_preflight_role_makes_the_key_the_action_reads_and_never_shows_it():
    tasks = yaml.safe_load((REPO_ROOT / "roles" / "preflight" / "tasks" / "main.yml").read_text())
    [maker] = [task for task in tasks if input_check.RUN_KEY in (task.get("ansible.builtin.set_fact") or {})]
    assert maker.get("no_log") is True and "cacheable" not in maker["ansible.builtin.set_fact"]
    assert tasks.index(maker) < next(index for index, task in enumerate(tasks) if "arm_inference.vllm.input_check" in task)
