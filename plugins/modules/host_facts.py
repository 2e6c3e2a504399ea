#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_facts
short_description: Describe a host's CPU, NUMA layout and memory for tuning vLLM's CPU backend
version_added: 0.1.0
description:
  - Reads C(/proc/cpuinfo), C(/proc/meminfo), C(/sys/devices/system/cpu), C(/sys/devices/system/node),
    the transparent huge page settings and DMI identification, and returns them as the fact
    C(ansible_facts.arm_inference_host). Nothing is installed or changed; no extra package is needed.
  - On aarch64 the CPU implementer and part codes are mapped to the core (Neoverse-N1, V1, V2, N2, V3,
    AmpereOne, ...). The platform (AWS Graviton2/3/4, Ampere Altra, AmpereOne, NVIDIA Grace, ...) is named
    only when the host gives evidence beyond the core, namely the DMI system vendor of a cloud or the SMBIOS
    processor strings; otherwise the C(platform_candidates) of RV(ansible_facts.arm_inference_host.cpu) list what it may be.
  - The CPUs the module's own process may run on (its affinity, which reflects a container's or cgroup's
    cpuset) are reported as usable; NUMA nodes without usable CPUs (for example the GPU memory nodes of
    a Grace Hopper system) are reported but not used for thread binding.
  - x86_64 hosts get the same structure with the x86 CPU flags; DMI platform naming applies to aarch64 only.
  - Also returns the build class (which hosts may share one compiled vLLM wheel) and MAX_JOBS for a
    vLLM build on this host.
options:
  build_gib_per_job:
    description:
      - Memory one vLLM compile job needs, in GiB. RV(ansible_facts.arm_inference_host.build_max_jobs)
        is the smaller of the usable CPUs and available memory divided by this.
    type: float
    default: 2.0
  free_space_paths:
    description:
      - Paths whose free disk space to report in RV(free_bytes), each measured on its nearest existing
        directory (a directory a role will create is not there on a fresh host).
    type: list
    elements: path
    default: []
author:
  - Arm Inference maintainers (@arm-inference)
notes:
  - Read-only; supports check mode. SMBIOS processor strings are read only when the module runs as root
    (C(become)); without them Ampere Altra and NVIDIA Grace cannot be told apart from other Neoverse-N1
    and Neoverse-V2 hosts.
  - Under user-mode emulation (qemu-user) C(/proc/cpuinfo) shows the emulating host's CPU; the module
    says so in RV(ansible_facts.arm_inference_host.warnings) and reports no CPU features, so no bf16 is assumed.
seealso:
  - name: Tuning rules and per-platform results
    description: How each vLLM setting is derived from these facts.
    link: https://github.com/arm-inference/ansible-collection-vllm/blob/main/docs/tuning.md
"""

EXAMPLES = r"""
- name: Learn the host's CPUs, NUMA nodes and memory
  arm_inference.vllm.host_facts:

- name: Show what vLLM would be tuned to
  ansible.builtin.debug:
    msg: >-
      {{ ansible_facts.arm_inference_host.cpu.model_name }} on
      {{ ansible_facts.arm_inference_host.cpu.platform | default('an unnamed platform', true) }},
      {{ ansible_facts.arm_inference_host.binding_nodes | length }} NUMA node(s) for binding,
      bf16 {{ ansible_facts.arm_inference_host.cpu.bf16 }},
      wheel class {{ ansible_facts.arm_inference_host.build_class }}

- name: Allow 4 GiB per compile job on hosts with heavy C++ templates
  arm_inference.vllm.host_facts:
    build_gib_per_job: 4
"""

RETURN = r"""
free_bytes:
  description: Free bytes (for an unprivileged writer) under each of O(free_space_paths).
  returned: always
  type: dict
  sample: {"/opt/vllm": 53687091200}
ansible_facts:
  description: Facts about the host.
  returned: always
  type: dict
  contains:
    arm_inference_host:
      description: The host's description.
      type: dict
      contains:
        architecture:
          description: Machine type of the userspace (C(uname -m), normalized).
          type: str
          sample: aarch64
        cpu:
          description:
            - CPU identity and features. C(implementer), C(part), C(vendor), C(microarchitecture), C(model_name),
              C(platform), C(platform_evidence), C(platform_candidates), C(cpuinfo_architecture) (what
              C(/proc/cpuinfo) describes), C(features) (present on every CPU), C(flags) (the features that change
              vLLM's build or tuning, true/false) and C(bf16).
          type: dict
          sample:
            implementer: "0x41"
            part: "0xd4f"
            vendor: ARM
            microarchitecture: neoverse-v2
            model_name: Neoverse-V2
            platform: AWS Graviton4
            platform_evidence: "DMI sys_vendor 'Amazon EC2' (product 'c8g.4xlarge') with a Neoverse-V2 CPU"
            platform_candidates: []
            cpuinfo_architecture: aarch64
            bf16: true
        cpus:
          description: >-
            Online, offline and usable CPUs as kernel CPU lists (C(0-3,8)) with counts; C(restricted) is true
            when a cpuset or affinity mask leaves fewer usable CPUs than are online.
          type: dict
          sample: {online: "0-15", online_count: 16, offline: "", usable: "0-15", usable_count: 16, restricted: false}
        numa_nodes:
          description: >-
            Every NUMA node with its online CPUs, usable CPUs, memory in MiB, whether it has CPUs and whether
            it is used for thread binding (it has usable CPUs).
          type: list
          elements: dict
        binding_nodes:
          description: Ids of the NUMA nodes used for binding.
          type: list
          elements: int
          sample: [0, 1]
        memory:
          description: Total and available memory in MiB.
          type: dict
          sample: {total_mib: 31767, available_mib: 30411}
        transparent_hugepages:
          description: Selected transparent huge page modes, or null where the kernel has none.
          type: dict
          sample: {enabled: madvise, defrag: madvise}
        build_class:
          description: >-
            Which hosts may share one compiled vLLM wheel: the ISA extensions vLLM's CPU build compiles in,
            for example C(aarch64-dotprod-fp16-bf16-i8mm) or C(aarch64-dotprod-fp16) (Neoverse-N1).
          type: str
          sample: aarch64-dotprod-fp16-bf16-i8mm
        build_max_jobs:
          description: MAX_JOBS for a vLLM compile on this host.
          type: int
          sample: 8
        warnings:
          description: What the module had to fall back from (also shown as Ansible warnings).
          type: list
          elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.arm_inference.vllm.plugins.module_utils.host_facts import HostFactsError
from ansible_collections.arm_inference.vllm.plugins.module_utils.host_survey import host_facts
from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_tuning import TuningError


def main():
    module = AnsibleModule(
        argument_spec=dict(build_gib_per_job=dict(type="float", default=2.0),
                           free_space_paths=dict(type="list", elements="path", default=[])),
        supports_check_mode=True,
    )
    try:
        answer = host_facts(module.params["build_gib_per_job"], module.params["free_space_paths"])
    except (HostFactsError, TuningError) as error:
        module.fail_json(msg=str(error))
    for warning in answer["facts"]["warnings"]:
        module.warn(warning)
    module.exit_json(changed=False, ansible_facts={"arm_inference_host": answer["facts"]}, free_bytes=answer["free_bytes"])


if __name__ == "__main__":
    main()
