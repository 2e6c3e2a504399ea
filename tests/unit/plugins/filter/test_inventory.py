from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.arm_inference.vllm.plugins.filter.inventory import FilterModule, ec2_hardware_group

GRAVITON2 = ["c6g.large", "c6gd.xlarge", "c6gn.16xlarge", "m6g.metal", "m6gd.medium", "r6g.2xlarge", "r6gd.large",
             "t4g.micro", "t4g.nano", "x2gd.xlarge", "im4gn.large", "is4gen.medium", "i4g.large", "g5g.xlarge", "g5g.metal"]
GRAVITON3 = ["c7g.large", "c7gd.medium", "c7gn.2xlarge", "m7g.metal", "m7gd.medium", "r7g.16xlarge", "r7gd.large",
             "hpc7g.16xlarge"]
GRAVITON4 = ["c8g.large", "c8gd.large", "c8gn.large", "m8g.metal-24xl", "m8g.48xlarge", "m8gd.large", "r8g.metal-48xl",
             "r8gd.large", "x8g.large", "i8g.large", "i8ge.large"]
X86 = ["c7i.large", "c7i-flex.large", "m5.xlarge", "c7a.large", "mac2.metal", "mac2-m2pro.metal", "g5.xlarge",
       "g6e.xlarge", "g4dn.xlarge", "u-6tb1.metal", "r7iz.large", "x2iedn.xlarge", "i4i.large", "hpc7a.96xlarge",
       "inf2.xlarge", "trn1.2xlarge", "m8a.large", "m8i.large"]


@pytest.mark.parametrize("instance_type,group", [(name, "graviton2") for name in GRAVITON2]
                         + [(name, "graviton3") for name in GRAVITON3] + [(name, "graviton4") for name in GRAVITON4])
def test_graviton_families(instance_type, group):
    assert ec2_hardware_group(instance_type) == group


@pytest.mark.parametrize("instance_type", X86)
def test_x86_types_are_in_no_group(instance_type):
    assert ec2_hardware_group(instance_type) == ""


def test_g5_is_x86_but_g5g_is_graviton2():
    assert (ec2_hardware_group("g5.xlarge"), ec2_hardware_group("g5g.xlarge")) == ("", "graviton2")


@pytest.mark.parametrize("instance_type", ["a1.medium", "a1.metal", "a1.4xlarge"])
def test_graviton1_is_in_no_group(instance_type):
    assert ec2_hardware_group(instance_type) == ""


@pytest.mark.parametrize("instance_type", ["c9g.large", "m9gd.xlarge", "c5g.large", "t5g.micro", "z0g.large"])
def test_graviton_like_family_of_unknown_generation_is_in_no_group(instance_type):
    assert ec2_hardware_group(instance_type) == ""


def test_instance_type_is_read_case_insensitively():
    assert ec2_hardware_group("C7GN.2XLarge") == "graviton3"


@pytest.mark.parametrize("bad", ["", "c7g", "c7g.", ".large", "c7g.large.x", "c7g .large", " c7g.large", "c7g_large", "c7g/large"])
def test_malformed_strings_name_the_value_and_the_form(bad):
    with pytest.raises(AnsibleFilterError) as caught:
        ec2_hardware_group(bad)
    assert "<family>.<size>" in str(caught.value)
    assert "got %r" % bad in str(caught.value)


@pytest.mark.parametrize("bad,shown", [(None, "None (NoneType)"), (7, "7 (int)"), (["c7g.large"], "['c7g.large'] (list)"),
                                       (b"c7g.large", "b'c7g.large' (bytes)"), ({"instance_type": "c7g.large"}, "(dict)")])
def test_non_strings_are_refused_with_their_type(bad, shown):
    with pytest.raises(AnsibleFilterError, match=r"ec2_hardware_group expects an EC2 instance type of the form <family>\.<size>") as caught:
        ec2_hardware_group(bad)
    assert shown in str(caught.value)


def test_filter_is_registered():
    assert FilterModule().filters() == {"ec2_hardware_group": ec2_hardware_group}
