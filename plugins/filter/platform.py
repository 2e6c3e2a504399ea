# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which operating systems and architectures the collection's roles support, and their defaults."""

from __future__ import annotations

DOCUMENTATION = r"""
---
name: platform_support
short_description: Tell whether a host's OS and architecture are supported, and their defaults
version_added: 0.1.0
description:
  - Takes a host's C(ansible_facts) and returns a dictionary with the platform key used to pick
    the roles' C(vars/<key>.yml) file, whether the OS and architecture are supported, the default
    Python version for vLLM there, and human-readable lists of what is supported.
  - Rocky Linux and AlmaLinux 9 share the RHEL 9 key.
positional: _input
options:
  _input:
    description: The host's C(ansible_facts).
    type: dict
    required: true
"""

EXAMPLES = r"""
- name: Fail on an unsupported host
  ansible.builtin.assert:
    that: (ansible_facts | arm_inference.vllm.platform_support).supported
    fail_msg: "{{ (ansible_facts | arm_inference.vllm.platform_support).message }}"
"""

RETURN = r"""
_value:
  description: Platform key, support flags, default Python and a message for unsupported hosts.
  type: dict
"""

from ansible.errors import AnsibleFilterError

# Default Python per OS: the newest interpreter the OS ships in its base repositories that vLLM's
# CPU backend accepts (3.10-3.13). RHEL 9 and Amazon Linux 2023 default to 3.9, which is too old.
PLATFORMS = {
    "Debian-12": {"name": "Debian 12", "python": "3.11"},
    "Debian-13": {"name": "Debian 13", "python": "3.13"},
    "Ubuntu-22": {"name": "Ubuntu 22.04", "python": "3.10"},
    "Ubuntu-24": {"name": "Ubuntu 24.04", "python": "3.12"},
    "Amazon-2023": {"name": "Amazon Linux 2023", "python": "3.11"},
    "RedHat-9": {"name": "RHEL/Rocky/AlmaLinux 9", "python": "3.11"},
}
ARCHITECTURES = ("aarch64", "x86_64")
_RHEL_REBUILDS = ("RedHat", "Rocky", "AlmaLinux", "CentOS")


def platform_key(facts):
    distribution = facts.get("distribution", "")
    major = str(facts.get("distribution_major_version", ""))
    if distribution in _RHEL_REBUILDS:
        distribution = "RedHat"
    return "%s-%s" % (distribution, major)


def platform_support(facts):
    if not isinstance(facts, dict) or "distribution" not in facts or "architecture" not in facts:
        raise AnsibleFilterError("platform_support needs ansible_facts with distribution and architecture; gather facts first")
    key = platform_key(facts)
    architecture = facts["architecture"]
    os_supported = key in PLATFORMS
    arch_supported = architecture in ARCHITECTURES
    supported_os = ", ".join(entry["name"] for entry in PLATFORMS.values())
    problems = []
    if not os_supported:
        problems.append(
            "operating system %s %s is not supported (supported: %s)"
            % (facts.get("distribution"), facts.get("distribution_version", facts.get("distribution_major_version")), supported_os)
        )
    if not arch_supported:
        problems.append("architecture %s is not supported (supported: %s)" % (architecture, ", ".join(ARCHITECTURES)))
    return {
        "key": key,
        "supported": os_supported and arch_supported,
        "os_supported": os_supported,
        "architecture_supported": arch_supported,
        "default_python": PLATFORMS.get(key, {}).get("python"),
        "supported_os": supported_os,
        "supported_architectures": list(ARCHITECTURES),
        "message": "; ".join(problems),
    }


class FilterModule:
    def filters(self):
        return {"platform_support": platform_support}
