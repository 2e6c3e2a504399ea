"""A contract between roles has one owner (docs/architecture.md, "Roles and their contracts").

The owner publishes its values (the fact <role>_contract when it runs, the role_contract lookup where
it has not); other roles derive their defaults from them. These tests fail when a role copies a
literal another role owns, or defaults another role's variable to a literal of its own.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.arm_inference.vllm.plugins.lookup.role_contract import LookupModule, owner_values
from ansible_collections.arm_inference.vllm.plugins.module_utils import role_contracts
from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_serve import DEFAULT_SETTINGS

REPO_ROOT = Path(__file__).resolve().parents[3]
ROLES_DIR = REPO_ROOT / "roles"
ROLES = sorted(path.name for path in ROLES_DIR.iterdir() if (path / "tasks").is_dir())

# Literals each role owns: the paths, names and markers of what it installs. No other role's files
# may contain them (its README may describe them).
OWNED = {
    "vllm_serve": [
        re.escape("/etc/vllm-serve"),
        re.escape("Managed by arm_inference.vllm.vllm_serve"),
        re.escape("vllm-serve-") + r"[*<{]",
        re.escape("/etc/systemd/system"),
    ],
    # The release root itself and anything under its current link (a release's venv, its Python).
    "vllm_build": [r"/opt/vllm(?![\w/.-])", re.escape("/opt/vllm/current")],
    "python_venv": [re.escape("/opt/vllm/venv") + r"(?![\w.-])"],
    # The model store.
    "vllm_model": [re.escape("/var/lib/vllm-models")],
}


def copied_literals(text, owner):
    return [match.group(0) for pattern in OWNED[owner] for match in re.finditer(pattern, text)]


def literal_defaults(text, owner):
    """`<owner's variable> | default(<literal>)`: a consumer's copy of the owner's default."""
    public = "|".join(re.escape(name) for name in owner_defaults(owner))
    pattern = r"\b(?:%s)\s*\)?\s*\|\s*default\(\s*(?!''|\"\"|\[\]|\{\}|omit\b|none\b|None\b|\))['\"0-9\[{-]" % public
    return re.findall(pattern, text)


def owner_defaults(role):
    return yaml.safe_load((ROLES_DIR / role / "defaults" / "main.yml").read_text()) or {}


def role_files(role):
    return [path for path in sorted((ROLES_DIR / role).rglob("*")) if path.is_file() and path.suffix != ".md"]


CONSUMER_FILES = [(owner, path) for owner in OWNED for role in ROLES if role != owner for path in role_files(role)]


@pytest.mark.parametrize("owner,path", CONSUMER_FILES,
                         ids=["%s-in-%s" % (owner, path.relative_to(ROLES_DIR)) for owner, path in CONSUMER_FILES])
def test_no_role_copies_a_literal_another_role_owns(owner, path):
    text = path.read_text()
    assert copied_literals(text, owner) == [], "read %s's contract instead (docs/architecture.md)" % owner
    assert literal_defaults(text, owner) == [], "default to %s's contract, not a copy of its default" % owner


def test_the_scan_finds_the_copies_this_collection_once_had():
    # vllm_rollout's vars and restore wait, and vllm_benchmark's defaults, before the contracts.
    assert copied_literals('_vllm_rollout_unit_marker: "# Managed by arm_inference.vllm.vllm_serve"', "vllm_serve")
    assert copied_literals('patterns: "vllm-serve-*.service"', "vllm_serve")
    assert copied_literals("vllm_benchmark_endpoints_file: /etc/vllm-serve/endpoints.json", "vllm_serve")
    assert copied_literals("vllm_benchmark_python: /opt/vllm/current/venv/bin/python", "vllm_build")
    assert copied_literals("vllm_build_venv_path: /opt/vllm/venv", "python_venv")
    assert literal_defaults("retries: {{ ((vllm_serve_health_timeout | default(600)) | int / 5) }}", "vllm_serve")
    assert literal_defaults("{{ vllm_build_root | default('/opt/vllm') }}", "vllm_build")
    # What the owners' neighbours may keep: their own paths, and "nothing published" fallbacks.
    assert not copied_literals("vllm_model_tools_venv: /opt/vllm/model-tools", "vllm_build")
    assert not copied_literals("python_venv_path: /opt/vllm/venvs/py312", "python_venv")
    assert not literal_defaults("{{ vllm_serve_contract | default(lookup('x')) }}", "vllm_serve")


# What vllm_serve does with its units and their /health, another role asks of vllm_serve's entry points
# (tasks_from: snapshot, restore) instead of writing it again from the contract: a lookup of the units by
# their marker line, a poll of an instance's /health.
SERVE_WORK = re.compile(r"\.(?:marker|unit_pattern)\b|\[['\"](?:marker|unit_pattern)['\"]\]|\bhealth_url\b"
                        r"|\bbase_url(?:['\"]\])?\s*(?:}}|~)\s*['\"]?/health")
SERVE_ENTRY_POINTS = ("snapshot", "restore")


def serve_work_copied(text):
    return [match.group(0) for match in SERVE_WORK.finditer(text)]


SERVE_CONSUMER_TASKS = [path for role in ROLES if role != "vllm_serve"
                        for path in sorted((ROLES_DIR / role / "tasks").rglob("*.yml"))]


@pytest.mark.parametrize("path", SERVE_CONSUMER_TASKS, ids=[str(path.relative_to(ROLES_DIR))
                                                            for path in SERVE_CONSUMER_TASKS])
def test_no_role_finds_vllm_serves_units_or_polls_their_health_itself(path):
    assert serve_work_copied(path.read_text()) == [], "include vllm_serve's entry points (%s) instead" % (
        ", ".join(SERVE_ENTRY_POINTS))


def test_the_serve_scan_finds_the_copies_the_rollout_once_had():
    # vllm_rollout's keep.yml and restore.yml, before vllm_serve published its snapshot and restore.
    assert serve_work_copied('contains: "^{{ _vllm_rollout_serve.marker }}$"') == [".marker"]
    assert serve_work_copied('patterns: "{{ _vllm_rollout_serve.unit_pattern }}"') == [".unit_pattern"]
    assert serve_work_copied('url: "{{ item.base_url }}/health"') == ["base_url }}/health"]
    assert serve_work_copied("url: \"{{ item['base_url'] ~ '/health' }}\"") == ["base_url'] ~ '/health"]
    assert serve_work_copied("url: \"{{ item.base_url ~ '/health' }}\"") == ["base_url ~ '/health"]
    assert serve_work_copied('url: "{{ item.health_url }}"') == ["health_url"]
    # The gateway polls its own /health, and a role's own marker is its own business.
    assert serve_work_copied('url: "{{ __vllm_gateway_endpoint.base_url }}{{ __vllm_gateway_config.health_route }}"') \
        == []
    assert serve_work_copied("marker_applies(marker, environment)") == []


def _tasks(path):
    """Every task of a task file, those inside blocks (and their rescue and always) too."""
    return _tasks_in(yaml.safe_load(path.read_text()) or [])


def _tasks_in(tasks):
    found = []
    for task in tasks:
        found.append(task)
        for part in ("block", "rescue", "always"):
            found += _tasks_in(task.get(part, []))
    return found


def test_vllm_serve_writes_its_unit_lookup_and_health_poll_once():
    tasks = [task for path in sorted((ROLES_DIR / "vllm_serve" / "tasks").glob("*.yml")) for task in _tasks(path)]
    lookups = [task for task in tasks if "_vllm_serve_marker" in str(task.get("ansible.builtin.find", ""))]
    polls = [task for task in tasks if "/health" in str(task.get("ansible.builtin.uri", {}).get("url", ""))
             or "arm_inference.vllm.vllm_serve_health" in task]
    assert len(lookups) == 1 and len(polls) == 1, (lookups, polls)


def test_the_rollout_keeps_and_restores_through_vllm_serves_entry_points():
    specs = yaml.safe_load((ROLES_DIR / "vllm_serve" / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    included = [task["ansible.builtin.include_role"].get("tasks_from")
                for path in sorted((ROLES_DIR / "vllm_rollout" / "tasks").glob("*.yml")) for task in _tasks(path)
                if task.get("ansible.builtin.include_role", {}).get("name") == "arm_inference.vllm.vllm_serve"]
    assert set(SERVE_ENTRY_POINTS) <= set(included)
    for entry_point in SERVE_ENTRY_POINTS:
        assert (ROLES_DIR / "vllm_serve" / "tasks" / (entry_point + ".yml")).is_file()
        assert specs[entry_point]["short_description"] and specs[entry_point]["options"]
    # restore reads exactly what snapshot publishes.
    [publish] = [task for task in _tasks(ROLES_DIR / "vllm_serve" / "tasks" / "snapshot.yml")
                 if "vllm_serve_snapshot" in task.get("ansible.builtin.set_fact", {})]
    published = publish["ansible.builtin.set_fact"]["vllm_serve_snapshot"]
    assert set(published) == set(specs["restore"]["options"]["vllm_serve_snapshot"]["options"])


@pytest.mark.parametrize("role", sorted(role_contracts.CONTRACTS))
def test_a_contract_reads_only_variables_its_owner_has(role):
    own = owner_values(role)
    assert [name for name in role_contracts.variables(role) if name not in own] == []
    assert all(name.startswith((role + "_", "_" + role + "_")) for name in role_contracts.variables(role))


def _lookup(role, variables=None):
    templar = Templar(loader=DataLoader(), variables=variables or {})
    [contract] = LookupModule(loader=DataLoader(), templar=templar).run([role], variables=variables or {})
    return contract


def _render(value, variables):
    return Templar(loader=DataLoader(), variables=variables).template(trust_as_template(value))


def _trusted(value):
    """A role file's value as Ansible loads it: its templates are trusted."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return dict((key, _trusted(item)) for key, item in value.items())
    if isinstance(value, list):
        return [_trusted(item) for item in value]
    return value


def _render_role_var(role, name, variables):
    """A variable of role's own files as the role sees it, with `variables` (inventory, facts) in scope."""
    own = _trusted(owner_values(role))
    return Templar(loader=DataLoader(), variables=dict(own, **variables)).template(own[name])


def test_vllm_serve_publishes_its_files_and_settings():
    contract = _lookup("vllm_serve")
    own = owner_values("vllm_serve")
    assert contract["config_dir"] == own["_vllm_serve_config_dir"]
    assert contract["endpoints_file"] == own["_vllm_serve_config_dir"] + "/endpoints.json"
    assert contract["marker"] == own["_vllm_serve_marker"] and contract["unit_dir"] == own["_vllm_serve_unit_dir"]
    assert contract["unit_pattern"] == "vllm-serve-*.service"
    assert contract["health_timeout"] == own["vllm_serve_health_timeout"] == 900
    assert (contract["user"], contract["group"]) == (own["vllm_serve_user"], own["vllm_serve_group"])
    assert contract["venv_path"] == _lookup("vllm_build")["current_venv"] == "/opt/vllm/current/venv"
    assert contract["python"] == contract["venv_path"] + "/bin/python"


def test_the_inventory_moves_every_consumer_with_the_owner():
    inventory = {"vllm_build_root": "/srv/vllm", "vllm_serve_group": "inference", "vllm_serve_health_timeout": "120",
                 "python_venv_path": "/srv/venvs/build", "python_venv_user": "builder"}
    serve = _lookup("vllm_serve", inventory)
    assert serve["venv_path"] == "/srv/vllm/current/venv" and serve["python"] == "/srv/vllm/current/venv/bin/python"
    assert (serve["group"], serve["health_timeout"]) == ("inference", 120)
    consumers = {role: owner_defaults(role) for role in ("vllm_benchmark", "vllm_build", "vllm_rollout")}
    assert _render(consumers["vllm_benchmark"]["vllm_benchmark_python"], inventory) == serve["python"]
    assert _render(consumers["vllm_rollout"]["vllm_rollout_release_root"], inventory) == "/srv/vllm"
    assert _render(consumers["vllm_build"]["vllm_build_venv_path"], inventory) == "/srv/venvs/build"
    assert _render(consumers["vllm_build"]["vllm_build_user"], inventory) == "builder"
    assert _render_role_var("vllm_model", "_vllm_model_group", dict(inventory, vllm_model_group="")) == "inference"
    # The rollback activates the previous model revisions in the store vllm_model places them in.
    store = "_vllm_rollout_model_store"
    assert _render_role_var("vllm_rollout", store, {}) == owner_values("vllm_model")["vllm_model_store"]
    assert _render_role_var("vllm_rollout", store, {"vllm_model_store": "/srv/models"}) == "/srv/models"


def test_a_published_fact_wins_over_the_owners_files():
    fact = dict(_lookup("vllm_serve"), endpoints_file="/run/published/endpoints.json")
    default = owner_defaults("vllm_benchmark")["vllm_benchmark_endpoints_file"]
    # Without the gateway the load goes to the instances vllm_serve lists; with it, through the gateway.
    without_gateway = {"vllm_gateway_enabled": False}
    assert _render(default, dict(without_gateway, vllm_serve_contract=fact)) == "/run/published/endpoints.json"
    assert _render(default, without_gateway) == "/etc/vllm-serve/endpoints.json"
    assert _render(default, {}) == "/etc/haproxy/vllm-gateway/endpoints.json"
    gateway = dict(_lookup("vllm_gateway"), endpoints_file="/run/gateway/endpoints.json")
    assert _render(default, {"vllm_gateway_contract": gateway}) == "/run/gateway/endpoints.json"


def test_vllm_serve_publishes_what_the_fit_check_weighs_as_its_rules_read_it():
    own = owner_values("vllm_serve")
    contract = _lookup("vllm_serve")
    assert contract["instances"] == own["vllm_serve_instances"] == [{"name": "main"}]
    assert contract["default_model"] == own["vllm_serve_model"] == ""
    assert (contract["kv_cache_min_gib"], contract["memory_headroom_gib"]) == (1, None)
    # -e key=value and some inventories give strings; the contract gives the numbers the tuning reads.
    given = _lookup("vllm_serve", {"vllm_serve_kv_cache_min_gib": "4", "vllm_serve_memory_headroom_gib": "2.5",
                                   "vllm_serve_model": "llama"})
    assert (given["kv_cache_min_gib"], given["memory_headroom_gib"], given["default_model"]) == (4, 2.5, "llama")
    assert _lookup("vllm_serve", {"vllm_serve_memory_headroom_gib": ""})["memory_headroom_gib"] is None
    # A value the rules refuse is passed on as given, for the consumer's check to name.
    assert _lookup("vllm_serve", {"vllm_serve_kv_cache_min_gib": "lots"})["kv_cache_min_gib"] == "lots"


def test_vllm_model_weighs_a_model_with_vllm_serves_contract():
    facts = {"ansible_facts": {"arm_inference_host": {"cpus": {"usable": "0-3"}}}}
    inventory = {"vllm_serve_instances": [{"name": "big", "model": "llama", "tensor_parallel_size": "2",
                                           "environment": {"HF_TOKEN": "hf_never_published"}}],
                 "vllm_serve_model": "tiny", "vllm_serve_kv_cache_min_gib": "3", "vllm_serve_memory_headroom_gib": 2}
    fit = _render_role_var("vllm_model", "_vllm_model_fit", dict(facts, **inventory))
    assert fit == {"facts": {"cpus": {"usable": "0-3"}}, "serve_model": "tiny", "kv_cache_min_gib": 3,
                   "memory_headroom_gib": 2.0,
                   "instances": [{"name": "big", "model": "llama", "tensor_parallel_size": "2"}]}
    defaults = _render_role_var("vllm_model", "_vllm_model_fit", facts)
    assert (defaults["instances"], defaults["serve_model"]) == ([{"name": "main"}], "")
    assert (defaults["kv_cache_min_gib"], defaults["memory_headroom_gib"]) == (1, None)
    # Where vllm_serve ran in the play, the fact it published wins over its files.
    fact = dict(_lookup("vllm_serve"), kv_cache_min_gib=6, instances=[{"name": "x", "model": "m"}])
    published = _render_role_var("vllm_model", "_vllm_model_fit", dict(facts, vllm_serve_contract=fact))
    assert (published["kv_cache_min_gib"], published["instances"]) == (6, [{"name": "x", "model": "m"}])


def test_vllm_model_installs_its_clients_from_python_venvs_package_sources():
    environment = _render_role_var("vllm_model", "_vllm_model_pip_environment", {})
    own = owner_values("python_venv")
    assert environment["PIP_TIMEOUT"] == own["python_venv_pip_timeout"]
    assert [environment[key] for key in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX",
                                         "PIP_TRUSTED_HOST", "PIP_CERT")] == [""] * 6
    inventory = {"python_venv_pip_index_url": "https://user:pw@mirror.example/simple",
                 "python_venv_pip_extra_index_urls": ["https://a.example/simple", "https://b.example/simple"],
                 "python_venv_pip_find_links": ["/srv/wheels"], "python_venv_pip_no_index": True,
                 "python_venv_pip_trusted_hosts": ["mirror.example"], "python_venv_pip_ca_bundle": "/etc/ca.pem",
                 "python_venv_pip_timeout": 15}
    environment = _render_role_var("vllm_model", "_vllm_model_pip_environment", inventory)
    assert environment["PIP_INDEX_URL"] == "https://user:pw@mirror.example/simple"
    assert environment["PIP_EXTRA_INDEX_URL"] == "https://a.example/simple https://b.example/simple"
    assert (environment["PIP_FIND_LINKS"], environment["PIP_NO_INDEX"]) == ("/srv/wheels", "1")
    assert (environment["PIP_TRUSTED_HOST"], environment["PIP_TIMEOUT"]) == ("mirror.example", 15)
    assert environment["PIP_CERT"].endswith("/pip-ca-bundle.pem")
    assert _render_role_var("vllm_model", "_vllm_model_pip_ca_bundle", inventory) == "/etc/ca.pem"


def test_python_venv_publishes_its_contract_without_showing_it():
    # The package sources' index URLs may carry credentials.
    [task] = _publishing_task(ROLES_DIR / "python_venv" / "tasks" / "configure.yml", "python_venv_contract")
    assert task.get("no_log") is True


# A role's own files read by another role: a copy of its values behind its contract's back, which the
# inventory no longer moves once the owner's files change. Each exception says why it stays.
OTHER_ROLES_FILES = re.compile(r"(?:\.\./|roles/)(%s)/(defaults|vars)/" % "|".join(ROLES))
READS_ALLOWED = {
    # The platform's Python and venv packages: python_venv loads them per platform at run time, which no
    # contract computes (docs/architecture.md).
    ("vllm_model", "tasks/tools.yml"): ["python_venv/vars/"],
}


def files_of_other_roles_read(text, role):
    return ["%s/%s/" % match.groups() for match in OTHER_ROLES_FILES.finditer(text) if match.group(1) != role]


ROLE_FILES = [(role, path) for role in ROLES for path in role_files(role)]


@pytest.mark.parametrize("role,path", ROLE_FILES, ids=[str(path.relative_to(ROLES_DIR)) for dummy, path in ROLE_FILES])
def test_no_role_reads_another_roles_defaults_or_vars(role, path):
    allowed = READS_ALLOWED.get((role, str(path.relative_to(ROLES_DIR / role))), [])
    read = [found for found in files_of_other_roles_read(path.read_text(), role) if found not in allowed]
    assert read == [], "read the owner's contract (role_contracts.py) instead of its files"


def test_the_read_scan_finds_the_reads_this_collection_once_had():
    # vllm_model's vars, before vllm_serve's and python_venv's contracts published the fit and pip settings.
    copied = "{{ lookup('ansible.builtin.file', role_path ~ '/../vllm_serve/defaults/main.yml') | from_yaml }}"
    assert files_of_other_roles_read("_vllm_model_serve_defaults: \"%s\"" % copied, "vllm_model") == [
        "vllm_serve/defaults/"]
    assert files_of_other_roles_read("file: \"{{ role_path }}/../python_venv/vars/{{ key }}.yml\"",
                                     "vllm_model") == ["python_venv/vars/"]
    assert files_of_other_roles_read("src: roles/vllm_build/vars/main.yml", "vllm_rollout") == ["vllm_build/vars/"]
    # A role's own files, and names that only look alike, are not reads of another role's.
    assert files_of_other_roles_read("file: \"{{ role_path }}/vars/{{ key }}.yml\"", "python_venv") == []
    assert files_of_other_roles_read("include_vars: ../python_venv/vars/debian.yml", "python_venv") == []
    assert files_of_other_roles_read("path: /opt/vllm_serve/defaults/x", "vllm_model") == []


def _publishing_task(path, fact):
    tasks = yaml.safe_load(path.read_text())
    return [task for task in tasks if fact in task.get("ansible.builtin.set_fact", {})]


@pytest.mark.parametrize("role,path", [("vllm_serve", "tasks/main.yml"), ("python_venv", "tasks/configure.yml"),
                                       ("vllm_gateway", "tasks/main.yml")])
def test_the_owner_publishes_its_contract_when_it_runs(role, path):
    [task] = _publishing_task(ROLES_DIR / role / path, role + "_contract")
    assert task["ansible.builtin.set_fact"][role + "_contract"] == (
        "{{ lookup('arm_inference.vllm.role_contract', '%s') }}" % role)


def test_vllm_serve_python_defaults_are_the_roles():
    # The unit filter's defaults (module_utils/vllm_serve.py) mirror the role's, which the role passes anyway.
    defaults = {name: _render(value, {}) if isinstance(value, str) and "{{" in value else value
                for name, value in owner_defaults("vllm_serve").items()}
    mirrored = {key: defaults["vllm_serve_" + key] for key in DEFAULT_SETTINGS if "vllm_serve_" + key in defaults}
    assert {key: DEFAULT_SETTINGS[key] for key in mirrored} == mirrored
    assert {"venv_path", "host", "port", "offline"} <= set(mirrored)
    assert DEFAULT_SETTINGS["launcher_path"] == owner_values("vllm_serve")["_vllm_serve_launcher"]


def test_the_playbooks_wire_build_deps_into_python_venv():
    for playbook in ("site.yml", "prepare.yml"):
        [play] = [play for play in yaml.safe_load((REPO_ROOT / "playbooks" / playbook).read_text()) if "roles" in play]
        [entry] = [role for role in play["roles"] if role["role"] == "arm_inference.vllm.python_venv"]
        assert "build_deps_toolchain.venv_requirements" in entry["vars"]["python_venv_toolchain_requirements"]
        roles = [role["role"] for role in play["roles"]]
        assert roles.index("arm_inference.vllm.build_deps") < roles.index("arm_inference.vllm.python_venv")


def test_what_site_and_serve_import_from_the_rollout_runs_under_their_role_tags():
    """site.yml and serve.yml import vllm_rollout's keep and recover under role tags (--tags vllm_serve):
    every dynamic include those files reach applies "always", or the snapshot and the restore would be
    skipped while the play still reports what it restored."""
    for playbook in ("site.yml", "serve.yml"):
        [play] = [play for play in yaml.safe_load((REPO_ROOT / "playbooks" / playbook).read_text()) if "tasks" in play]
        imported = [task for task in _tasks_in(play["tasks"]) if task.get("ansible.builtin.import_role", {}).get(
            "name") == "arm_inference.vllm.vllm_rollout"]
        assert sorted(task["ansible.builtin.import_role"]["tasks_from"] for task in imported) == ["keep", "recover"]
        assert all(task.get("tags") for task in imported), playbook
    recover = _tasks(ROLES_DIR / "vllm_rollout" / "tasks" / "recover.yml")
    assert not [task for task in recover if "ansible.builtin.include_tasks" in task]
    for name in ("keep.yml", "back.yml"):
        for task in _tasks(ROLES_DIR / "vllm_rollout" / "tasks" / name):
            include = task.get("ansible.builtin.include_role") or task.get("ansible.builtin.include_tasks")
            if include is not None:
                assert isinstance(include, dict) and "always" in include.get("apply", {}).get("tags", []), (name, task)


def test_owner_values_are_parsed_once_per_version_of_the_files_and_handed_out_as_copies(tmp_path, monkeypatch):
    from ansible_collections.arm_inference.vllm.plugins.lookup import role_contract

    (tmp_path / "owner" / "defaults").mkdir(parents=True)
    defaults = tmp_path / "owner" / "defaults" / "main.yml"
    defaults.write_text("owner_list: [a]\nowner_path: /one\n")
    monkeypatch.setattr(role_contract, "ROLES_DIR", tmp_path)
    first = role_contract.owner_values("owner")
    first["owner_list"].append("changed by a consumer")
    assert role_contract.owner_values("owner") == {"owner_list": ["a"], "owner_path": "/one"}
    assert role_contract.owner_values("owner", ["owner_path", "absent"]) == {"owner_path": "/one"}
    defaults.write_text("owner_list: [b]\nowner_path: /two\n")
    os.utime(defaults, ns=(defaults.stat().st_mtime_ns + 10**9,) * 2)
    assert role_contract.owner_values("owner") == {"owner_list": ["b"], "owner_path": "/two"}


def test_vllm_serve_reads_the_names_of_the_declared_models_and_none_of_their_secrets():
    """vllm_model's entries carry a hub token, S3 keys and HTTP headers; vllm_serve needs only which names are declared,
    so its settings (passed to its filters, whose errors and results Ansible may print) hold the names alone."""
    models = [{"name": "tiny", "source": "hf://org/tiny", "revision": "a" * 40, "token": "hf_never_in_serve"},
              {"name": "bucketed", "source": "s3://models/org/tiny", "secret_access_key": "never-in-serve",
               "headers": {"X-Api-Key": "never-in-serve-either"}}]
    declared = _render_role_var("vllm_serve", "_vllm_serve_declared_models", {"vllm_model_models": models})
    assert declared == ["tiny", "bucketed"]
    assert _render_role_var("vllm_serve", "_vllm_serve_declared_models", {}) == []
