#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_build_log
short_description: Read the progress and the tail of a vLLM build log
version_added: 0.1.0
description:
  - Reads only the end of the log (the last 64 KiB), so it stays cheap on multi-megabyte logs.
  - Reports the last ninja step (C([n/m] ...)) and the last lines.
options:
  path:
    description: The build log.
    type: path
    required: true
  lines:
    description: How many lines of the tail to return.
    type: int
    default: 40
author:
  - Arm Inference maintainers (@arm-inference)
notes:
  - Read-only; supports check mode.
"""

EXAMPLES = r"""
- name: Show where the build is
  arm_inference.vllm.vllm_build_log:
    path: /opt/vllm/builds/3f5c0a9e1b2d4c6f/build.log
  register: __vllm_build_log
"""

RETURN = r"""
exists:
  description: Whether the log exists yet.
  returned: always
  type: bool
size:
  description: Size of the log in bytes.
  returned: always
  type: int
progress:
  description: The last ninja step, or null before the compile starts.
  returned: always
  type: dict
  sample: {done: 212, total: 431, line: "[212/431] Building CXX object CMakeFiles/_C.dir/csrc/cpu/attention.cpp.o"}
last_line:
  description: The last non-empty line of the log.
  returned: always
  type: str
tail:
  description: The last O(lines) lines.
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_build


def main():
    module = AnsibleModule(
        argument_spec={"path": {"type": "path", "required": True}, "lines": {"type": "int", "default": 40}},
        supports_check_mode=True,
    )
    path = module.params["path"]
    try:
        size = os.path.getsize(path)
        text = vllm_build.read_log_end(path)
    except FileNotFoundError:
        module.exit_json(changed=False, exists=False, size=0, progress=None, last_line="", tail=[])
    except OSError as error:
        module.fail_json(msg="Cannot read the build log %s: %s" % (path, error))
    lines = [line for line in text.splitlines() if line.strip()]
    module.exit_json(changed=False, exists=True, size=size, progress=vllm_build.ninja_progress(text),
                     last_line=lines[-1][:300] if lines else "", tail=lines[-module.params["lines"]:])


if __name__ == "__main__":
    main()
