"""inventories/example/aws_ec2.yml builds exactly the groups inventories/example uses.

Templating runs in a child process (inventory_driver.py) with the collection on
ANSIBLE_COLLECTIONS_PATH: ansible-core's collection loader must own the ansible_collections
package there, which this test process has already imported from the conftest's link.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[3]
AWS_EC2_CONFIG = REPO_ROOT / "inventories" / "example" / "aws_ec2.yml"
EXAMPLE = REPO_ROOT / "inventories" / "example"
DRIVER = Path(__file__).resolve().parent / "inventory_driver.py"
GRAVITON_GROUPS = {"graviton2", "graviton3", "graviton4"}
FAMILY_GROUPS = GRAVITON_GROUPS | {"altra", "ampereone", "grace"}

# instance type -> the group it must land in ("" = none); the rest of each instance is filled in below.
SAMPLE_TYPES = {
    "c6g.16xlarge": "graviton2",
    "t4g.micro": "graviton2",
    "x2gd.xlarge": "graviton2",
    "is4gen.medium": "graviton2",
    "c7gn.2xlarge": "graviton3",
    "hpc7g.16xlarge": "graviton3",
    "m7gd.medium": "graviton3",
    "m8g.metal-24xl": "graviton4",
    "i8ge.large": "graviton4",
    "c8gn.large": "graviton4",
    "a1.large": "",
    "c9g.large": "",
}


def _instance(index, instance_type, architecture="arm64", state="running", private_ip=True):
    """One instance as boto3's DescribeInstances returns it (the fields the config and plugin read)."""
    instance = {
        "InstanceId": "i-%017x" % index,
        "InstanceType": instance_type,
        "Architecture": architecture,
        "State": {"Code": 16 if state == "running" else 80, "Name": state},
        "PrivateDnsName": "ip-10-0-0-%d.eu-west-1.compute.internal" % index,
        "Placement": {"AvailabilityZone": "eu-west-1a", "Tenancy": "default"},
        "Tags": [{"Key": "Name", "Value": "node-%d" % index}],
    }
    if private_ip:
        instance["PrivateIpAddress"] = "10.0.0.%d" % index
    return instance


def _hostvars(instance):
    """The host variables aws_ec2 gives an instance, for the ones the config reads."""
    hostvars = {
        "instance_type": instance["InstanceType"],
        "architecture": instance["Architecture"],
        "state": {"name": instance["State"]["Name"], "code": instance["State"]["Code"]},
        "private_dns_name": instance["PrivateDnsName"],
    }
    if "PrivateIpAddress" in instance:
        hostvars["private_ip_address"] = instance["PrivateIpAddress"]
    return hostvars


@pytest.fixture(scope="module")
def collections_path(tmp_path_factory):
    root = tmp_path_factory.mktemp("collections")
    namespace = root / "ansible_collections" / "arm_inference"
    namespace.mkdir(parents=True)
    os.symlink(REPO_ROOT, namespace / "vllm")
    return root


def _ansible_env(collections_path):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections_path), ANSIBLE_CONFIG=str(REPO_ROOT / "ansible.cfg"))
    env.pop("ANSIBLE_INVENTORY", None)
    return env


def _drive(collections_path, request):
    result = subprocess.run([sys.executable, str(DRIVER)], input=json.dumps(request), capture_output=True, text=True,
                            cwd=REPO_ROOT, env=_ansible_env(collections_path), check=False, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _example_inventory(collections_path):
    command = shutil.which("ansible-inventory", path=str(Path(sys.executable).parent)) or "ansible-inventory"
    result = subprocess.run([command, "-i", str(EXAMPLE / "hosts.yml"), "--list"],
                            capture_output=True, text=True, cwd=REPO_ROOT, env=_ansible_env(collections_path), check=False,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def example(collections_path):
    return _example_inventory(collections_path)


def test_config_is_an_aws_ec2_config_for_running_arm64_instances():
    config = yaml.safe_load(AWS_EC2_CONFIG.read_text())
    assert AWS_EC2_CONFIG.name.endswith("aws_ec2.yml")  # the plugin's verify_file accepts no other name
    assert config["plugin"] == "amazon.aws.aws_ec2"
    assert config["filters"] == {"architecture": "arm64", "instance-state-name": "running"}
    assert config["hostnames"] == ["private-ip-address", "private-dns-name"]
    # An empty key must add no group rather than fail the inventory (Constructable, strict).
    assert config.get("strict", False) is False
    assert [(entry["prefix"], entry["separator"]) for entry in config["keyed_groups"]] == [("", "")]
    assert config["leading_separator"] is False


def test_templar_puts_each_instance_in_its_generation_and_vllm_hosts(collections_path, example):
    instances = [_instance(index, instance_type) for index, instance_type in enumerate(SAMPLE_TYPES, start=10)]
    instances.append(_instance(99, "c7g.large", private_ip=False))
    results = _drive(collections_path, {"mode": "templar", "config": str(AWS_EC2_CONFIG),
                                        "hostvars": [_hostvars(instance) for instance in instances]})
    expected = list(SAMPLE_TYPES.values()) + ["graviton3"]
    assert [result["keyed_groups"][0]["key"] for result in results] == expected
    assert all(result["groups"] == ["vllm_hosts"] for result in results)
    assert [result["compose"]["ansible_host"] for result in results] == (
        ["10.0.0.%d" % index for index in range(10, 10 + len(SAMPLE_TYPES))] + [instances[-1]["PrivateDnsName"]])
    produced = {name for name in expected if name}
    assert produced == GRAVITON_GROUPS
    assert produced == {name for name in example["vllm_hosts"]["children"] if name.startswith("graviton")}


def test_templar_keeps_an_x86_instance_out_of_every_group(collections_path):
    """The EC2 filter already drops x86_64; should one get through, it lands in no group of this fleet."""
    hostvars = _hostvars(_instance(5, "c7i.large", architecture="x86_64"))
    (result,) = _drive(collections_path, {"mode": "templar", "config": str(AWS_EC2_CONFIG), "hostvars": [hostvars]})
    assert result["keyed_groups"][0]["key"] == "" and result["groups"] == []


@pytest.mark.skipif(importlib.util.find_spec("boto3") is None, reason="the aws_ec2 plugin needs boto3")
def test_real_aws_ec2_plugin_builds_the_example_groups(collections_path, example):
    graviton = [_instance(index, instance_type) for index, instance_type in enumerate(SAMPLE_TYPES, start=10)]
    ipv6_only = _instance(98, "r8g.large", private_ip=False)
    stopped = _instance(97, "c7g.large", state="stopped")
    x86 = _instance(96, "c7i.large", architecture="x86_64")
    answer = _drive(collections_path, {"mode": "aws_ec2", "config": str(AWS_EC2_CONFIG), "instances": graviton + [ipv6_only, stopped, x86]})
    if "skip" in answer:
        pytest.skip(answer["skip"])

    assert answer["filters"] == [[{"Name": "architecture", "Values": ["arm64"]}, {"Name": "instance-state-name", "Values": ["running"]}]]
    groups = answer["groups"]
    by_group = {}
    for instance, group in zip(graviton, SAMPLE_TYPES.values()):
        by_group.setdefault(group, []).append(instance["PrivateIpAddress"])
    by_group["graviton4"].append(ipv6_only["PrivateDnsName"])
    for group in GRAVITON_GROUPS:
        assert groups[group] == sorted(by_group[group]), group
    assert groups["vllm_hosts"] == sorted(instance.get("PrivateIpAddress") or instance["PrivateDnsName"] for instance in graviton + [ipv6_only])
    # Every group the plugin makes, besides the plugin's own and Ansible's, is one the example defines.
    assert set(groups) - {"all", "ungrouped", "aws_ec2"} == GRAVITON_GROUPS | {"vllm_hosts"}
    assert (set(groups) - {"all", "ungrouped", "aws_ec2"}) <= set(example) - {"_meta"}
    assert answer["hostvars"][ipv6_only["PrivateDnsName"]]["ansible_host"] == ipv6_only["PrivateDnsName"]
    assert answer["hostvars"]["10.0.0.10"]["ansible_host"] == "10.0.0.10"


def test_example_families_are_the_children_of_vllm_hosts(example):
    assert set(example["vllm_hosts"]["children"]) == FAMILY_GROUPS
    for family in FAMILY_GROUPS:
        hosts = example[family]["hosts"]
        assert 1 <= len(hosts) <= 2, family
        for host in hosts:
            address = example["_meta"]["hostvars"][host]["ansible_host"]
            assert address.startswith(("192.0.2.", "198.51.100.")), host


def test_example_group_vars_exist_per_family_and_use_role_variables(example):
    group_vars = EXAMPLE / "group_vars"
    assert {path.stem for path in group_vars.glob("*.yml")} == FAMILY_GROUPS | {"vllm_hosts"}
    defaults = {}
    for role_defaults in (REPO_ROOT / "roles").glob("*/defaults/main.yml"):
        defaults.update(yaml.safe_load(role_defaults.read_text()) or {})
    for path in group_vars.glob("*.yml"):
        data = yaml.safe_load(path.read_text()) or {}
        unknown = [name for name in data if name not in defaults and not name.startswith("ansible_")]
        assert unknown == [], path.name
        # Variables named in comments as settings must be real role variables too.
        commented = [line.lstrip("# ").split(":")[0] for line in path.read_text().splitlines() if line.startswith("# ") and ":" in line]
        named = [name for name in commented if name.split("_")[0] in ("build", "tcmalloc", "python", "vllm") and " " not in name]
        assert [name for name in named if name not in defaults] == [], path.name
    # The N1 families pin bf16 kernels off; every variable the example sets reaches its hosts.
    hostvars = example["_meta"]["hostvars"]
    assert hostvars["c6g-16xlarge-a"]["vllm_build_arm_bf16"] is False
    assert hostvars["altra-q80-2p-a"]["vllm_build_arm_bf16"] is False
    assert "vllm_build_arm_bf16" not in hostvars["c8g-16xlarge-a"]
    assert all(hostvars[host]["ansible_user"] == "admin" for host in hostvars)
