"""What lets a role's own check reuse the checks before it in the same run (input_rules.check_fingerprint,
checked_before, checked_record; used by the input_check action): a fingerprint changes with any value or host fact a
rule reads, never shows a secret, and means nothing under another run's key; only the roles whose host state the run
does not change are taken on preflight's word alone."""

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


def test_available_memory_which_changes_by_the_second_is_left_out():
    later = facts()
    later["memory"]["available_mib"] = (later["memory"]["available_mib"] or 0) + 512
    assert fingerprint(host=later) == fingerprint()
    resized = facts()
    resized["memory"]["total_mib"] += 1024
    assert fingerprint(host=resized) != fingerprint()


def test_a_fingerprint_shows_nothing_of_a_secret():
    printed = fingerprint(role="vllm_serve", variables={"vllm_serve_api_key": SECRET})
    assert SECRET not in printed and len(printed) == 64
    assert printed != fingerprint(role="vllm_serve", variables={"vllm_serve_api_key": SECRET + "x"})


def test_preflight_alone_vouches_for_the_roles_whose_host_state_the_run_does_not_change():
    now = {role: fingerprint(role) for role in ("build_deps", "vllm_build", "vllm_serve", "vllm_gateway")}
    record = input_rules.checked_record({"roles": {"vllm_serve": "from an earlier run"}}, "preflight", now,
                                        {"build_deps": ["g++"]})
    assert record == {"preflight": now, "roles": {}, "packages_to_install": {"build_deps": ["g++"]}}
    assert input_rules.checked_before(record, {"build_deps": now["build_deps"]})
    assert input_rules.checked_before(record, {"vllm_build": now["vllm_build"]})
    # vllm_serve's models are placed later in the run: its own check must run once they are.
    assert not input_rules.checked_before(record, {"vllm_serve": now["vllm_serve"]})
    assert not input_rules.checked_before(record, {"vllm_serve": now["vllm_serve"], "vllm_gateway": now["vllm_gateway"]})
    after_serve = input_rules.checked_record(record, "vllm_serve", {"vllm_serve": now["vllm_serve"]}, None)
    assert after_serve["packages_to_install"] == {"build_deps": ["g++"]}
    assert input_rules.checked_before(after_serve, {"vllm_serve": now["vllm_serve"], "vllm_gateway": now["vllm_gateway"]})


def test_other_values_an_unchecked_role_or_no_record_check_in_full():
    now = {"vllm_build": fingerprint("vllm_build")}
    record = input_rules.checked_record({}, "preflight", now, None)
    assert not input_rules.checked_before(record, {"vllm_build": fingerprint("vllm_build", {"vllm_build_max_jobs": 3})})
    assert not input_rules.checked_before(record, {"tcmalloc": fingerprint("tcmalloc")})
    assert not input_rules.checked_before({}, now)
    assert not input_rules.checked_before(record, {})
    # Preflight's values, then another value by the time vllm_serve checks itself: the pair is not vouched for.
    serve = input_rules.checked_record(record, "vllm_serve", {"vllm_serve": fingerprint("vllm_serve")}, None)
    changed = fingerprint("vllm_serve", {"vllm_serve_tcmalloc_path": "/usr/lib/libtcmalloc_minimal.so.4"})
    assert not input_rules.checked_before(serve, {"vllm_serve": changed})


def test_the_preflight_role_makes_the_key_the_action_reads_and_never_shows_it():
    tasks = yaml.safe_load((REPO_ROOT / "roles" / "preflight" / "tasks" / "main.yml").read_text())
    [maker] = [task for task in tasks if input_check.RUN_KEY in (task.get("ansible.builtin.set_fact") or {})]
    assert maker.get("no_log") is True and "cacheable" not in maker["ansible.builtin.set_fact"]
    assert tasks.index(maker) < next(index for index, task in enumerate(tasks) if "arm_inference.vllm.input_check" in task)
