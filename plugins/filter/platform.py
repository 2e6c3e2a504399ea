# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which operating systems and architectures the collection's roles support, and their defaults; and whether
the ansible-core running the play is within the range meta/runtime.yml declares (requires_ansible)."""

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
  - The ansible-core running the play is checked too (see P(arm_inference.vllm.ansible_core_support#filter)), so every
    role that checks its platform also stops on a controller below the collection's floor.
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

from pathlib import Path

import yaml
from ansible.errors import AnsibleFilterError
from ansible.release import __version__ as ANSIBLE_CORE_VERSION
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

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


# The one place the floor is declared: the collection's own meta/runtime.yml (requires_ansible).
RUNTIME_FILE = Path(__file__).resolve().parents[2] / "meta" / "runtime.yml"


def requires_ansible(runtime_file=RUNTIME_FILE):
    """The collection's requires_ansible specifier set, read from meta/runtime.yml."""
    try:
        declared = (yaml.safe_load(Path(runtime_file).read_text()) or {}).get("requires_ansible")
        return SpecifierSet(declared)
    except (OSError, yaml.YAMLError, AttributeError, TypeError, InvalidSpecifier) as error:
        raise AnsibleFilterError("cannot read requires_ansible from %s: %s" % (runtime_file, error))


def ansible_core_support(version, runtime_file=RUNTIME_FILE):
    """Whether ansible-core `version` is within requires_ansible, with a one-line message when it is not."""
    required = requires_ansible(runtime_file)
    floors = sorted(Version(spec.version) for spec in required if spec.operator in (">=", ">", "~=", "=="))
    floor = str(floors[-1]) if floors else None
    try:
        supported = required.contains(Version(str(version)), prereleases=True)
    except InvalidVersion:
        raise AnsibleFilterError("ansible_core_support: %r is not an ansible-core version (pass ansible_version.full)" % (version,))
    message = ""
    if not supported and floor and Version(str(version)) < Version(floor):
        message = ("ansible-core %s is older than this collection's floor %s; install ansible-core %s or newer "
                   "(pip install --upgrade 'ansible-core%s') and run again" % (version, floor, floor, required))
    elif not supported:
        message = ("ansible-core %s is outside this collection's supported range %s (meta/runtime.yml); install "
                   "ansible-core within it (pip install 'ansible-core%s') and run again" % (version, required, required))
    return {"supported": supported, "version": str(version), "requires": str(required), "floor": floor, "message": message}


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
    core = ansible_core_support(ANSIBLE_CORE_VERSION)
    problems = [] if core["supported"] else [core["message"]]
    if not os_supported:
        problems.append(
            "operating system %s %s is not supported (supported: %s)"
            % (facts.get("distribution"), facts.get("distribution_version", facts.get("distribution_major_version")), supported_os)
        )
    if not arch_supported:
        problems.append("architecture %s is not supported (supported: %s)" % (architecture, ", ".join(ARCHITECTURES)))
    return {
        "key": key,
        "supported": os_supported and arch_supported and core["supported"],
        "os_supported": os_supported,
        "architecture_supported": arch_supported,
        "default_python": PLATFORMS.get(key, {}).get("python"),
        "supported_os": supported_os,
        "supported_architectures": list(ARCHITECTURES),
        "message": "; ".join(problems),
    }


class FilterModule:
    def filters(self):
        return {"platform_support": platform_support, "ansible_core_support": ansible_core_support}
