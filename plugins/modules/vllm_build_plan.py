#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_build_plan
short_description: Decide what the vllm_build role does on a host, and say why
version_added: 0.1.0
description:
  - Reads the host once its vLLM source is fetched - the build venv's Python and C++ compiler, the source tree
    (requirement files, torch pin, Python range, Rust toolchain), rustup, the releases under O(root) - and returns
    the build plan the vllm_build role follows - the build identity, the release named after it, whether a build is
    needed and one sentence saying why, whether to build and to activate now, and the wheel cache key.
  - A source the role must refuse (a Python the tree does not support, an sdist whose C(PKG-INFO) names another
    version, a git-less tarball without O(archive_version), required Rust extensions without rustup, a cached
    wheel of another CPU build class) fails here, before anything is built.
  - In check mode the plan never builds; a source that is not fetched yet (check mode on a host that never built)
    gives an unknown identity, RV(prepared=false) and nothing to do.
options:
  root:
    description: The build root (C(releases/), C(builds/), C(current)).
    type: path
    required: true
  venv:
    description: The build venv; its Python is part of the build identity.
    type: path
    required: true
  method:
    description: How vLLM comes (the role's C(vllm_build_method)).
    type: str
    required: true
    choices: [git, sdist, archive, wheel]
  label:
    description: What a compiled release is named after (the git ref, the sdist pin, the archive's name).
    type: str
    default: ""
  tree:
    description: The fetched source tree of a compiled method.
    type: path
  source:
    description:
      - The source's own part of the build identity - C(commit) for git; C(sha256) and C(version_override) for an
        archive or sdist; C(wheel) (a wheel file's sha256, or the pin or URL) for a ready-made wheel.
    type: dict
    required: true
  source_changed:
    description: Whether fetching the source changed it (in check mode the tree is then still the previous one).
    type: bool
    default: false
  facts:
    description: The host's C(arm_inference_host) facts (M(arm_inference.vllm.host_facts)), for its CPU build class.
    type: dict
    required: true
  os:
    description: The host's OS as the identity names it, such as C(debian-12).
    type: str
    required: true
  architecture:
    description: The host's architecture (C(ansible_facts.architecture)).
    type: str
    required: true
  cxx:
    description: The C++ compiler the build uses; its real file and full version are part of the identity.
    type: str
    default: c++
  rust:
    description: The role's C(vllm_build_rust) - V(auto), V(required) or V(off).
    type: str
    default: auto
    choices: [auto, required, "off"]
  arm_bf16:
    description: The role's C(vllm_build_arm_bf16).
    type: bool
    default: false
  onednn_source_dir:
    description: The role's C(vllm_build_onednn_source_dir).
    type: str
    default: ""
  acl_root_dir:
    description: The role's C(vllm_build_acl_root_dir).
    type: str
    default: ""
  environment:
    description: The role's C(vllm_build_environment).
    type: dict
    default: {}
  torch_index_url:
    description: The role's C(vllm_build_torch_index_url), named in what the plan says about the tree's torch.
    type: str
    default: ""
  requirement_overrides:
    description: The role's C(vllm_build_requirement_overrides); part of the identity when not empty.
    type: dict
    default: {}
  sdist:
    description: The role's C(vllm_build_sdist), whose version the sdist's C(PKG-INFO) must name.
    type: str
    default: ""
  archive:
    description: The role's C(vllm_build_archive), named when it cannot tell its version.
    type: str
    default: ""
  archive_version:
    description: The role's C(vllm_build_archive_version).
    type: str
    default: ""
  wheel:
    description: The role's C(vllm_build_wheel) (ready-made wheel method).
    type: str
    default: ""
  wheel_record:
    description: The C(wheel.json) next to a wheel file from the role's wheel cache (empty for others).
    type: dict
    default: {}
  host_name:
    description: The host's inventory name, for messages.
    type: str
    default: this host
author:
  - Arm Inference maintainers (@arm-inference)
notes:
  - Read-only; supports check mode.
"""

EXAMPLES = r"""
- name: Plan the build
  arm_inference.vllm.vllm_build_plan:
    root: /opt/vllm
    venv: /opt/vllm/venv
    method: git
    label: v0.32.0
    tree: /opt/vllm/src/vllm
    source: {commit: 0123456789abcdef0123456789abcdef01234567}
    facts: "{{ ansible_facts.arm_inference_host }}"
    os: debian-12
    architecture: aarch64
  register: __vllm_build_plan
"""

RETURN = r"""
prepared:
  description: Whether the source is there to plan from (false only in check mode before a first fetch).
  returned: always
  type: bool
needed:
  description: Whether the release the plan names is missing on the host (it must be built or installed).
  returned: always
  type: bool
reason:
  description: One sentence for the operator - why a build is needed or not.
  returned: always
  type: str
  sample: "release v0.32.0-3f5c0a9e1b2d4c6f already current: nothing to build."
notes:
  description: What the operator should know about this build (a torch only PyTorch's index has, missing Rust extensions).
  returned: always
  type: list
  elements: str
build:
  description: Whether to build (or install) the release now - needed and not in check mode.
  returned: always
  type: bool
activate:
  description: Whether the release can be made current now (not in check mode when it would first be built).
  returned: always
  type: bool
identity:
  description: The build identity (a short digest of everything that changes the compiled wheel).
  returned: always
  type: str
inputs:
  description: What the identity is made of.
  returned: always
  type: dict
label:
  description: What the release is named after.
  returned: always
  type: str
release:
  description: The release's name (C(<label>-<identity>)).
  returned: always
  type: str
release_dir:
  description: The release's directory.
  returned: always
  type: str
unfinished:
  description: Whether a release directory of that name exists without its stamp (an interrupted install).
  returned: always
  type: bool
current:
  description: The current release before this run, or null.
  returned: always
  type: str
build_dir:
  description: The build's directory (C(<root>/builds/<identity>)).
  returned: always
  type: str
build_class:
  description: The host's CPU build class.
  returned: always
  type: str
python:
  description: The build venv's Python (major.minor).
  returned: always
  type: str
rust:
  description: The Rust toolchain the build uses for vLLM's Rust extensions, empty for none.
  returned: always
  type: str
tree_info:
  description: What M(arm_inference.vllm.vllm_source_info) says of the tree (null for a wheel or an unfetched source).
  returned: always
  type: dict
built_on_host:
  description: The record (C(build.json)) of a finished build of this identity on the host, or null.
  returned: always
  type: dict
cache_key:
  description: The build's directory in the controller's wheel cache, relative to it.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_build

ARGUMENT_SPEC = {
    "root": {"type": "path", "required": True},
    "venv": {"type": "path", "required": True},
    "method": {"type": "str", "required": True, "choices": list(vllm_build.METHODS)},
    "label": {"type": "str", "default": ""},
    "tree": {"type": "path"},
    "source": {"type": "dict", "required": True},
    "source_changed": {"type": "bool", "default": False},
    "facts": {"type": "dict", "required": True},
    "os": {"type": "str", "required": True},
    "architecture": {"type": "str", "required": True},
    "cxx": {"type": "str", "default": "c++"},
    "rust": {"type": "str", "default": "auto", "choices": ["auto", "required", "off"]},
    "arm_bf16": {"type": "bool", "default": False},
    "onednn_source_dir": {"type": "str", "default": ""},
    "acl_root_dir": {"type": "str", "default": ""},
    "environment": {"type": "dict", "default": {}},
    "torch_index_url": {"type": "str", "default": ""},
    "requirement_overrides": {"type": "dict", "default": {}},
    "sdist": {"type": "str", "default": ""},
    "archive": {"type": "str", "default": ""},
    "archive_version": {"type": "str", "default": ""},
    "wheel": {"type": "str", "default": ""},
    "wheel_record": {"type": "dict", "default": {}},
    "host_name": {"type": "str", "default": "this host"},
}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, required_if=[("method", "git", ["tree"]),
                                                                     ("method", "sdist", ["tree"]),
                                                                     ("method", "archive", ["tree"])],
                           supports_check_mode=True)
    try:
        plan = vllm_build.build_plan(module.params, module.run_command, module.check_mode)
    except (vllm_build.BuildError, OSError, UnicodeDecodeError) as error:
        module.fail_json(msg=str(error))
    module.exit_json(changed=False, **plan)


if __name__ == "__main__":
    main()
