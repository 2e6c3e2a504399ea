# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The chat load of vllm_chat_load, run apart from the module: in the vLLM venv's Python (which has the official
openai client) as an unprivileged account, never as root. The venv is the build user's, who runs pip for every
dependency: its interpreter, the openai package and any .pth file there would run that user's code as root.

vllm_chat_load (as root, in the host's own Python) reads the endpoints, their API keys and CA files, then starts
`<venv python> -I -c BOOTSTRAP` as the account and writes one JSON request to its standard input: the sources of
this file and of vllm_load.py, the endpoints with their keys, the load. The answer is one JSON line on standard
output: {"results": [...], "error": null or a message}. Nothing here imports anything but the standard library
and, inside run(), asyncio and openai; vllm_load's functions come in as `load`.
"""

from __future__ import annotations

import ssl
import sys
import time

# What the account's Python runs: builds the two modules from the request's sources, runs the load, answers.
BOOTSTRAP = r"""
import json, sys, types
request = json.loads(sys.stdin.read())
modules = {}
for name in ("vllm_load", "vllm_load_driver"):
    modules[name] = types.ModuleType(name)
    exec(compile(request["sources"][name], name + ".py", "exec"), modules[name].__dict__)
answer = modules["vllm_load_driver"].run(request, modules["vllm_load"])
sys.stdout.write("\n" + json.dumps(answer) + "\n")
"""


def error_text(error):
    status = getattr(error, "status_code", None)
    text = "%s%s: %s" % (type(error).__name__, " %s" % status if status else "", error)
    return text[:300]


async def _one_chat(load, client, model, prompt, max_tokens):
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
        return load.request_record(started, None, None, 0, error_text(error))
    return load.request_record(started, first_token, time.monotonic(),
                               usage_tokens if usage_tokens is not None else chunks)


async def _level(asyncio, load, client, model, params, concurrency, count):
    gate = asyncio.Semaphore(concurrency)
    prompts = params["prompts"]

    async def gated(index):
        async with gate:
            return await _one_chat(load, client, model, prompts[index % len(prompts)], params["max_tokens"])

    started = time.monotonic()
    records = await asyncio.gather(*(gated(index) for index in range(count)))
    return load.summarize(concurrency, list(records), time.monotonic() - started)


async def _endpoint(asyncio, openai, load, endpoint, params, levels):
    if not endpoint.get("tls_verify", True):
        verify = False
    elif endpoint.get("ca_pem"):
        verify = ssl.create_default_context(cadata=endpoint["ca_pem"])
    else:
        verify = ssl.create_default_context()
    client = openai.AsyncOpenAI(base_url=endpoint["base_url"].rstrip("/") + "/v1", api_key=endpoint.get("api_key") or "EMPTY",
                                timeout=params["timeout"], max_retries=0,
                                http_client=openai.DefaultAsyncHttpxClient(verify=verify))
    try:
        models = await client.models.list()
        model = models.data[0].id
        await client.chat.completions.create(model=model, messages=[{"role": "user", "content": params["prompts"][0]}],
                                             max_tokens=8)
        results = []
        for concurrency, count in levels:
            results.append(await _level(asyncio, load, client, model, params, concurrency, count))
        return {"name": endpoint["name"], "base_url": endpoint["base_url"], "model": model, "levels": results}
    finally:
        await client.close()


def run(request, load):
    """The load of `request` ({"endpoints", "params", "levels"}) on every endpoint in turn."""
    import asyncio  # pylint: disable=import-outside-toplevel

    try:
        import openai  # pylint: disable=import-outside-toplevel
    except ImportError as error:
        return {"results": [], "error": "the openai package is missing in %s (%s); give the vLLM venv's interpreter, "
                                        "which has it" % (sys.executable, error)}
    results = []
    for endpoint in request["endpoints"]:
        try:
            results.append(asyncio.run(_endpoint(asyncio, openai, load, endpoint, request["params"], request["levels"])))
        except Exception as error:  # pylint: disable=broad-exception-caught
            return {"results": results, "error": "endpoint %s (%s) did not answer: %s"
                                                 % (endpoint.get("name"), endpoint["base_url"], error_text(error))}
    return {"results": results, "error": None}
