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
requirements:
  - The C(openai) Python package in the interpreter that runs the module. vLLM depends on it, so run the module
    with the vLLM venv's interpreter (the C(python) entry of the vllm_serve role's contract).
options:
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
  vars:
    __serve: "{{ vllm_serve_contract | default(lookup('arm_inference.vllm.role_contract', 'vllm_serve')) }}"
    ansible_python_interpreter: "{{ __serve.python }}"
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

import json
import ssl
import time
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_load import (
    levels_to_run,
    request_record,
    summarize,
)

try:
    import asyncio

    import openai

    HAS_OPENAI = True
    OPENAI_IMPORT_ERROR = None
except ImportError:
    HAS_OPENAI = False
    OPENAI_IMPORT_ERROR = traceback.format_exc()


def _error_text(error):
    status = getattr(error, "status_code", None)
    text = "%s%s: %s" % (type(error).__name__, " %s" % status if status else "", error)
    return text[:300]


async def _one_chat(client, model, prompt, max_tokens):
    started = time.monotonic()
    first_token = None
    chunks = 0
    usage_tokens = None
    try:
        stream = await client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": prompt}], max_tokens=max_tokens, stream=True,
            stream_options={"include_usage": True})
        async for chunk in stream:
            if chunk.usage is not None:
                usage_tokens = chunk.usage.completion_tokens
            for choice in chunk.choices:
                if choice.delta and choice.delta.content:
                    chunks += 1
                    if first_token is None:
                        first_token = time.monotonic()
    except Exception as error:  # pylint: disable=broad-exception-caught
        # Any failure of one request is a figure of the run, not the end of it.
        return request_record(started, None, None, 0, _error_text(error))
    return request_record(started, first_token, time.monotonic(), usage_tokens if usage_tokens is not None else chunks)


async def _level(client, model, prompts, concurrency, count, max_tokens):
    gate = asyncio.Semaphore(concurrency)

    async def gated(index):
        async with gate:
            return await _one_chat(client, model, prompts[index % len(prompts)], max_tokens)

    started = time.monotonic()
    records = await asyncio.gather(*(gated(index) for index in range(count)))
    return summarize(concurrency, list(records), time.monotonic() - started)


async def _endpoint(endpoint, key, params, levels):
    verify = ssl.create_default_context(cafile=endpoint.get("ca_file") or None) if endpoint.get("tls_verify", True) \
        else False
    client = openai.AsyncOpenAI(base_url=endpoint["base_url"].rstrip("/") + "/v1", api_key=key or "EMPTY",
                                timeout=params["timeout"], max_retries=0,
                                http_client=openai.DefaultAsyncHttpxClient(verify=verify))
    try:
        models = await client.models.list()
        model = models.data[0].id
        await client.chat.completions.create(model=model, messages=[{"role": "user", "content": params["prompts"][0]}],
                                             max_tokens=8)
        results = []
        for concurrency, count in levels:
            results.append(await _level(client, model, params["prompts"], concurrency, count, params["max_tokens"]))
        return {"name": endpoint["name"], "base_url": endpoint["base_url"], "model": model, "levels": results}
    finally:
        await client.close()


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


def _key(module, endpoint):
    path = endpoint.get("api_key_file") or ""
    if not path:
        return ""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError as error:
        module.fail_json(msg="cannot read the API key file %s of endpoint %s: %s" % (path, endpoint.get("name"), error))
    return ""


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
    if not HAS_OPENAI:
        module.fail_json(msg=missing_required_lib("openai", reason="run the module with the vLLM venv's interpreter"),
                         exception=OPENAI_IMPORT_ERROR)
    params = module.params
    if not params["prompts"] or params["max_tokens"] < 1 or params["requests"] < 0 or params["timeout"] <= 0:
        module.fail_json(msg="prompts must not be empty, max_tokens must be >= 1, requests >= 0 and timeout > 0")
    try:
        levels = levels_to_run(params["concurrency"], params["requests"])
    except ValueError as error:
        module.fail_json(msg=str(error))
    endpoints = _endpoints(module)
    if module.check_mode:
        module.exit_json(changed=False, results=[])
    results = []
    for endpoint in endpoints:
        key = _key(module, endpoint)
        try:
            results.append(asyncio.run(_endpoint(endpoint, key, params, levels)))
        except Exception as error:  # pylint: disable=broad-exception-caught
            message = "endpoint %s (%s) did not answer: %s" % (endpoint.get("name"), endpoint["base_url"], _error_text(error))
            module.fail_json(msg=message, results=results)
    module.exit_json(changed=False, results=results)


if __name__ == "__main__":
    main()
