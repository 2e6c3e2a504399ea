#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_chat_load
short_description: Send concurrent chat completions to vLLM servers with the official openai client and measure them
version_added: 0.1.0
description:
  - For each endpoint (by default every instance the vllm_serve role wrote into its endpoints file), asks the
    server for its model, sends one untimed warm-up request, then for each concurrency level sends streaming
    chat completions with at most that many in flight.
  - Reports per level the requests that succeeded, output tokens per second over the level's wall time, and the
    50th/90th/99th percentiles of the time to first token (TTFT), the time per further output token (TPOT) and
    the request latency, in milliseconds.
  - Reads each endpoint's API key from its key file on the host, so the key never travels through Ansible.
  - The load runs apart from the module, in O(python) (the vLLM venv's, which has the official C(openai) client) as
    the account O(run_as), never as root. The venv is the build user's, who installs every dependency with pip; its
    interpreter, the C(openai) package and any C(.pth) file there would run that user's code as root. The module
    (as root, in the host's own Python) reads the endpoints, keys and CA files and hands them to the load on its
    standard input (never in its arguments or environment).
requirements:
  - The C(openai) Python package in O(python). vLLM depends on it, so give the vLLM venv's interpreter (the C(python)
    entry of the vllm_serve role's contract).
options:
  python:
    description: The interpreter the load runs in, with the C(openai) package (the vLLM venv's C(bin/python)).
    type: path
    required: true
  run_as:
    description:
      - The account the load runs as (its primary group and supplementary groups too), such as vllm_serve's service
        account; required when the module runs as root, whose load would run the venv's code as root.
      - Empty runs the load as the module's own user, which must not be root.
    type: str
    default: ""
  endpoints_file:
    description:
      - JSON list of endpoints written by the vllm_serve role (the C(endpoints_file) entry of its contract).
      - One of O(endpoints_file) and O(endpoints) is required.
    type: path
  endpoints:
    description: Endpoints to use instead of O(endpoints_file).
    type: list
    elements: dict
    suboptions:
      name:
        description: A name for the report.
        type: str
        required: true
      base_url:
        description: The server's address without C(/v1), such as C(http://127.0.0.1:8000).
        type: str
        required: true
      api_key_file:
        description: File on the host holding the API key; empty for a server without one.
        type: path
        default: ""
      ca_file:
        description:
          - For an C(https://) base URL, the certificate file the server's certificate must chain to (such as the
            vllm_gateway role's self-signed one); empty for the system's trust store.
        type: path
        default: ""
      tls_verify:
        description:
          - Check the server's certificate. The vllm_gateway role turns it off only for its loopback probe of an
            operator's certificate, whose names do not include 127.0.0.1.
        type: bool
        default: true
  concurrency:
    description: Concurrency levels, run in this order.
    type: list
    elements: int
    default: [8]
  requests:
    description: Requests per level; C(0) sends one per concurrency slot.
    type: int
    default: 0
  max_tokens:
    description: C(max_tokens) of every request.
    type: int
    default: 128
  prompts:
    description: User messages, used in turn.
    type: list
    elements: str
    required: true
  timeout:
    description: Seconds one request may take.
    type: float
    default: 600
author:
  - Arm Inference maintainers (@arm-inference)
notes:
  - Sends real requests; check mode skips it.
"""

EXAMPLES = r"""
- name: Eight concurrent chats against every local vLLM instance
  arm_inference.vllm.vllm_chat_load:
    endpoints_file: "{{ __serve.endpoints_file }}"
    concurrency: [8]
    prompts: ["Explain what a NUMA node is in two sentences."]
    python: "{{ __serve.python }}"
    run_as: "{{ __serve.user }}"
  vars:
    __serve: "{{ vllm_serve_contract | default(lookup('arm_inference.vllm.role_contract', 'vllm_serve')) }}"
  register: __load
"""

RETURN = r"""
results:
  description: One entry per endpoint.
  returned: always
  type: list
  elements: dict
  sample:
    - name: main
      base_url: http://127.0.0.1:8000
      model: tiny-llama
      levels:
        - concurrency: 8
          requests: 8
          ok: 8
          failed: 0
          errors: []
          output_tokens: 1024
          seconds: 2.913
          output_tokens_per_second: 351.5
          ttft_p50_ms: 120.4
          ttft_p90_ms: 190.2
          ttft_p99_ms: 191.0
          tpot_p50_ms: 20.1
          tpot_p90_ms: 21.8
          tpot_p99_ms: 22.0
          latency_p50_ms: 2700.3
          latency_p90_ms: 2900.8
          latency_p99_ms: 2912.5
"""

import inspect
import json
import os
import pwd
import subprocess

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_load, vllm_load_driver
from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_load import levels_to_run

# The load's environment: a path, and of the module's (root's) only what reaches a server (proxies, CA stores).
LOAD_ENVIRONMENT = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
PASSED_ENVIRONMENT = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "no_proxy",
                      "all_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR")


def load_seconds(request, endpoints):
    """The longest the load may take: each request of a level waits its turn for a slot and may take the request
    timeout, and each endpoint gets two untimed requests first (its model and the warm-up); a minute more."""
    turns = sum(-(-count // concurrency) for concurrency, count in request["levels"]) + 2
    return endpoints * turns * request["params"]["timeout"] + 60


def load_command(python, run_as):
    """The argv that runs the load in `python` as `run_as` (setpriv, util-linux: the real and effective user and
    group, and the account's supplementary groups); as the module's own user when `run_as` is empty."""
    command = [python, "-I", "-c", vllm_load_driver.BOOTSTRAP]
    if not run_as:
        return command
    account = pwd.getpwnam(run_as)
    return ["setpriv", "--reuid=%d" % account.pw_uid, "--regid=%d" % account.pw_gid, "--init-groups", "--"] + command


def run_load(module, request, command):
    """The load's answer ({"results", "error"}), or the module fails with what the load printed."""
    request = dict(request, sources={"vllm_load": inspect.getsource(vllm_load),
                                     "vllm_load_driver": inspect.getsource(vllm_load_driver)})
    environment = dict(LOAD_ENVIRONMENT, **dict((name, os.environ[name]) for name in PASSED_ENVIRONMENT
                                                if name in os.environ))
    seconds = load_seconds(request, len(request["endpoints"]))
    try:
        # Not module.run_command: the load needs a deadline and an environment of its own (nothing of root's but the
        # proxies and CA stores), which run_command does not give.
        done = subprocess.run(  # pylint: disable=ansible-bad-function
            command, input=json.dumps(request), capture_output=True, text=True, check=False, env=environment, cwd="/",
            timeout=seconds)
    except OSError as error:
        module.fail_json(msg="cannot start the load (%s): %s" % (command[0], error))
    except subprocess.TimeoutExpired:
        module.fail_json(msg="the load in %s took longer than %d s, the most its requests' timeout allows; stopped"
                         % (module.params["python"], seconds))
    lines = done.stdout.strip().splitlines()
    try:
        answer = json.loads(lines[-1]) if done.returncode == 0 and lines else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not isinstance(answer.get("results"), list):
        module.fail_json(msg="the load in %s exited %d without an answer: %s"
                         % (module.params["python"], done.returncode, " ".join(done.stderr.split()[-60:])))
    return answer


def _endpoints(module):
    if module.params["endpoints"]:
        return module.params["endpoints"]
    path = module.params["endpoints_file"]
    try:
        with open(path, encoding="utf-8") as handle:
            endpoints = json.load(handle)
    except (OSError, ValueError) as error:
        module.fail_json(msg="cannot read the endpoints file %s (written by the vllm_serve role): %s" % (path, error))
    if not isinstance(endpoints, list) or not all(isinstance(item, dict) and item.get("base_url") for item in endpoints):
        module.fail_json(msg="%s must hold a JSON list of objects with a base_url" % path)
    return endpoints


def _read(module, path, what, endpoint):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, ValueError) as error:
        module.fail_json(msg="cannot read the %s %s of endpoint %s: %s" % (what, path, endpoint.get("name"), error))
    return ""


def _load_endpoint(module, endpoint):
    """The endpoint as the load takes it: its key and CA certificates read here, in place of their files."""
    entry = {"name": endpoint.get("name"), "base_url": endpoint["base_url"], "tls_verify": endpoint.get("tls_verify", True)}
    if endpoint.get("api_key_file"):
        entry["api_key"] = _read(module, endpoint["api_key_file"], "API key file", endpoint).strip()
    if endpoint.get("ca_file"):
        entry["ca_pem"] = _read(module, endpoint["ca_file"], "CA file", endpoint)
    return entry


def main():
    module = AnsibleModule(
        argument_spec={
            "endpoints_file": {"type": "path"},
            "endpoints": {"type": "list", "elements": "dict", "options": {
                "name": {"type": "str", "required": True},
                "base_url": {"type": "str", "required": True},
                "api_key_file": {"type": "path", "default": ""},
                "ca_file": {"type": "path", "default": ""},
                "tls_verify": {"type": "bool", "default": True},
            }},
            "python": {"type": "path", "required": True},
            "run_as": {"type": "str", "default": ""},
            "concurrency": {"type": "list", "elements": "int", "default": [8]},
            "requests": {"type": "int", "default": 0},
            # A count of model tokens, not a credential.
            "max_tokens": {"type": "int", "default": 128, "no_log": False},
            "prompts": {"type": "list", "elements": "str", "required": True},
            "timeout": {"type": "float", "default": 600},
        },
        required_one_of=[("endpoints_file", "endpoints")],
        supports_check_mode=True,
    )
    params = module.params
    if not params["prompts"] or params["max_tokens"] < 1 or params["requests"] < 0 or params["timeout"] <= 0:
        module.fail_json(msg="prompts must not be empty, max_tokens must be >= 1, requests >= 0 and timeout > 0")
    if not params["run_as"] and os.geteuid() == 0:
        module.fail_json(msg="run_as must name the account the load runs as: run as root, it would run the code of "
                             "%s (the build user's) as root; give vllm_serve's service account" % params["python"])
    try:
        levels = levels_to_run(params["concurrency"], params["requests"])
    except ValueError as error:
        module.fail_json(msg=str(error))
    try:
        command = load_command(params["python"], params["run_as"])
    except KeyError:
        module.fail_json(msg="run_as: the account %s does not exist on the host" % params["run_as"])
    endpoints = _endpoints(module)
    if module.check_mode:
        module.exit_json(changed=False, results=[])
    request = {"endpoints": [_load_endpoint(module, endpoint) for endpoint in endpoints], "levels": levels,
               "params": dict((key, params[key]) for key in ("prompts", "max_tokens", "timeout"))}
    answer = run_load(module, request, command)
    if answer.get("error"):
        module.fail_json(msg=answer["error"], results=answer["results"])
    module.exit_json(changed=False, results=answer["results"])


if __name__ == "__main__":
    main()
