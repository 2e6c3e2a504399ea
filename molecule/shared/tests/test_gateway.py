"""Verify the gateway (engine scenario, Debian 12 amd64): HAProxy from Debian's packages in front of two
real vLLM instances on 127.0.0.1 (molecule/engine/host_vars), reached the way a client reaches it.

The client runs inside the container with the vLLM venv's official `openai` package over TLS,
verified against the self-signed certificate the role made; it reads the inventory's key
(inventories/local) from a root-only file podman copies in, so the key never travels on a command
line (the host itself holds only the key's digest). Figures are printed, not asserted.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import uuid

import pytest
import yaml

import test_site
from serve_checks import only_in_scenario, run_playbook, write_report

testinfra_hosts = test_site.testinfra_hosts

pytestmark = only_in_scenario("engine", "only the engine scenario runs the real vLLM behind the gateway")

PYTHON = "/opt/vllm/current/venv/bin/python"
INSTANCES = ("main", "second")
CERTIFICATE = "/etc/haproxy/vllm-gateway/self-signed.crt"
# The inventory's key for the client, on the host only while these tests run (/var/tmp: outside what they search).
CLIENT_KEY = "/var/tmp/gateway-client.key"
CLIENT = r"""
import asyncio, json, sys
import httpx, openai

key = open(sys.argv[3]).read().strip()
base = "https://127.0.0.1:8443/v1"
marker = sys.argv[1]
result = {}
client = openai.OpenAI(base_url=base, api_key=key, http_client=httpx.Client(verify=sys.argv[2]))
result["models"] = [model.id for model in client.models.list().data]
chunks = client.chat.completions.create(model="tiny-llama", max_tokens=16, stream=True,
                                        messages=[{"role": "user", "content": "Stream to me"}])
result["stream_chunks"] = sum(1 for chunk in chunks if chunk.choices and chunk.choices[0].delta.content)
try:
    wrong = openai.OpenAI(base_url=base, api_key="wrong-key-" + marker, http_client=httpx.Client(verify=sys.argv[2]))
    wrong.with_options(max_retries=0).models.list(extra_query={"marker": marker})
    result["wrong_key"] = "accepted"
except openai.AuthenticationError as error:
    result["wrong_key"] = error.status_code


async def batch():
    aclient = openai.AsyncOpenAI(base_url=base, api_key=key, http_client=httpx.AsyncClient(verify=sys.argv[2]))
    async def one(index):
        return await aclient.completions.create(model="tiny-llama", prompt="Request %d: the fox" % index,
                                                max_tokens=48, temperature=0.8, seed=index)
    return await asyncio.gather(*(one(index) for index in range(8)))

answers = asyncio.run(batch())
result["batch_ok"] = sum(1 for answer in answers if answer.choices[0].text is not None)
with httpx.Client(verify=sys.argv[2]) as plain:
    result["status"] = {path: plain.get("https://127.0.0.1:8443" + path, headers={"Authorization": "Bearer " + key}).status_code
                        for path in ("/tokenize", "/metrics", "/docs", "/openapi.json", "/version", "/health")}
print(json.dumps(result))
"""


def _requests_served(host, name):
    """vLLM's own counter of finished requests, read through the gateway's metrics listener."""
    text = host.check_output("%s -c \"import urllib.request; print(urllib.request.urlopen("
                             "'http://127.0.0.1:9180/instances/%s/metrics').read().decode())\"" % (PYTHON, name))
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("vllm:request_success_total"))


def inventory_keys():
    """The scenario's client keys, as the inventory lists them (molecule.yml links inventories/local/group_vars)."""
    path = os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "inventories", "local", "group_vars", "all", "main.yml")
    with open(path, encoding="utf-8") as variables:
        return {entry["name"]: entry["key"] for entry in yaml.safe_load(variables)["vllm_gateway_api_keys"]}


@pytest.fixture(scope="module")
def client_key(host, tmp_path_factory):
    """CLIENT_KEY on the host, copied by podman from a root-only file: the key is on no command line."""
    key_file = tmp_path_factory.mktemp("client") / "gateway-client.key"
    key_file.touch(mode=0o600)
    key_file.write_text(inventory_keys()["local"] + "\n")
    subprocess.run(["podman", "cp", str(key_file), "%s:%s" % (host.backend.name, CLIENT_KEY)], check=True)
    yield CLIENT_KEY
    host.run("rm -f %s" % CLIENT_KEY)


@pytest.fixture(scope="module")
def gateway_result(host, client_key):
    before = {name: _requests_served(host, name) for name in INSTANCES}
    marker = uuid.uuid4().hex
    output = host.check_output("%s - %s %s %s <<'EOF'\n%sEOF" % (PYTHON, marker, CERTIFICATE, client_key, CLIENT))
    result = json.loads(output.strip().splitlines()[-1])
    result["marker"] = marker
    result["served"] = {name: _requests_served(host, name) - before[name] for name in INSTANCES}
    write_report("engine-gateway", result)
    return result


def test_openai_client_over_verified_tls_streams_and_runs_eight_concurrent(gateway_result):
    assert gateway_result["models"] == ["tiny-llama"]
    assert gateway_result["stream_chunks"] > 1
    assert gateway_result["batch_ok"] == 8


def test_both_instances_receive_requests(gateway_result):
    assert all(count >= 1 for count in gateway_result["served"].values()), gateway_result["served"]


def test_private_routes_are_refused_on_the_public_listener(gateway_result):
    status = gateway_result["status"]
    assert status.pop("/health") == 200
    assert set(status.values()) == {404}, status


def test_a_wrong_key_gets_401_from_the_gateway_without_reaching_vllm(host, gateway_result):
    assert gateway_result["wrong_key"] == 401
    marker = gateway_result["marker"]
    gateway_log = host.check_output("journalctl --no-pager -u haproxy.service")
    assert marker in gateway_log and " 401 " in gateway_log.split(marker)[0].rsplit("\n", 1)[-1] + " 401 "
    for name in INSTANCES:
        assert marker not in host.check_output("journalctl --no-pager -u vllm-serve-%s.service" % name), name


def test_the_host_holds_digests_of_the_client_keys_never_the_keys(host, gateway_result, client_key):
    """prepare.yml left the raw keys in the key map, as earlier versions wrote it; converge replaced them."""
    assert gateway_result["batch_ok"] == 8  # the key opened the door
    probe = host.check_output("cat /etc/haproxy/vllm-gateway/probe.key").strip()
    # Made by vllm_serve_api_key: root's alone from its creation, whatever the umask.
    assert host.check_output("stat -c '%U:%G %a' /etc/haproxy/vllm-gateway/probe.key") == "root:root 600"
    expected = sorted("%s %s" % (hashlib.sha256(key.encode()).hexdigest(), name)
                      for name, key in dict(inventory_keys(), **{"arm-inference-probe": probe}).items())
    assert sorted(host.check_output("cat /etc/haproxy/vllm-gateway/clients.map").splitlines()) == expected
    search = "grep -rlF -f %s %%s" % client_key
    assert host.check_output(search % client_key) == client_key  # the search finds the key where it is
    found = host.run(search % "/etc /root /var/lib/haproxy")
    assert found.rc == 1 and found.stdout == "", found.stdout


def test_no_key_in_the_gateway_log_or_processes(host, gateway_result):
    assert gateway_result["batch_ok"] == 8  # the keys were in use
    keys = list(inventory_keys().values()) + [host.check_output("cat /etc/haproxy/vllm-gateway/probe.key").strip()]
    keys.append(host.check_output("cat /etc/vllm-serve/api_key").strip())
    texts = host.check_output("journalctl --no-pager -u haproxy.service; systemctl show haproxy.service; "
                              "cat /proc/[0-9]*/cmdline /proc/[0-9]*/environ 2>/dev/null | tr '\\0' ' '; true")
    assert "key=local" in texts  # the log names the key it counted
    for key in keys:
        assert key not in texts
    assert host.check_output("stat -c '%a %U' /etc/haproxy/vllm-gateway/clients.map /etc/haproxy/vllm-gateway/gateway.pem "
                             "/etc/haproxy/vllm-gateway/upstream.map").split("\n") == ["600 root"] * 3


def test_the_metrics_listener_refuses_other_networks(host):
    # From the controller, through podman's bridge: not in vllm_gateway_metrics_allow (127.0.0.0/8).
    address = host.check_output("hostname -I").split()[0]
    import http.client
    import urllib.error
    import urllib.request
    # Closed at connection time, before HAProxy reads the request: no HTTP answer at all.
    with pytest.raises((urllib.error.URLError, http.client.RemoteDisconnected, ConnectionError)) as refused:
        urllib.request.urlopen("http://%s:9180/instances/main/metrics" % address, timeout=10)
    assert not isinstance(refused.value, urllib.error.HTTPError), refused.value


def test_tls_below_1_2_is_refused(host):
    run = host.run("%s -c \"import ssl, socket; c = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT); c.check_hostname = False; "
                   "c.verify_mode = ssl.CERT_NONE; c.minimum_version = c.maximum_version = ssl.TLSVersion.TLSv1_1; "
                   "c.wrap_socket(socket.create_connection(('127.0.0.1', 8443)))\"" % PYTHON)
    assert run.rc != 0 and "SSL" in run.stderr, run.stderr


def test_the_sandboxed_unit_scores_and_is_in_force(host):
    analysis = host.check_output("systemd-analyze security haproxy.service --no-pager")
    score = float(re.search(r"Overall exposure level for haproxy.service: ([0-9.]+)", analysis).group(1))
    print("haproxy.service exposure score:", score)
    write_report("engine-gateway-exposure", {"haproxy.service": score})
    assert score <= 4.0, analysis
    main_pid = int(host.check_output("systemctl show -P MainPID haproxy.service"))
    assert "NoNewPrivs:\t1" in host.check_output("cat /proc/%d/status" % main_pid)


def test_file_sd_targets_list_every_instance(host):  # pylint: disable=unused-argument
    # `host` keeps this test in file order, before the gateway is turned off at the end.
    path = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "inventory", "vllm-metrics-targets.json")
    groups = json.load(open(path, encoding="utf-8"))
    assert sorted(group["labels"]["vllm_instance"] for group in groups) == sorted(INSTANCES)
    for group in groups:
        assert group["labels"]["__metrics_path__"] == "/instances/%s/metrics" % group["labels"]["vllm_instance"]
        assert group["labels"]["model"] == "tiny-llama" and group["labels"]["hardware_class"].startswith("x86_64")
        assert group["targets"][0].endswith(":9180")


def test_a_reload_keeps_the_master_and_the_gateway_healthy(host):
    # What the role does when haproxy.cfg or a map changes (a key rotation): the unit's own reload.
    before = host.check_output("systemctl show -P MainPID haproxy.service")
    reload = host.run("systemctl reload haproxy.service")
    assert reload.rc == 0, reload.stderr + host.run("journalctl --no-pager -n 20 -u haproxy.service").stdout
    assert host.check_output("systemctl show -P MainPID haproxy.service") == before
    # The new worker checks the instances again: /health may answer 503 for a moment.
    health = host.check_output("%s - <<'EOF'\nimport ssl, time, urllib.error, urllib.request\nstatus = None\n"
                               "for attempt in range(30):\n    try:\n        status = urllib.request.urlopen("
                               "'https://127.0.0.1:8443/health', context=ssl.create_default_context(cafile='%s'))"
                               ".status\n        break\n    except urllib.error.HTTPError as error:\n"
                               "        status = error.code\n        time.sleep(0.5)\nprint(status)\nEOF"
                               % (PYTHON, CERTIFICATE))
    assert health.strip() == "200"


# A second run changing nothing (the gateway's master and haproxy.cfg untouched) is the scenario's molecule
# idempotence step: site.yml, of which serve.yml's roles are a part, re-run with changed=0.


def test_turning_the_gateway_off_stops_it_and_removes_its_keys(host):
    """Last: serve.yml with vllm_gateway_enabled=false leaves no door open with the old keys."""
    returncode, output = run_playbook("arm_inference.vllm.serve", "vllm_gateway_enabled=false")
    assert returncode == 0, output[-3000:]
    assert host.run("systemctl is-active haproxy.service").stdout.strip() == "inactive"
    assert not host.file("/etc/haproxy/vllm-gateway").exists
    assert not host.file("/etc/systemd/system/haproxy.service.d/arm-inference-hardening.conf").exists
    path = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "inventory", "vllm-metrics-targets.json")
    assert json.load(open(path, encoding="utf-8")) == []
    # The instances still serve, on 127.0.0.1 only.
    assert host.run("%s -c \"import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/health')\"" % PYTHON).rc == 0
