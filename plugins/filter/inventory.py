# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters for building inventories of Arm64 fleets.

ec2_hardware_group names the collection's hardware group (graviton2, graviton3, graviton4) of an EC2
instance type, for the keyed_groups of an amazon.aws.aws_ec2 inventory (inventories/example/aws_ec2.yml).
The filter is documented in ec2_hardware_group.yml next to this file.
"""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError

# Families whose name does not follow the rule below, or whose generation digit is not the
# Graviton generation. "" means: not a host this collection serves (a1 is Graviton1, Cortex-A72,
# without the dot-product instructions vLLM's aarch64 build needs).
IRREGULAR_FAMILIES = {
    "a1": "",
    "t4g": "graviton2",
    "x2gd": "graviton2",
    "im4gn": "graviton2",
    "is4gen": "graviton2",
    "i4g": "graviton2",
    "g5g": "graviton2",
}

# Regular Graviton families: letters, the instance generation, "g", optional attribute letters
# (d local NVMe, n network, e more storage, ...): c6gn, m7gd, hpc7g, r8g, i8ge.
GRAVITON_FAMILY = re.compile(r"^[a-z]+(?P<generation>[0-9])g[a-z]*$")
GENERATIONS = {"6": "graviton2", "7": "graviton3", "8": "graviton4"}

INSTANCE_TYPE = re.compile(r"^(?P<family>[a-z0-9-]+)\.(?P<size>[a-z0-9-]+)$")


def ec2_hardware_group(instance_type):
    """graviton2/3/4 for an EC2 instance type, "" for any type that is not one of those."""
    match = INSTANCE_TYPE.match(instance_type.lower()) if isinstance(instance_type, str) else None
    if match is None:
        shown = repr(instance_type) if isinstance(instance_type, str) else "%r (%s)" % (instance_type, type(instance_type).__name__)
        raise AnsibleFilterError(
            "ec2_hardware_group expects an EC2 instance type of the form <family>.<size> (for example c7g.2xlarge), got %s" % shown
        )
    family = match.group("family")
    if family in IRREGULAR_FAMILIES:
        return IRREGULAR_FAMILIES[family]
    regular = GRAVITON_FAMILY.match(family)
    if regular is None:
        return ""
    return GENERATIONS.get(regular.group("generation"), "")


class FilterModule:
    def filters(self):
        return {"ec2_hardware_group": ec2_hardware_group}
