#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_gateway_probe
short_description: Probe the vllm_gateway role's HAProxy as its clients reach it, in one module run
version_added: 0.1.0
description:
  - With instances behind the gateway (O(upstreams)), waits until its health route answers 200 (a 503 while HAProxy
    has no healthy upstream yet, or no answer at all, is waited out).
  - Then checks that C(/v1/models) without a key is refused (401), so the keys are enforced before anything reaches
    vLLM.
  - Last, with instances behind it, that the role's own probe key (read here, from O(probe_key_file) on the host; it
    never passes through Ansible) reaches vLLM through the gateway (200), which proves TLS, the key map, vLLM's key in
    place of the client's, and an instance answering. rolling_update.yml rejoins a host only after this.
  - One module run for what were three C(uri) tasks (the probe key read into Ansible for the last one).
  - The probe goes to the host's own loopback listener, whose certificate does not name 127.0.0.1; it is not checked.
options:
  base_url:
    description: The gateway as the host's clients reach it, such as C(https://127.0.0.1:8443).
    type: str
    required: true
  health_route:
    description: The path HAProxy answers health checks on.
    type: str
    required: true
  probe_key_file:
    description: The role's probe key on the host (root-only).
    type: path
    required: true
  upstreams:
    description: Whether vLLM instances stand behind the gateway; without, only the refusal is checked.
    type: bool
    default: true
  retries:
    description: Health checks before giving up.
    type: int
    default: 15
  delay:
    description: Seconds between health checks.
    type: int
    default: 2
author:
  - Arm Inference maintainers (@arm-inference)
notes:
  - Read-only; check mode skips it (nothing new to probe).
"""

EXAMPLES = r"""
- name: Probe the gateway
  arm_inference.vllm.vllm_gateway_probe:
    base_url: https://127.0.0.1:8443
    health_route: /health
    probe_key_file: /etc/haproxy/vllm-gateway/probe.key
"""

RETURN = r"""
health:
  description: The health route's last status (null when it was not asked or nothing answered).
  returned: always
  type: int
without_key:
  description: What C(/v1/models) answered without a key.
  returned: always
  type: int
with_probe_key:
  description: What C(/v1/models) answered with the probe key (null without upstreams).
  returned: always
  type: int
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.arm_inference.vllm.plugins.module_utils.http_status import status


def probe(params, sleep=time.sleep):
    """(result, failure message or None) of the three checks, in order; the first that fails ends the probe."""
    base = params["base_url"].rstrip("/")
    result = {"changed": False, "health": None, "without_key": None, "with_probe_key": None}
    if params["upstreams"]:
        url = base + params["health_route"]
        for attempt in range(max(params["retries"], 1)):
            if attempt:
                sleep(params["delay"])
            result["health"] = status(url)
            if result["health"] == 200:
                break
        else:
            return result, ("vllm_gateway: %s did not answer 200 in %d checks %d s apart (last: %s)"
                            % (url, params["retries"], params["delay"], result["health"] or "no answer"))
    models = base + "/v1/models"
    result["without_key"] = status(models)
    if result["without_key"] != 401:
        return result, ("vllm_gateway: %s answered %s without a key, not 401: the gateway does not enforce its keys"
                        % (models, result["without_key"] or "nothing"))
    if not params["upstreams"]:
        return result, None
    try:
        with open(params["probe_key_file"], encoding="utf-8") as handle:
            key = handle.read().strip()
    except OSError as error:
        return result, "vllm_gateway: cannot read the probe key %s: %s" % (params["probe_key_file"], error)
    result["with_probe_key"] = status(models, {"Authorization": "Bearer " + key})
    if result["with_probe_key"] != 200:
        return result, ("vllm_gateway: a listed key (the role's probe key) got %s at %s, not 200: the gateway does not "
                        "reach vLLM with it (its key map, vLLM's key in its place, or no instance answering)"
                        % (result["with_probe_key"] or "nothing", models))
    return result, None


def main():
    module = AnsibleModule(argument_spec={
        "base_url": {"type": "str", "required": True},
        "health_route": {"type": "str", "required": True},
        "probe_key_file": {"type": "path", "required": True, "no_log": False},
        "upstreams": {"type": "bool", "default": True},
        "retries": {"type": "int", "default": 15},
        "delay": {"type": "int", "default": 2},
    }, supports_check_mode=True)
    if module.check_mode:
        module.exit_json(changed=False, health=None, without_key=None, with_probe_key=None)
    result, failure = probe(module.params)
    if failure:
        module.fail_json(msg=failure, **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
