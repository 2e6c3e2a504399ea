#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_serve_api_key
short_description: Make a random API key in a file on the host, once, that no output ever shows
version_added: 0.1.0
description:
  - When O(path) is missing or holds no key, writes 32 random bytes from the host's own random source as 64 hex
    characters (and a newline) to it, created with mode 0600 before anything is written, then moved into place.
    A file that holds a key is kept as it is, so a re-run changes nothing.
  - The key is made on the managed host; it is never returned, logged or passed on a command line.
  - The collection's one maker of key files. The vllm_serve role uses it for vLLM's own key when the gateway fronts
    vLLM and the operator gave none; the vllm_gateway role for its probe key (the client key its own checks and
    smoke.yml use).
options:
  path:
    description: Absolute path of the key file; its directory must exist.
    type: path
    required: true
extends_documentation_fragment:
  - ansible.builtin.files
author:
  - Arm Inference maintainers (@arm-inference)
notes:
  - O(owner), O(group) and O(mode) apply to a new file and to an existing one alike.
  - Supports check mode (reports the key it would make, writes nothing).
"""

EXAMPLES = r"""
- name: Make vLLM's own key, readable by root only
  arm_inference.vllm.vllm_serve_api_key:
    path: /etc/vllm-serve/generated_api_key
    owner: root
    group: root
    mode: "0600"
"""

RETURN = r"""
path:
  description: The key file.
  returned: always
  type: str
generated:
  description: Whether this run made a new key (the key itself is never returned).
  returned: always
  type: bool
"""

import os
import secrets
import tempfile

from ansible.module_utils.basic import AnsibleModule

KEY_BYTES = 32


def holds_key(path):
    """True when path is a file with something other than whitespace in it."""
    try:
        with open(path, "rb") as handle:
            return bool(handle.read(4096).strip())
    except FileNotFoundError:
        return False


def write_key(path):
    """A new random key in path: a 0600 temporary file in the same directory, renamed over it."""
    handle, temporary = tempfile.mkstemp(prefix=".api_key.", dir=os.path.dirname(path))
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(secrets.token_hex(KEY_BYTES) + "\n")
            stream.flush()
            os.fsync(stream.fileno())
        os.rename(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def main():
    module = AnsibleModule(argument_spec={"path": {"type": "path", "required": True}},
                           add_file_common_args=True, supports_check_mode=True)
    path = module.params["path"]
    if not os.path.isabs(path):
        module.fail_json(msg="vllm_serve_api_key: path must be absolute (got %s)" % path)
    generated = not holds_key(path)
    if generated and module.check_mode:
        module.exit_json(changed=True, path=path, generated=True)
    if not os.path.isdir(os.path.dirname(path)):
        module.fail_json(msg="vllm_serve_api_key: the directory of %s does not exist" % path)
    if generated:
        write_key(path)
    changed = module.set_fs_attributes_if_different(module.load_file_common_arguments(module.params), generated)
    module.exit_json(changed=changed, path=path, generated=generated)


if __name__ == "__main__":
    main()
