#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_build_wait
short_description: Wait for an async vLLM build, printing its progress while it runs
version_added: 0.1.0
description:
  - Polls an async job started by M(arm_inference.vllm.vllm_build_run) and its build log. Every time
    the last ninja step (C([n/m] ...)) moves, one line is printed on the controller, with the elapsed time.
  - Fails with the last lines of the build log when the build fails.
  - This is an action plugin; it runs on the controller and calls C(async_status) and
    M(arm_inference.vllm.vllm_build_log) on the host.
options:
  jid:
    description: The job id registered from the async build task (C(ansible_job_id)).
    type: str
    required: true
  log:
    description: The build log on the host.
    type: path
    required: true
  poll:
    description: Seconds between polls.
    type: int
    default: 30
  timeout:
    description: Seconds to wait before failing. The build itself may go on; its async limit stops it.
    type: int
    default: 10800
author:
  - Arm Inference maintainers (@arm-inference)
notes:
  - Use the same C(become) settings as the task that started the job, since async results are stored
    per user.
"""

EXAMPLES = r"""
- name: Wait for the build
  arm_inference.vllm.vllm_build_wait:
    jid: "{{ __vllm_build_job.ansible_job_id }}"
    log: /opt/vllm/builds/3f5c0a9e1b2d4c6f/build.log
    poll: 30
"""

RETURN = r"""
wheel:
  description: Path of the built wheel on the host.
  returned: success
  type: str
progress:
  description: The last ninja step seen.
  returned: always
  type: dict
log_tail:
  description: The last lines of the build log.
  returned: always
  type: list
  elements: str
"""
