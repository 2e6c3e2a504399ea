"""The one rule set: every bad-input case of site.yml's roles is refused by the Python rules, in one
line that starts with the variable, and a valid inventory passes (so each case fails for its own reason)."""

from __future__ import annotations

import re

import pytest

import input_rules_doc
from bad_inputs import AUTOTUNE_CASES, AUTOTUNE_VALID, CASES, SECRET, VALID, case_id
from conftest import REPO_ROOT
from ansible_collections.arm_inference.vllm.plugins.module_utils import input_rules


@pytest.fixture(scope="module")
def debian12_altra():
    return input_rules_doc.debian12_altra()


def problems(inventory, host, roles=input_rules_doc.SITE_ROLES):
    return [message for dummy, message in input_rules_doc.problems(inventory, host, roles)]


def test_a_valid_inventory_passes_every_rule(debian12_altra):
    assert problems(VALID, debian12_altra) == []


def test_the_table_has_a_case_for_each_of_sixty_variables_or_more():
    assert len({expected.split("[")[0].split(".")[0] for dummy, expected in CASES}) >= 60
    assert len(CASES) >= 60


@pytest.mark.parametrize("variables,expected", CASES, ids=[case_id(case) for case in CASES])
def test_bad_input_is_refused_in_one_line_naming_the_variable(debian12_altra, variables, expected):
    lines = problems(dict(VALID, **variables), debian12_altra)
    assert lines, "accepted: %r" % variables
    assert any(line.startswith(expected + ":") for line in lines), lines
    for line in lines:
        assert "\n" not in line and SECRET not in line and "{{" not in line


@pytest.mark.parametrize("variables,expected", CASES, ids=[case_id(case) for case in CASES])
def test_every_message_reads_variable_problem_got_and_fix(debian12_altra, variables, expected):
    """The issue's one-line form, `<variable>: <what is wrong> (got <value>); <what to do>`, for each
    case's message about its variable. A secret's value is never shown: InputError(show_got=False)
    renders `<variable>: <what is wrong>; <what to do>` and the case must say so in SECRET_FORM."""
    lines = [line for line in problems(dict(VALID, **variables), debian12_altra) if line.startswith(expected + ":")]
    assert lines, "no message about %s" % expected
    secret = expected in SECRET_VARIABLES or (expected.startswith("vllm_gateway_api_keys") and not expected.endswith(".name"))
    form = SECRET_FORM if secret else GOT_FORM
    for line in lines:
        assert form.match(line[len(expected):]), line
        assert not secret or "(got" not in line, line


# After the variable: what is wrong, the value it got, what to do (secrets: without the value).
GOT_FORM = re.compile(r"^: .+ \(got .+\); .+$")
SECRET_FORM = re.compile(r"^: [^()]+(\([^()]*\)[^()]*)*; .+$")
SECRET_VARIABLES = ("vllm_serve_api_key",)


def test_a_message_says_what_is_wrong_what_it_got_and_what_to_do():
    error = input_rules.InputError("vllm_build_timeout", "must be an integer >= 60", 30, "set it to 60 or more")
    assert str(error) == "vllm_build_timeout: must be an integer >= 60 (got 30); set it to 60 or more"


def test_shown_values_lose_url_credentials_newlines_and_length():
    assert SECRET not in input_rules.shown("https://user:%s@mirror.example/simple" % SECRET)
    assert input_rules.shown("a\nb") == "'a\\nb'"
    assert len(input_rules.shown("x" * 500)) == input_rules.SHOWN_LENGTH


def test_trust_remote_code_is_on_only_through_its_variable(debian12_altra):
    from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_serve import serve_units

    settings = input_rules.serve_settings(dict(VALID, vllm_serve_trust_remote_code=True, vllm_serve_model="org/tiny",
                                               vllm_serve_port=8000, vllm_serve_host="127.0.0.1"))
    settings = {key: value for key, value in settings.items() if value is not None}
    [unit] = serve_units(debian12_altra["facts"], [{"name": "main", "model_weights_gib": 1}], settings)
    assert "--trust-remote-code" in unit["arguments"]


# vllm_serve's preflight alone (roles [vllm_serve]: no gateway rule) on a non-loopback bind that lets every address in.
OPEN_BIND = dict(VALID, vllm_serve_host="0.0.0.0", vllm_serve_ip_address_allow=["any"])
NO_KEY = "vllm_serve_host: is reachable from other machines, but no API key is configured"


@pytest.mark.parametrize("variables,gateway,generated,refused", [
    # The gateway on: vllm_serve generates vLLM's key (api_key_plan), so the bind is authenticated.
    ({}, True, False, False),
    # Generation turned off and no key of the operator's: nothing authenticates it.
    ({"vllm_serve_api_key_generate": "never"}, True, False, True),
    # The gateway off: no key is generated, unless one generated earlier is kept (api_key_plan keeps it).
    ({}, False, False, True),
    ({}, False, True, False),
    ({"vllm_serve_api_key_generate": "never"}, False, True, True),
    # The operator's key or file always counts.
    ({"vllm_serve_api_key": SECRET}, False, False, False),
    ({"vllm_serve_api_key_file": "/etc/key", "vllm_serve_api_key_generate": "never"}, False, False, False),
])
def test_the_preflight_counts_the_key_vllm_serve_would_generate(debian12_altra, variables, gateway, generated, refused):
    """The preflight and the role's plan (vllm_serve.api_key_plan, which plan.yml runs) agree on whether vLLM gets a
    key, so a non-loopback bind is refused exactly when the role would serve it without one."""
    from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_serve import api_key_plan

    host = dict(debian12_altra, gateway_enabled=gateway, generated_api_key_exists=generated)
    lines = problems(dict(OPEN_BIND, **variables), host, ["vllm_serve"])
    assert any(line.startswith(NO_KEY) for line in lines) == refused, lines
    plan = api_key_plan({"api_key": bool(variables.get("vllm_serve_api_key")),
                         "api_key_file": variables.get("vllm_serve_api_key_file", ""),
                         "generate": variables.get("vllm_serve_api_key_generate", "auto"), "gateway_enabled": gateway,
                         "generated_exists": generated, "stored_path": "/s", "generated_path": "/g"})
    assert (plan["source"] == "") == refused
    if refused:
        [line] = [line for line in lines if line.startswith(NO_KEY)]
        assert "vllm_serve_api_key_generate: auto" in line and "vllm_gateway_enabled: true" in line, line


def test_without_the_hosts_answer_the_gateway_is_read_from_the_variables(debian12_altra):
    """site.yml's rules (vllm_gateway's among them): the gateway's default is on, so the key is generated and only
    the gateway's own rule (clients would bypass it) names the bind; with the gateway off, the missing key does."""
    lines = problems(OPEN_BIND, debian12_altra)
    assert not any(line.startswith(NO_KEY) for line in lines) and any("bypass vllm_gateway" in line for line in lines)
    lines = problems(dict(OPEN_BIND, vllm_gateway_enabled=False), debian12_altra)
    assert any(line.startswith(NO_KEY) for line in lines), lines


@pytest.mark.parametrize("variables,gateway,matters", [
    ({"vllm_serve_host": "0.0.0.0"}, False, True),
    ({"vllm_serve_host": "127.0.0.1", "vllm_serve_instances": [{"name": "a", "host": "10.0.0.5"}]}, False, True),
    ({"vllm_serve_host": "0.0.0.0"}, True, False),
    ({"vllm_serve_host": "127.0.0.1"}, False, False),
    ({"vllm_serve_host": "not-an-address"}, False, False),
    ({"vllm_serve_host": "0.0.0.0", "vllm_serve_api_key": SECRET}, False, False),
    ({"vllm_serve_host": "0.0.0.0", "vllm_serve_api_key_generate": "never"}, False, False),
    ({"vllm_serve_host": "0.0.0.0", "vllm_serve_instances": "main"}, False, True),
])
def test_the_host_is_asked_for_a_generated_key_only_where_it_decides(variables, gateway, matters):
    """input_check stats the host's generated key only where that alone can authenticate a non-loopback bind."""
    assert input_rules.generated_key_matters(variables, gateway) == matters


@pytest.mark.parametrize("variables,expected", [
    ({"vllm_benchmark_concurrency": [4, 0]}, "vllm_benchmark_concurrency"),
    ({"vllm_benchmark_concurrency": []}, "vllm_benchmark_concurrency"),
    ({"vllm_benchmark_max_tokens": 0}, "vllm_benchmark_max_tokens"),
    ({"vllm_benchmark_requests": -1}, "vllm_benchmark_requests"),
    ({"vllm_benchmark_timeout": 0}, "vllm_benchmark_timeout"),
    ({"vllm_benchmark_prompts": []}, "vllm_benchmark_prompts"),
    ({"vllm_benchmark_prompts": ["  "]}, "vllm_benchmark_prompts"),
    ({"vllm_benchmark_max_tokens": "lots"}, "vllm_benchmark_max_tokens"),
])
def test_benchmark_settings(debian12_altra, variables, expected):
    lines = problems(variables, debian12_altra, ["vllm_benchmark"])
    assert any(line.startswith(expected + ":") for line in lines), lines


@pytest.mark.parametrize("variables,expected", [
    ({"vllm_rollout_smoke_concurrency": 0}, "vllm_rollout_smoke_concurrency"),
    ({"vllm_rollout_smoke_max_tokens": 0}, "vllm_rollout_smoke_max_tokens"),
    ({"vllm_rollout_backup_dir": "rollout"}, "vllm_rollout_backup_dir"),
    ({"vllm_rollout_release_root": "opt"}, "vllm_rollout_release_root"),
    ({"vllm_rollout_leave_rotation_tasks": "hooks/leave.yml"}, "vllm_rollout_leave_rotation_tasks"),
    ({"vllm_rollout_join_rotation_tasks": "/nonexistent/join.yml"}, "vllm_rollout_join_rotation_tasks"),
    ({"vllm_benchmark_prompts": []}, "vllm_benchmark_prompts"),
])
def test_rollout_settings(debian12_altra, variables, expected):
    inventory = dict({"vllm_rollout_release_root": "/opt/vllm"}, **variables)
    lines = problems(inventory, debian12_altra, ["vllm_rollout", "vllm_benchmark"])
    assert any(line.startswith(expected + ":") for line in lines), lines


def test_every_rule_is_in_the_table_and_every_role_has_an_entry():
    roles = sorted(path.parent.parent.name for path in (REPO_ROOT / "roles").glob("*/meta/argument_specs.yml"))
    assert set(input_rules.RULES) <= set(roles)
    # preflight checks the others; os_packages (internal) takes only what its callers' preflight computed.
    assert set(roles) - set(input_rules.RULES) <= {"preflight", "os_packages"}


# Roles whose every public setting (defaults/main.yml) has a bad-input case in bad_inputs.CASES; a role joins once it
# has one per setting, and then a setting added without a case fails here.
COVERED_ROLES = ("vllm_model", "vllm_gateway", "tcmalloc")


@pytest.mark.parametrize("role", COVERED_ROLES)
def test_every_public_setting_has_a_bad_input_case(role):
    import yaml

    settings = yaml.safe_load((REPO_ROOT / "roles" / role / "defaults" / "main.yml").read_text()) or {}
    named = {expected.split("[")[0].split(".")[0].split(" ")[0] for dummy, expected in CASES}
    assert sorted(set(settings) - named) == [], "settings of %s without a bad-input case in bad_inputs.py" % role


def test_every_key_of_a_model_has_a_bad_input_case():
    """vllm_model_models entries: each key, including those only some sources take (the hub's, S3's, the checksums of
    file lists), has a case whose message names it."""
    from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_model_store import MODEL_KEYS

    named = {re.sub(r"^vllm_model_models\[\d+\]( \([^)]*\))?\.?", "", expected) for dummy, expected in CASES
             if expected.startswith("vllm_model_models[")}
    assert sorted(set(MODEL_KEYS) - named) == []


def test_docs_table_is_current():
    assert input_rules_doc.render() == input_rules_doc.DOCS.read_text(), "run make golden and review the diff"


def test_an_environment_that_lifts_the_acl_cap_beyond_memory_is_refused(debian12_altra):
    # 80 Neoverse-N1 cores: nproc ignores OMP_THREAD_LIMIT=0, so ACL would run 80 jobs of 2 GiB.
    lines = problems(dict(VALID, vllm_build_environment={"OMP_THREAD_LIMIT": "0"}), debian12_altra)
    assert any(line.startswith("vllm_build_environment: OMP_THREAD_LIMIT makes the Arm Compute Library step")
               for line in lines), lines


@pytest.mark.parametrize("build_deps, python_venv, wrong", [
    ("", "3.11", "3.13"), ("3.12", "", "3.12"), ("", "", None), ("3.11", "3.11", None), ("3.13", "", None)])
def test_the_headers_build_deps_installs_are_for_the_build_venvs_python(build_deps, python_venv, wrong):
    # Debian 13: Python 3.13 by default. The real-tree rehearsal met this: a venv from Python 3.11 with only
    # 3.13's headers failed at vLLM's CMake configure.
    host = {"default_python": "3.13"}
    errors = input_rules.build_deps_python({"build_deps_python_version": build_deps,
                                            "python_venv_python_version": python_venv}, host)
    if wrong is None:
        assert errors == []
    else:
        venv = python_venv or "3.13"
        assert [str(error) for error in errors] == [
            "build_deps_python_version: installs the headers of Python %s, but python_venv_python_version makes the "
            "build venv from Python %s, whose headers vLLM's build needs (got %r); set build_deps_python_version to %s "
            "too" % (wrong, venv, build_deps, venv)]
    # build_deps alone (no python_venv in the run): nothing to compare.
    assert input_rules.build_deps_python({"build_deps_python_version": build_deps}, host) == []


@pytest.mark.parametrize("variables,expected", AUTOTUNE_CASES, ids=[case_id(case) for case in AUTOTUNE_CASES])
def test_bad_autotune_input_is_refused_in_one_line_naming_the_variable(debian12_altra, variables, expected):
    lines = problems(dict(VALID, **dict(AUTOTUNE_VALID, **variables)), debian12_altra, roles=["vllm_serve", "vllm_autotune"])
    assert any(line.startswith(expected + ":") for line in lines), lines
    for line in lines:
        assert "\n" not in line and GOT_FORM.match(line[len(line.split(":")[0]):]), line
    assert problems(dict(VALID, **AUTOTUNE_VALID), debian12_altra, roles=["vllm_serve", "vllm_autotune"]) == []


def test_the_gateways_open_files_are_checked_only_where_the_host_says_how_many_it_gives(debian12_altra):
    """The default 4096 slots on the matrix's host (4096 open files) are refused; a host that does not say
    (service_open_files None: /proc/1/limits unreadable) or a gateway that is off is not."""
    inventory = dict(VALID, vllm_gateway_max_connections=4096)
    assert [line for line in problems(inventory, debian12_altra) if "open files" in line]
    unknown = dict(debian12_altra, ports=dict(debian12_altra["ports"], service_open_files=None))
    assert problems(inventory, unknown) == []
    assert problems(dict(inventory, vllm_gateway_enabled=False), debian12_altra) == []
