"""host_survey on the machine running the tests: each answer is the one its own module gives (host_facts, host_ports,
package_candidates, vllm_model_info, run here beside it), in one run; a package manager that cannot answer is an
answer, not a failed survey, so the preflight's rule can name the setting behind it."""

from __future__ import annotations

import json
import os

import pytest
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

import model_samples
from ansible_collections.arm_inference.vllm.plugins.module_utils import host_survey as survey_utils
from ansible_collections.arm_inference.vllm.plugins.modules import host_facts, host_ports, host_survey, package_candidates
from ansible_collections.arm_inference.vllm.plugins.modules import vllm_model_info


def run(capsys, main, **args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            main()
    return json.loads(capsys.readouterr().out)


def without_invocation(answer):
    return dict((key, value) for key, value in answer.items() if key not in ("invocation", "changed", "warnings"))


def test_one_run_answers_as_each_module_does(capsys, tmp_path):
    model = model_samples.make_sample_dir("llama-3.1-8b-bf16", tmp_path / "llama")
    for shard in model_samples.sample_files("llama-3.1-8b-bf16"):
        with open(model / shard, "r+b") as handle:
            handle.write(b"\x02\x00\x00\x00\x00\x00\x00\x00{}")
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    names = ["dpkg", "arm-inference-no-such-package"] if os.path.exists("/usr/bin/dpkg-query") else ["rpm"]
    answer = run(capsys, host_survey.main, facts=True, free_space_paths=[str(tmp_path)], ports=True,
                 addresses=["127.0.0.1", "192.0.2.1", "not-an-address"], packages=names, model_paths=[str(model)],
                 exists=[str(tmp_path / "link"), str(tmp_path / "absent")], _ansible_check_mode=True)
    assert answer["changed"] is False and "failed" not in answer
    facts = run(capsys, host_facts.main, free_space_paths=[str(tmp_path)])
    # What the host has available, and the build jobs that allows, may differ between two readings.
    steady = dict((key, value) for key, value in answer["facts"].items() if key not in ("memory", "build_max_jobs"))
    assert steady == dict((key, value) for key, value in facts["ansible_facts"]["arm_inference_host"].items()
                          if key not in ("memory", "build_max_jobs"))
    assert set(answer["free_bytes"]) == {str(tmp_path)} and answer["free_bytes"][str(tmp_path)] > 0
    ports = without_invocation(run(capsys, host_ports.main, addresses=["127.0.0.1", "192.0.2.1", "not-an-address"]))
    assert set(answer["ports"]) == set(ports) == {"listening", "addresses", "unprivileged_port_start", "service_open_files"}
    assert answer["ports"]["addresses"] == ports["addresses"] and "192.0.2.1" in ports["addresses"]
    assert answer["ports"]["unprivileged_port_start"] == ports["unprivileged_port_start"]
    packages = without_invocation(run(capsys, package_candidates.main, names=names))
    # The age of apt's lists goes on between the two runs.
    assert dict(answer["packages"], lists_age=None) == dict(packages, lists_age=None)
    assert packages["packages"][names[0]]["installed"]
    info = without_invocation(run(capsys, vllm_model_info.main, paths=[str(model)]))
    assert answer["model_info"] == info and str(model) in info["models"]
    # A dangling link is there, as stat without following it says.
    assert answer["exists"] == {str(tmp_path / "link"): True, str(tmp_path / "absent"): False}


def test_only_what_is_asked(capsys):
    answer = run(capsys, host_survey.main)
    assert without_invocation(answer) == {"exists": {}}


def test_a_package_manager_that_cannot_answer_is_an_answer(capsys, monkeypatch):
    def refused(module, names):
        raise survey_utils.PackageQueryError("apt-cache policy failed: E: the lists are locked")

    monkeypatch.setattr(survey_utils, "_candidates_apt", refused)
    monkeypatch.setattr(survey_utils, "_candidates_dnf", refused)
    answer = run(capsys, host_survey.main, packages=["arm-inference-no-such-package"], ports=True)
    assert "failed" not in answer and "listening" in answer["ports"]
    assert answer["packages"] == {"failed": True, "msg": "apt-cache policy failed: E: the lists are locked"}
    alone = run(capsys, package_candidates.main, names=["arm-inference-no-such-package"])
    assert alone["failed"] and alone["msg"] == "apt-cache policy failed: E: the lists are locked"


def test_a_host_without_the_package_managers_programs_is_an_answer(capsys, monkeypatch):
    """A microdnf-only image has neither apt-cache nor dnf: the answer says which program is missing, and the survey
    still gives what else was asked."""
    def none_of_them(self, name, required=False, opt_dirs=None):
        if name in ("apt-cache", "apt-get", "dpkg-query", "dnf", "rpm"):
            return None
        return real(self, name, required=required, opt_dirs=opt_dirs)

    real = AnsibleModule.get_bin_path
    monkeypatch.setattr(AnsibleModule, "get_bin_path", none_of_them)
    answer = run(capsys, host_survey.main, packages=["tar"], ports=True)
    assert "failed" not in answer and "listening" in answer["ports"]
    assert answer["packages"] == {"failed": True, "msg": "rpm is not on this host"}
