#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_source_info
short_description: Find the CPU requirement files of a vLLM source tree and fingerprint them
version_added: 0.1.0
description:
  - Looks at what a checked-out vLLM source tree really contains instead of guessing from its version.
    vLLM renamed its CPU build requirements from C(requirements/cpu-build.txt) to
    C(requirements/build/cpu.txt) in late 2025; the newest name present wins.
  - Reports the Rust toolchain the tree pins for vLLM's optional Rust extensions (vLLM >= 0.22).
  - Each requirement file is fingerprinted together with every file it includes (C(-r), C(-c)), so a
    pin changed anywhere gives a new build identity.
options:
  path:
    description: Root of the source tree.
    type: path
    required: true
author:
  - Arm Inference maintainers (@arm-inference)
notes:
  - Read-only; supports check mode.
"""

EXAMPLES = r"""
- name: Find the requirement files of the pinned tree
  arm_inference.vllm.vllm_source_info:
    path: /opt/vllm/src/vllm
  register: __vllm_source
"""

RETURN = r"""
build_requirements:
  description: Build requirement file, relative to O(path).
  returned: success
  type: str
  sample: requirements/build/cpu.txt
runtime_requirements:
  description: Runtime requirement file, relative to O(path).
  returned: success
  type: str
  sample: requirements/cpu.txt
requirement_files:
  description: Every requirement file read, includes after the file that includes them.
  returned: success
  type: list
  elements: str
  sample: [requirements/build/cpu.txt, requirements/cpu.txt, requirements/common.txt]
rust_toolchain:
  description: The Rust toolchain the tree pins in C(rust-toolchain.toml) for its optional Rust extensions, or null.
  returned: success
  type: str
  sample: nightly-2026-03-01
requirements_sha256:
  description: Fingerprints of the build and runtime requirements, includes folded in.
  returned: success
  type: dict
  sample: {build: "3f5c...", runtime: "a1b2..."}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_build


def main():
    module = AnsibleModule(argument_spec={"path": {"type": "path", "required": True}}, supports_check_mode=True)
    root = module.params["path"]
    try:
        found = vllm_build.discover_requirements(root)
        files = []
        for relative in found.values():
            files.extend(name for name in vllm_build.requirement_files(root, relative) if name not in files)
        digests = {kind: vllm_build.requirements_digest(root, relative) for kind, relative in found.items()}
        rust = vllm_build.rust_toolchain(root)
    except (vllm_build.BuildError, OSError, UnicodeDecodeError) as error:
        module.fail_json(msg=str(error))
    module.exit_json(changed=False, build_requirements=found["build"], runtime_requirements=found["runtime"],
                     requirement_files=files, requirements_sha256=digests, rust_toolchain=rust)


if __name__ == "__main__":
    main()
