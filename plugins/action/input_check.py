# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check roles' variables and the host against every rule before anything changes.

For each role named: the OS and architecture, each variable against the role's argument spec
(types, choices, elements; one line per problem instead of Ansible's spec dump), then the role's
rules in module_utils/input_rules.py with the host's facts. Reads the host in one module run (host_survey): the
CPUs and memory (host_facts' answer), the free disk under the build root when vllm_build is checked, the listening
sockets, bindable addresses and the open files a service can get when vllm_serve or vllm_gateway is (host_ports'),
the local models' files (vllm_model_info's), whether vllm_serve generated a key earlier (only for a non-loopback bind
that nothing else would authenticate), and whether its package manager can install the OS packages of build_deps,
tcmalloc, python_venv and an enabled vllm_gateway (package_candidates'); the one thing it may write is apt's package
lists, refreshed when the roles would refresh them before installing.
Last, when vllm_model is checked and every rule holds, it asks the host whether it can place
each declared model (vllm_model_fetch action reach, read-only: the source must answer and the revision fit), so an
unreachable hub, bucket or origin stops the run before any host changes.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml
from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.plugins.loader import lookup_loader
from ansible.template import trust_as_template
from ansible.utils.display import Display
from ansible_collections.arm_inference.vllm.plugins.filter.platform import platform_support
from ansible_collections.arm_inference.vllm.plugins.module_utils import input_rules, vllm_model_store, vllm_serve

display = Display()
ROLES_DIR = Path(__file__).resolve().parents[2] / "roles"


def load_spec(role):
    with open(ROLES_DIR / role / "meta" / "argument_specs.yml") as handle:
        return yaml.safe_load(handle)["argument_specs"]["main"]["options"]


def os_vars(role, platform_key):
    """A role's OS-specific variables (plain values only; templated entries are left out)."""
    path = ROLES_DIR / role / "vars" / ("%s.yml" % platform_key)
    if not path.is_file():
        return {}
    with open(path) as handle:
        return {key: value for key, value in (yaml.safe_load(handle) or {}).items()
                if not (isinstance(value, str) and "{{" in value)}


def owner_vars(role):
    """A role's vars/main.yml as written."""
    with open(ROLES_DIR / role / "vars" / "main.yml") as handle:
        return yaml.safe_load(handle) or {}


def package_vars(role, platform_key, values, templar):
    """A role's vars/<os>.yml as written, and with its templates rendered with `values` (the internal
    variables the role sets before it reads them, input_rules.template_values)."""
    with open(ROLES_DIR / role / "vars" / ("%s.yml" % platform_key)) as handle:
        written = yaml.safe_load(handle) or {}
    renderer = templar.copy_with_new_env(available_variables=values)

    def rendered(value):
        if isinstance(value, str) and "{{" in value:
            return renderer.template(trust_as_template(value))
        if isinstance(value, list):
            return [rendered(item) for item in value]
        if isinstance(value, dict):
            return {key: rendered(item) for key, item in value.items()}
        return value

    return written, {key: rendered(value) for key, value in written.items()}


# The preflight role's per-run key for the checks' fingerprints (roles/preflight/tasks/main.yml): a set_fact made
# with no_log, so never shown and never kept in a fact cache for another run.
RUN_KEY = "__preflight_run_key"
# Where the preflight play keeps what it checked for the roles' own checks (input_rules.checked_record): keyed
# fingerprints, so a record that a fact cache brings from an earlier run matches nothing.
RECORD_FACT = "arm_inference_checked"


def _trusted(default):
    return trust_as_template(default) if isinstance(default, str) and "{{" in default else default


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("roles", "context"))

    def _module(self, name, args, task_vars):
        return self._execute_module(module_name=name, module_args=args, task_vars=task_vars)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        dummy, args = self.validate_argument_spec(argument_spec={
            "roles": {"type": "list", "elements": "str", "required": True},
            "context": {"type": "str", "default": "preflight"},
        })
        result["changed"] = False
        # The roles that install or configure something on the host need a supported OS (and its facts);
        # the load and rollout roles only talk to what those made.
        platform = None
        if set(args["roles"]) & set(input_rules.PLATFORM_ROLES):
            platform = platform_support(task_vars.get("ansible_facts", {}))
            if not platform["supported"]:
                result.update(failed=True, msg="%s: %s" % (args["context"], platform["message"]))
                return result

        specs = {role: load_spec(role) for role in args["roles"]}
        # A spec default may read other variables ({{ tcmalloc_library_path | default('') }}) or another role's
        # contract; the specs are the collection's own files, so their templates are trusted as the roles' are.
        values = {name: task_vars[name] for spec in specs.values() for name in spec if name in task_vars}
        values.update({name: _trusted(entry["default"]) for spec in specs.values() for name, entry in spec.items()
                       if name not in values and "default" in entry})
        variables, errors = input_rules.check_specs(specs, self._templar.template(values))
        if errors:
            return self._fail(result, errors)
        record = task_vars["ansible_facts"].get(RECORD_FACT) or {}
        if args["context"] != "preflight" and input_rules.checked_before(record, self._fingerprints(
                args["roles"], specs, variables, task_vars["ansible_facts"].get("arm_inference_host"), task_vars)):
            # What this check would ask the host was asked by the checks before it in this run, with these values.
            packages = record.get("packages_to_install") or {}
            if any(role in packages for role in args["roles"]):
                result["packages_to_install"] = dict((role, packages[role]) for role in args["roles"] if role in packages)
            result["msg"] = "%s: every rule of %s holds (checked earlier in this run with these values)" % (
                args["context"], ", ".join(args["roles"]))
            return result
        host = self._host(args["roles"], variables, platform, task_vars, args["context"])
        if host["facts"] is not None:
            # Later roles of the run read these instead of asking the host again.
            result["ansible_facts"] = {"arm_inference_host": host["facts"]}
        if host.get("model_info"):
            result["model_info"] = host["model_info"]
        if host.get("packages"):
            # What each role installs: the names its package manager does not show installed.
            answer = host["packages"]["answer"].get("packages") or {}
            result["packages_to_install"] = {
                role: [name for name, dummy in requests if not (answer.get(name) or {}).get("installed")]
                for role, requests in host["packages"]["requests"].items()}
        errors = input_rules.check_rules(args["roles"], variables, host)
        if "vllm_serve" in args["roles"] and variables.get("vllm_serve_trust_remote_code"):
            display.warning("%s: vllm_serve_trust_remote_code is true: vLLM will run Python code from the model "
                            "repositories (docs/security.md)" % task_vars.get("inventory_hostname"))
        if errors:
            return self._fail(result, errors)
        if "vllm_model" in args["roles"] and host["facts"] is not None:
            # Last, once every rule holds: the sources this host has still to place must answer from it now.
            reached, errors = self._reach_models(variables, host, task_vars)
            if errors:
                return self._fail(result, errors)
            result["model_sources"] = reached
        result["msg"] = "%s: every rule of %s holds" % (args["context"], ", ".join(args["roles"]))
        if args["context"] == "preflight":
            fingerprints = self._fingerprints(args["roles"], specs, variables, host["facts"], task_vars)
            if fingerprints:
                result.setdefault("ansible_facts", {})[RECORD_FACT] = input_rules.checked_record(
                    fingerprints, result.get("packages_to_install"))
        return result

    @staticmethod
    def _fingerprints(roles, specs, variables, facts, task_vars):
        """{role: fingerprint (None where the values cannot be ordered)} of this check; {} outside a run whose
        preflight made the key, or without facts."""
        if not task_vars.get(RUN_KEY) or facts is None:
            return {}
        return dict((role, input_rules.check_fingerprint(task_vars[RUN_KEY], role, variables, specs[role], facts))
                    for role in roles)

    def _host(self, roles, variables, platform, task_vars, context):
        """What the rules need to know about the host and what its OS provides, asked in one host_survey run."""
        host = {"facts": task_vars["ansible_facts"].get("arm_inference_host")}
        if platform is not None:
            build_deps = os_vars("build_deps", platform["key"])
            host.update({
                "platform_key": platform["key"],
                "architecture": task_vars["ansible_facts"].get("architecture"),
                "default_python": platform["default_python"],
                "compiler_version": build_deps.get("_build_deps_compiler_version"),
                "rustup_packaged": bool(build_deps.get("_build_deps_rustup_packages")),
            })
        elif "vllm_model" not in roles:
            # The load, rollout and autotune roles only talk to what the others made.
            return {"facts": None}
        survey = {}
        # The CPUs, memory and the disk under the build root; vllm_model's sources are asked whether each model fits
        # them. The preflight play reads them in every run, and a role's own check in a run without it (a fact cache
        # may hold an earlier run's, from before a resize); the roles' checks and plans after a preflight of the same
        # run reuse what it read.
        disk = [variables["vllm_build_root"]] if "vllm_build" in roles and str(
            variables["vllm_build_root"]).startswith("/") else []
        if disk or ((host["facts"] is None or context == "preflight" or not task_vars.get(RUN_KEY))
                    and {"vllm_build", "vllm_serve", "vllm_model"} & set(roles)):
            survey.update(facts=True, free_space_paths=disk)
        if "vllm_model" in roles:  # vllm_model_mirror_writer names one of them
            host["inventory_hosts"] = list(task_vars.get("groups", {}).get("all", []))
        serve = {}
        if "vllm_serve" in roles and (host["facts"] is not None or survey.get("facts")):
            serve = self._models(roles, variables, task_vars)
            serve.update(self._serve_api_key(variables, task_vars))
            if serve["model_paths"]:
                survey["model_paths"] = serve["model_paths"]
            if serve["generated_api_key_path"]:
                survey["exists"] = [serve["generated_api_key_path"]]
        if {"vllm_serve", "vllm_gateway"} & set(roles):
            survey.update(ports=True, addresses=input_rules.bind_addresses(variables))
        packages = self._packages(roles, variables, host) if input_rules.installing_roles(roles, variables) else None
        if packages:
            survey.update(packages=packages["names"], cache_valid_time=packages["lists"][2])
        answer = self._module("arm_inference.vllm.host_survey", survey, task_vars) if survey else {}
        if answer.get("failed"):
            raise AnsibleActionFail(" ".join(str(answer.get("msg", "")).split()))
        if "facts" in answer:
            host["facts"] = answer["facts"]
            host["build_root_free_bytes"] = answer["free_bytes"].get(disk[0]) if disk else None
        if serve:
            host.update((key, serve[key]) for key in ("declared_models", "placed_models", "pending_models",
                                                      "gateway_enabled"))
            if "model_info" in answer:
                host["model_info"] = answer["model_info"]
            host["generated_api_key_exists"] = bool((answer.get("exists") or {}).get(serve["generated_api_key_path"]))
        if "ports" in answer:
            host["ports"] = answer["ports"]
        if packages:
            host["packages"] = {"requests": packages["requests"], "answer": answer["packages"],
                                "lists": packages["lists"]}
        return host

    def _packages(self, roles, variables, host):
        """Every OS package the roles would install, for the survey's one answer: which of them are installed, and
        whether the host's package sources have the others."""
        requests = {}
        for role in input_rules.installing_roles(roles, variables):
            written, rendered = package_vars(role, host["platform_key"],
                                             input_rules.template_values(role, variables, host), self._templar)
            requests[role] = input_rules.role_packages(role, variables, host, written, rendered)
        return {"requests": requests, "lists": input_rules.package_lists_refresh(list(requests), variables),
                "names": list(dict.fromkeys(name for pairs in requests.values() for name, dummy in pairs))}

    def _contract(self, role, task_vars):
        """A role's contract: the fact it published earlier in the run, else its inventory values and defaults."""
        return task_vars.get("%s_contract" % role) or lookup_loader.get(
            "arm_inference.vllm.role_contract", loader=self._loader, templar=self._templar).run(
                [role], variables=task_vars)[0]

    def _reach_models(self, variables, host, task_vars):
        """Each declared model asked from this host (vllm_model_fetch action reach, read-only): a revision the host holds
        needs no network; any other must be reachable, exist, be granted to the token and fit the host's memory and
        disk, before any host changes. A controller source is read here, on the controller. Returns ({name: how it was
        reached}, errors)."""
        models = vllm_model_store.normalized_models(variables)
        entries = dict((entry["name"], entry) for entry in variables.get("vllm_model_models") or [])
        serve = self._contract("vllm_serve", task_vars)
        fit = {"facts": host["facts"], "instances": serve["instances"], "serve_model": serve["default_model"],
               "kv_cache_min_gib": serve["kv_cache_min_gib"], "memory_headroom_gib": serve["memory_headroom_gib"]}
        common = {"action": "reach", "store": variables["vllm_model_store"], "fit": fit,
                  "min_free_disk_gib": variables["vllm_model_min_free_disk_gib"]}
        common["verify"] = variables.get("vllm_model_verify", "quick")
        if variables.get("vllm_model_ca_bundle"):  # a PEM bundle: the rules refused any other file
            with open(os.path.expanduser(variables["vllm_model_ca_bundle"]), "rb") as handle:
                common["ca_bundle_pem"] = handle.read().decode("ascii", "replace")
        # Hub and S3 sources are asked through their clients where the role's tools venv has them already.
        tools = dict(task_vars, ansible_python_interpreter=variables["vllm_model_tools_venv"] + "/bin/python")
        if any(model["clients"] for model in models):
            stat = self._module("ansible.builtin.stat", {"path": tools["ansible_python_interpreter"],
                                                         "get_checksum": False}, task_vars)
            if not (stat.get("stat") or {}).get("exists"):
                tools = task_vars
        reached, errors = {}, []
        for model in models:
            if model["kind"] == "controller":
                if not os.path.isdir(model["location"]):
                    errors.append("vllm_model_models (%s).source: %s is not a directory on the controller (got %s); "
                                  "point source at the model's directory there" % (model["name"], model["location"],
                                                                                   model["source"]))
                reached[model["name"]] = "on the controller"
                continue
            entry = entries[model["name"]]
            arguments = dict((key, entry[key]) for key in vllm_model_store.MODEL_KEYS
                             if key in entry and entry[key] not in (None, "", [], {}))
            answer = self._execute_module(module_name="arm_inference.vllm.vllm_model_fetch",
                                          module_args=dict(common, **arguments),
                                          task_vars=tools if model["clients"] else task_vars)
            for warning in answer.get("warnings") or []:  # text, or ansible-core 2.19's summary of one
                text = (warning.get("event") or {}).get("msg") if isinstance(warning, dict) else warning
                display.warning("%s: %s" % (task_vars.get("inventory_hostname"), text or warning))
            if answer.get("failed"):
                errors.append(" ".join(str(answer.get("msg", "")).split()))
            else:
                reached[model["name"]] = answer.get("reached")
        return reached, errors

    def _serve_api_key(self, variables, task_vars):
        """What vllm_serve's key plan reads besides the variables, as its plan.yml reads it: whether the gateway is on
        (vllm_gateway's contract), and, only where that alone can authenticate a non-loopback bind, the key file
        vllm_serve generated on an earlier run, whose existence the survey asks."""
        contract = self._contract("vllm_gateway", task_vars)
        answer = {"gateway_enabled": bool(contract["enabled"]), "generated_api_key_path": None}
        if input_rules.generated_key_matters(variables, answer["gateway_enabled"]):
            answer["generated_api_key_path"] = owner_vars("vllm_serve")["_vllm_serve_generated_key_path"]
        return answer

    def _models(self, roles, variables, task_vars):
        """vllm_model's declarations and placements, and the directories of the local models the instances serve, whose
        files the survey reads (vllm_model_info's answer: sizes, config.json, safetensors headers)."""
        declared = variables.get("vllm_model_models")
        if declared is None:
            declared = self._templar.template(task_vars.get("vllm_model_models", []))
        placed = task_vars.get("vllm_model_placed") or task_vars["ansible_facts"].get("vllm_model_placed") or {}
        names = [entry.get("name") for entry in declared or [] if isinstance(entry, dict)]
        models = {"declared_models": names, "placed_models": placed,
                  # Placed later in this run, by the vllm_model role the preflight checks with them.
                  "pending_models": [name for name in names if name not in placed] if "vllm_model" in roles else []}
        try:
            models["model_paths"] = vllm_serve.model_paths(variables.get("vllm_serve_instances"), input_rules.serve_settings(
                variables, **input_rules.models_settings(variables, models)))
        except vllm_serve.ServeError:
            models["model_paths"] = []  # the rule says what is wrong with the model names
        return models

    @staticmethod
    def _fail(result, errors):
        # The message alone: no facts or model summaries printed after it.
        result.pop("ansible_facts", None)
        result.pop("model_info", None)
        result.pop("packages_to_install", None)
        lines = [str(error) for error in errors]
        result.update(failed=True, msg=lines[0] if len(lines) == 1 else
                      "%d problems: %s" % (len(lines), " | ".join(lines)))
        if len(lines) > 1:
            result["errors"] = lines
        return result
