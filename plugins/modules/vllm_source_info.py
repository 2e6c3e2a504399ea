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
  - Reads what the tree asks for on this host, by its machine and the environment markers of the
    requirement lines - the torch version it pins, and the package index that version is published
    on (a C(+cpu) build such as C(2.13.0+cpu) exists only on PyTorch's own CPU index).
  - Reads an sdist's C(PKG-INFO) (the version setuptools-scm builds) and the Python versions the tree
    supports (C(Requires-Python), or C(requires-python) in C(pyproject.toml)).
options:
  path:
    description: Root of the source tree.
    type: path
    required: true
  python:
    description: Version of the Python that builds the tree (such as C(3.11)); with it the result says whether the tree supports it.
    type: str
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
rust_requirements:
  description: Build requirements of the tree's Rust extensions, relative to O(path), or null when it has none.
  returned: success
  type: str
  sample: requirements/build/rust.txt
torch:
  description: >-
    The torch the build and runtime requirements ask for on this host (C(requirement), C(version) when pinned exactly,
    C(index) where that version is published or null for PyPI, C(files)), or null when they name none.
  returned: success
  type: dict
  sample: {requirement: torch==2.13.0+cpu, version: 2.13.0+cpu, index: "https://download.pytorch.org/whl/cpu",
           files: [requirements/build/cpu.txt, requirements/cpu.txt]}
version:
  description: The version in the tree's C(PKG-INFO) (an sdist), or null.
  returned: success
  type: str
  sample: 0.32.0
requires_python:
  description: The Python versions the tree supports, or null when it does not say.
  returned: success
  type: str
  sample: ">=3.11,<3.15"
python_supported:
  description: Whether O(python) is among them (null without O(python)).
  returned: success
  type: bool
rust_toolchain:
  description: The Rust toolchain the tree pins in C(rust-toolchain.toml) for its optional Rust extensions, or null.
  returned: success
  type: str
  sample: nightly-2026-03-01
requirements_sha256:
  description: Fingerprints of the build and runtime requirements (and of the Rust ones when the tree has them), includes folded in.
  returned: success
  type: dict
  sample: {build: "3f5c...", runtime: "a1b2..."}
"""

import platform

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_build


def main():
    module = AnsibleModule(argument_spec={"path": {"type": "path", "required": True}, "python": {"type": "str"}},
                           supports_check_mode=True)
    try:
        described = vllm_build.describe_source(module.params["path"], platform.machine(), module.params["python"])
    except (vllm_build.BuildError, OSError, UnicodeDecodeError) as error:
        module.fail_json(msg=str(error))
    module.exit_json(changed=False, **described)


if __name__ == "__main__":
    main()
