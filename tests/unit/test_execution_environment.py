"""The execution environment's pins (execution-environment.yml, ee/) agree with what the rest of the repository
pins: ansible-core with requirements-dev.txt, the collection tarballs with requirements.yml and galaxy.yml, the
controller's boto3 and huggingface_hub with the versions vllm_model installs on hosts."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]


def pins(path):
    """name -> version of each `name==version` line of a pip requirements file."""
    found = {}
    for line in (REPO_ROOT / path).read_text().splitlines():
        match = re.match(r"^([A-Za-z0-9_.\[\]-]+)==(\S+)$", line.strip())
        if match:
            found[match.group(1).split("[")[0].lower().replace("_", "-")] = match.group(2)
    return found


def test_every_python_package_of_the_image_is_pinned():
    for path in ("ee/base/requirements.txt", "ee/requirements.txt", "requirements-ee-tools.txt"):
        lines = [line for line in (REPO_ROOT / path).read_text().splitlines() if line and not line.startswith("#")]
        assert lines and all("==" in line for line in lines), "%s: every package needs an exact pin" % path


def test_the_base_image_has_the_ansible_core_ci_tests_with():
    assert pins("ee/base/requirements.txt")["ansible-core"] == pins("requirements-dev.txt")["ansible-core"]


def test_the_controller_packages_match_what_vllm_model_installs_on_hosts():
    defaults = yaml.safe_load((REPO_ROOT / "roles/vllm_model/defaults/main.yml").read_text())
    controller = pins("ee/requirements.txt")
    assert controller["boto3"] == defaults["vllm_model_boto3_version"]
    assert controller["huggingface-hub"] == defaults["vllm_model_huggingface_hub_version"]


def test_the_image_collections_are_this_one_and_requirements_yml_at_their_pins():
    galaxy = yaml.safe_load((REPO_ROOT / "galaxy.yml").read_text())
    wanted = {"%s-%s-%s.tar.gz" % (galaxy["namespace"], galaxy["name"], galaxy["version"])}
    for entry in yaml.safe_load((REPO_ROOT / "requirements.yml").read_text())["collections"]:
        wanted.add("%s-%s.tar.gz" % (entry["name"].replace(".", "-"), entry["version"]))
    image = yaml.safe_load((REPO_ROOT / "ee/requirements.yml").read_text())["collections"]
    assert {Path(entry["name"]).name for entry in image} == wanted
    assert all(entry["type"] == "file" for entry in image)


def test_the_definition_builds_from_the_local_base_image():
    definition = yaml.safe_load((REPO_ROOT / "execution-environment.yml").read_text())
    assert definition["version"] == 3
    assert definition["images"]["base_image"]["name"] == "localhost/arm-inference/ee-base:latest"
    assert definition["dependencies"]["galaxy"] == "ee/requirements.yml"
    assert definition["dependencies"]["python"] == "ee/requirements.txt"
