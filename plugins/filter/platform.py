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

import operator
import re
from pathlib import Path

import yaml
from ansible.errors import AnsibleFilterError
from ansible.release import __version__ as ANSIBLE_CORE_VERSION

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


# What requires_ansible uses (PEP 440 comparisons without wildcards); plugins may only import what
# ansible-core guarantees to a controller, so the few rules needed live here.
_COMPARISONS = {">=": operator.ge, ">": operator.gt, "<=": operator.le, "<": operator.lt, "==": operator.eq,
                "!=": operator.ne}
_SPECIFIER = re.compile(r"^\s*(>=|<=|==|!=|>|<)\s*([0-9]+(?:\.[0-9]+)*)\s*$")
_VERSION = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)*)((?:a|b|rc|\.dev)[0-9]*)?(?:\.post[0-9]+)?\s*$")


def _release(text):
    """(2, 19, 0) for "2.19"; padded so that 2.19 == 2.19.0."""
    parts = tuple(int(part) for part in text.split("."))
    return parts + (0,) * (3 - len(parts)) if len(parts) < 3 else parts


def _version_key(version):
    """A sortable key: a pre-release (2.19.0rc1, 2.19.0.dev0) sorts before its release."""
    match = _VERSION.match(str(version))
    if not match:
        raise AnsibleFilterError("ansible_core_support: %r is not an ansible-core version (pass ansible_version.full)"
                                 % (version,))
    return (_release(match.group(1)), 0 if match.group(2) else 1)


def requires_ansible(runtime_file=RUNTIME_FILE):
    """The collection's requires_ansible as (text, [(operator symbol, release tuple), ...])."""
    try:
        declared = str((yaml.safe_load(Path(runtime_file).read_text()) or {})["requires_ansible"])
    except (OSError, yaml.YAMLError, KeyError, TypeError) as error:
        raise AnsibleFilterError("cannot read requires_ansible from %s: %s" % (runtime_file, error))
    specifiers = []
    for clause in declared.split(","):
        match = _SPECIFIER.match(clause)
        if not match:
            raise AnsibleFilterError("requires_ansible in %s: cannot read %r (expected comparisons such as >=2.19.0)"
                                     % (runtime_file, clause))
        specifiers.append((match.group(1), match.group(2)))
    return declared, specifiers


def ansible_core_support(version, runtime_file=RUNTIME_FILE):
    """Whether ansible-core `version` is within requires_ansible, with a one-line message when it is not."""
    declared, specifiers = requires_ansible(runtime_file)
    key = _version_key(version)
    # PEP 440: "<2.22" also excludes 2.22's pre-releases, so it compares releases only.
    supported = all(key[0] < _release(bound) if symbol == "<" else _COMPARISONS[symbol](key, (_release(bound), 1))
                    for symbol, bound in specifiers)
    floors = sorted((_release(bound), bound) for symbol, bound in specifiers if symbol in (">=", ">", "=="))
    floor = floors[-1][1] if floors else None
    message = ""
    if not supported and floor and key < (_release(floor), 1):
        message = ("ansible-core %s is older than this collection's floor %s; install ansible-core %s or newer "
                   "(pip install --upgrade 'ansible-core%s') and run again" % (version, floor, floor, declared))
    elif not supported:
        message = ("ansible-core %s is outside this collection's supported range %s (meta/runtime.yml); install "
                   "ansible-core within it (pip install 'ansible-core%s') and run again" % (version, declared, declared))
    return {"supported": supported, "version": str(version), "requires": declared, "floor": floor, "message": message}


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
