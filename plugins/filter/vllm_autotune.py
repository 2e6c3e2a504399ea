# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for the vllm_autotune role and autotune.yml; the computing lives in module_utils/vllm_autotune.py
and each filter is documented in the YAML file of the same name next to this one."""

from __future__ import annotations

import yaml
from ansible.errors import AnsibleFilterError
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_autotune as core


def _call(name, function, *args):
    try:
        return function(*args)
    except core.AutotuneError as error:
        raise AnsibleFilterError(str(error))
    except (KeyError, TypeError, ValueError) as error:
        raise AnsibleFilterError("%s: malformed input: %s" % (name, error))


def vllm_autotune_class(facts, unknown=None):
    """The class; with `unknown` given, that value instead of the refusal for a host with no class."""
    if unknown is not None:
        try:
            return core.hardware_class(facts)
        except (core.AutotuneError, KeyError, TypeError, ValueError):
            return unknown
    return _call("vllm_autotune_class", core.hardware_class, facts)


def vllm_autotune_samples(classes, named=None):
    return _call("vllm_autotune_samples", core.sample_hosts, [tuple(item) for item in classes], named)


def vllm_autotune_design(facts, serve_vars, units, model_info, options, max_candidates=0):
    def plan():
        size = core.model_size(units, model_info)
        return core.limit_candidates(core.design(facts, serve_vars, size, options), max_candidates)
    return _call("vllm_autotune_design", plan)


def vllm_autotune_bench_argv(unit, python, load, result_dir, result_file):
    return _call("vllm_autotune_bench_argv", core.bench_argv, python, unit, load, result_dir, result_file)


def vllm_autotune_run(texts, sources):
    return _call("vllm_autotune_run", core.run_figures, texts, sources)


def vllm_autotune_stop(candidate_runs, profile_runs, goal=None):
    return _call("vllm_autotune_stop", core.stop_early, candidate_runs, profile_runs, goal) or ""


def vllm_autotune_result(design_result, measurements, goal, repeats, hardware, model, measured_on):
    """decide(), then the tuned file and the report: {tuned, report, svg}."""
    def result():
        decision = core.decide(design_result["candidates"], measurements, goal, repeats)
        document, svg = core.report(design_result, decision)
        return {"tuned": core.tuned_file(decision, hardware, model, measured_on), "report": document, "svg": svg}
    return _call("vllm_autotune_result", result)


def vllm_autotune_public_vars(serve_vars):
    return _call("vllm_autotune_public_vars", core.public_serve_vars, serve_vars)


def vllm_autotune_with_environment(instances, operator_instances):
    return _call("vllm_autotune_with_environment", core.with_environment, instances, operator_instances)


def vllm_autotune_file_name(model):
    return _call("vllm_autotune_file_name", core.tuned_file_name, model)


def vllm_autotune_apply(facts, tuned_texts, instances, settings, release):
    """apply_tuned() on the tuned files found on the controller ({path under the output directory: text})."""
    def apply():
        files = {}
        for name, text in (tuned_texts or {}).items():
            try:
                files[name] = yaml.safe_load(text)
            except yaml.YAMLError as error:
                raise core.AutotuneError("%s: not YAML (%s); remove it or measure again with autotune.yml"
                                         % (name, " ".join(str(error).split())))
        return core.apply_tuned(facts, files, instances, settings, release)
    return _call("vllm_autotune_apply", apply)


class FilterModule:
    def filters(self):
        return {"vllm_autotune_class": vllm_autotune_class, "vllm_autotune_samples": vllm_autotune_samples,
                "vllm_autotune_design": vllm_autotune_design, "vllm_autotune_bench_argv": vllm_autotune_bench_argv,
                "vllm_autotune_run": vllm_autotune_run, "vllm_autotune_stop": vllm_autotune_stop,
                "vllm_autotune_result": vllm_autotune_result, "vllm_autotune_file_name": vllm_autotune_file_name,
                "vllm_autotune_apply": vllm_autotune_apply, "vllm_autotune_public_vars": vllm_autotune_public_vars,
                "vllm_autotune_with_environment": vllm_autotune_with_environment}
