#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_serve_health
short_description: Wait until vLLM instances answer /health, or fail as soon as one's unit will not serve
version_added: 0.1.0
description:
  - Polls each instance's C(/health) until it answers 200. Between polls it asks systemd about the instance's unit
    (C(vllm-serve-<name>.service)); a unit that systemd gave up on (failed, the start limit hit), that is not running,
    or whose process exited while starting (waiting to be restarted into the same failure) stops the wait at once.
  - The failure message names each instance that will not serve, why, and its journal's decisive line (the
    exception a traceback ends with, argparse's C(error:) line, the launcher's refusal, or systemd's own failure),
    then the last journal lines.
  - Once every instance answers, each one whose endpoint names an API key file (C(api_key_file)) must refuse
    C(/v1/models) without the key (401), which proves the key reached vLLM (the launcher fails closed; this catches
    anything else). An instance that answers otherwise fails the module, named.
  - The vllm_serve role's C(health.yml) runs it after a start and after a restore; nothing else should.
options:
  endpoints:
    description: Instances as in vllm_serve's endpoints file (C(name), C(base_url), C(api_key_file)).
    type: list
    elements: dict
    required: true
  timeout:
    description: Seconds to wait for every instance in all.
    type: int
    required: true
  interval:
    description: Seconds between polls.
    type: int
    default: 2
  journal_lines:
    description: Journal lines read per unit that will not serve.
    type: int
    default: 40
author:
  - Arm Inference maintainers (@arm-inference)
notes:
  - Read-only; supports check mode.
"""

EXAMPLES = r"""
- name: Wait for the instances
  arm_inference.vllm.vllm_serve_health:
    endpoints: [{name: main, base_url: "http://127.0.0.1:8000"}]
    timeout: 900
"""

RETURN = r"""
healthy:
  description: Names of the instances that answered.
  returned: always
  type: list
  elements: str
failures:
  description: Each instance that will not serve, with C(unit), C(url), C(reason), C(decisive) and C(tail).
  returned: on failure
  type: list
  elements: dict
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.arm_inference.vllm.plugins.module_utils import http_status
from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_serve import UNIT_PREFIX
from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_serve_health import (
    UNIT_PROPERTIES,
    decisive_line,
    failure_message,
    last_run,
    parse_show,
    unit_verdict,
)


def _unguarded(endpoints):
    """Each instance that should refuse a request without its key and does not: (name, url, status)."""
    found = []
    for endpoint in endpoints:
        if endpoint.get("api_key_file"):
            url = endpoint["base_url"].rstrip("/") + "/v1/models"
            status = http_status.status(url, timeout=5)
            if status != 401:
                found.append((endpoint["name"], url, status))
    return found


def _failure(module, endpoint, reason, lines):
    unit = UNIT_PREFIX + endpoint["name"] + ".service"
    rc, out, dummy = module.run_command(["journalctl", "--no-pager", "--output=cat", "--lines",
                                         str(lines), "--unit", unit])
    tail = out.splitlines() if rc == 0 else []
    return {"name": endpoint["name"], "unit": unit, "url": endpoint["base_url"] + "/health", "reason": reason,
            "decisive": decisive_line(last_run(tail)), "tail": tail}


def main():
    module = AnsibleModule(argument_spec={
        "endpoints": {"type": "list", "elements": "dict", "required": True},
        "timeout": {"type": "int", "required": True},
        "interval": {"type": "int", "default": 2},
        "journal_lines": {"type": "int", "default": 40},
    }, supports_check_mode=True)
    params = module.params
    pending = {endpoint["name"]: endpoint for endpoint in params["endpoints"]}
    healthy, failures = [], []
    deadline = time.monotonic() + params["timeout"]
    while pending:
        for name, endpoint in list(pending.items()):
            if http_status.status(endpoint["base_url"] + "/health", timeout=5) == 200:
                healthy.append(name)
                del pending[name]
                continue
            rc, out, dummy = module.run_command(["systemctl", "show", "--property=" + ",".join(UNIT_PROPERTIES),
                                                 UNIT_PREFIX + name + ".service"])
            verdict = unit_verdict(parse_show(out)) if rc == 0 else None
            if verdict:
                failures.append(_failure(module, endpoint, verdict, params["journal_lines"]))
                del pending[name]
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(params["interval"])
    timed_out = [_failure(module, endpoint, "/health did not answer 200", params["journal_lines"])
                 for endpoint in pending.values()]
    if failures or timed_out:
        module.fail_json(msg=failure_message(failures + timed_out, params["timeout"] if timed_out and not failures
                                             else None), healthy=healthy, failures=failures + timed_out)
    unguarded = _unguarded(params["endpoints"])
    if unguarded:
        module.fail_json(msg="; ".join("vllm_serve: instance %s answered %s at %s without the API key, not 401: the key "
                                       "did not reach vLLM" % (name, status or "nothing", url)
                                       for name, url, status in unguarded), healthy=healthy)
    module.exit_json(changed=False, healthy=healthy)


if __name__ == "__main__":
    main()
