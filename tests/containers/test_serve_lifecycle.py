"""vllm_serve lifecycle on a native systemd container, serving a vllm_build release of the fixture vLLM
tree (tests/fixtures/vllm_source/README.md says what it stands in for): two instances, a config change
restarts only its instance, a re-run changes nothing, a removed instance is stopped and deleted; serve.yml
refuses a privileged port in preflight and puts back what served when a change fails at start; site.yml puts back
the release and the model revision that served when a new one fails at start, and only the release link when a model
fails to be placed (no restart); an instance that cannot start fails the play at once with its journal's decisive
line; the class's autotune result is applied where the inventory leaves a setting empty, and said."""

from __future__ import annotations

import hashlib
import json
import os
import re

import pytest

from harness import BUILD_SETUP, REPO_ROOT, podman, prepared_host
from stand_ins.tiny_model import write_tiny_model

SERVE = {
    "vllm_serve_model": "arm-inference/test-model",
    "vllm_serve_preload_tcmalloc": False,
    "vllm_serve_api_key": "integration-only-key-5e0c",
    # Two instances share the container's 2 CPUs: one each, none reserved.
    "vllm_serve_reserved_cpus_per_rank": 0,
    "vllm_serve_restart_sec": 1,
    # The fixture's model is a hub id nothing places, so nothing weighs it: its size is stated.
    "vllm_serve_instances": [{"name": "alpha", "model_weights_gib": 0.1}, {"name": "beta", "model_weights_gib": 0.1}],
}
# The computed layout shares the host among the instances, so removing one re-tunes the others; with
# their CPUs and KV cache pinned, alpha's settings do not depend on beta.
ALPHA = {"name": "alpha", "omp_threads_bind": "0", "cpu_affinity": "0", "kv_cache_gib": 1, "model_weights_gib": 0.1}
BETA = {"name": "beta", "omp_threads_bind": "1", "cpu_affinity": "1", "kv_cache_gib": 1, "model_weights_gib": 0.1}


@pytest.fixture(scope="module")
def host(prepared_image):
    # The kernel's default floor for unprivileged ports, whatever podman's default for containers is.
    container = prepared_host(prepared_image, options=("--sysctl", "net.ipv4.ip_unprivileged_port_start=1024"))
    yield container
    container.remove()


def _run(host, tmp_path, playbook, variables, options=()):
    result = host.playbook(tmp_path, playbook, variables, options=options)
    return result, result.stdout + result.stderr


def _pids(host):
    return {name: host.exec("systemctl show -P MainPID vllm-serve-%s" % name).stdout.strip()
            for name in ("alpha", "beta")}


def test_instances_restart_alone_rerun_is_idle_and_removal_cleans_up(host, tmp_path):
    result, output = _run(host, tmp_path, str(REPO_ROOT / "playbooks" / "build.yml"), BUILD_SETUP)
    assert result.returncode == 0, output[-3000:]

    result, output = _run(host, tmp_path, "arm_inference.vllm.vllm_serve", SERVE)
    assert result.returncode == 0, output[-3000:]
    first = _pids(host)
    assert all(pid not in ("", "0") for pid in first.values()), first
    affinities = [host.exec("systemctl show -P CPUAffinity vllm-serve-%s" % name).stdout.strip()
                  for name in ("alpha", "beta")]
    assert affinities == ["0", "1"]
    ports = [host.exec("grep -o -- '--port [0-9]*' /etc/systemd/system/vllm-serve-%s.service" % name).stdout.strip()
             for name in ("alpha", "beta")]
    assert ports == ["--port 8000", "--port 8001"]

    pinned = dict(SERVE, vllm_serve_instances=[ALPHA, BETA])
    result, output = _run(host, tmp_path, "arm_inference.vllm.vllm_serve", pinned)
    assert result.returncode == 0, output[-3000:]
    first = _pids(host)

    # beta's change brings a token in its environment: the verbose run shows it nowhere (the units it prints and
    # loops over hold the variables' names only), and beta's root-only environment file holds it.
    token = "hf_integration_only_%s" % os.urandom(6).hex()
    changed = dict(SERVE, vllm_serve_instances=[ALPHA, dict(BETA, max_num_seqs=8, environment={"HF_TOKEN": token})])
    result, output = _run(host, tmp_path, "arm_inference.vllm.vllm_serve", changed, options=("-v",))
    assert result.returncode == 0, output[-3000:]
    assert token not in output and "HF_TOKEN" in output
    assert host.exec("grep -c '^HF_TOKEN=\"%s\"$' /etc/vllm-serve/beta.env" % token).stdout.strip() == "1"
    second = _pids(host)
    assert second["alpha"] == first["alpha"] and second["beta"] != first["beta"]

    result, output = _run(host, tmp_path, "arm_inference.vllm.vllm_serve", changed)
    assert result.returncode == 0 and "changed=0" in output, output[-3000:]
    assert _pids(host) == second

    only_alpha = dict(SERVE, vllm_serve_instances=[ALPHA])
    result, output = _run(host, tmp_path, "arm_inference.vllm.vllm_serve", only_alpha)
    assert result.returncode == 0, output[-3000:]
    assert host.exec("systemctl show -P MainPID vllm-serve-alpha").stdout.strip() == first["alpha"]
    assert host.exec("systemctl show -P LoadState vllm-serve-beta").stdout.strip() == "not-found"
    assert host.exec("ls /etc/systemd/system/vllm-serve-beta.service /etc/vllm-serve/beta.env").returncode != 0
    assert SERVE["vllm_serve_api_key"] not in output


# A .pth file in a venv's site-packages runs with every start of that venv's Python, -I or not: what the build user
# (who owns both venvs, and runs pip for every dependency) puts there must never run as root.
PLANT_PTH = ("set -e; for venv in /opt/vllm/venv /opt/vllm/current/venv; do site=$(echo $venv/lib/python3*/site-packages); "
             "echo \"import os; open('/tmp/pth-ran-%d' % os.getuid(), 'a').close()\" > $site/zz-probe.pth; "
             "chown vllm: $site/zz-probe.pth; done; rm -f /tmp/pth-ran-*")


def test_root_never_runs_the_build_user_s_venvs_and_keeps_the_release_root(host, tmp_path):
    assert host.exec(PLANT_PTH).returncode == 0
    try:
        for role in ("arm_inference.vllm.python_venv", str(REPO_ROOT / "playbooks" / "build.yml")):
            result, output = _run(host, tmp_path, role, BUILD_SETUP)
            assert result.returncode == 0 and "changed=0" in output, output[-3000:]
        result, output = _run(host, tmp_path, "arm_inference.vllm.vllm_serve", dict(SERVE, vllm_serve_instances=[ALPHA]))
        assert result.returncode == 0 and "changed=0" in output, output[-3000:]
        vllm_uid = host.exec("id -u vllm").stdout.strip()
        ran = host.exec("ls /tmp").stdout.split()
        # python_venv asked its venv as the venv user (the .pth file is live), vllm_serve read the release's metadata.
        assert "pth-ran-%s" % vllm_uid in ran and "pth-ran-0" not in ran, ran
    finally:
        host.exec("rm -f /opt/vllm/venv/lib/python3*/site-packages/zz-probe.pth "
                  "/opt/vllm/current/venv/lib/python3*/site-packages/zz-probe.pth /tmp/pth-ran-*")
    # Root keeps the release link and its history in the root; the build user owns only what it writes below it.
    owners = host.exec("stat -c '%U %a %n' /opt/vllm /opt/vllm/releases /opt/vllm/venv").stdout.split("\n")
    assert owners[:3] == ["root 755 /opt/vllm", "vllm 755 /opt/vllm/releases", "vllm 755 /opt/vllm/venv"], owners


SERVE_YML = str(REPO_ROOT / "playbooks" / "serve.yml")
# serve.yml as an operator runs it for a change of alpha alone (tcmalloc, vllm_model and the gateway run too;
# this host has no gateway).
ALPHA_ONLY = dict(SERVE, vllm_serve_instances=[ALPHA], vllm_gateway_enabled=False)
SERVED = "systemctl show -P MainPID vllm-serve-alpha; md5sum /etc/systemd/system/vllm-serve-alpha.service /etc/vllm-serve/*"


def _seconds_since(host, line):
    """Seconds from the first journal line of vllm-serve-alpha containing `line` to now (the host's clock)."""
    journal = host.exec("journalctl --no-pager --output=short-unix --unit vllm-serve-alpha.service; date +%s.%N")
    stamps = [float(entry.split()[0]) for entry in journal.stdout.splitlines() if line in entry]
    return float(journal.stdout.split()[-1]) - stamps[0]


def test_serve_yml_refuses_what_cannot_work_and_puts_back_what_served(host, tmp_path):
    """serve.yml: a privileged port stops in preflight with nothing changed; an argument the server rejects
    restarts alpha, fails at its first exit naming argparse's line, and alpha's configuration before the run
    serves again; a host that served nothing before such a run is told there is nothing to restore."""
    assert host.exec("systemctl is-active vllm-serve-alpha").stdout.strip() == "active"
    assert host.exec("cat /proc/sys/net/ipv4/ip_unprivileged_port_start").stdout.strip() == "1024"
    before = host.exec(SERVED).stdout

    result, output = _run(host, tmp_path, SERVE_YML, dict(ALPHA_ONLY, vllm_serve_port=80))
    assert result.returncode != 0
    assert "vllm_serve_port: is below the host's net.ipv4.ip_unprivileged_port_start (1024)" in output, output[-3000:]
    assert "PLAY [Serve vLLM]" not in output and host.exec(SERVED).stdout == before

    rejected = dict(ALPHA_ONLY, vllm_serve_extra_args=["--seed", "abc"])
    result, output = _run(host, tmp_path, SERVE_YML, rejected)
    assert result.returncode != 0
    # The wait stopped at the server's first exit, not at the health timeout (900 s) or the start limit.
    assert _seconds_since(host, "invalid int value: 'abc'") < 120
    # Between two polls systemd may have restarted it up to its start limit (RestartSec=1 here): either way.
    assert re.search(r"vllm-serve-alpha\.service \(http://127\.0\.0\.1:8000/health\): (its process exited with status 2 "
                     r"while starting|systemd gave up on it \(result exit-code; its process exited with status 2)",
                     output), output[-3000:]
    assert "decisive journal line: api_server.py: error: argument --seed: invalid int value: 'abc'" in output, \
        output[-3000:]
    assert "Restored what served before this run, and it answers /health again: the instances " \
        "vllm-serve-alpha.service" in output, output[-3000:]
    after = host.exec(SERVED).stdout
    assert after.split("\n", 1)[1] == before.split("\n", 1)[1] and after.split()[0] not in ("", "0")
    assert host.exec("python3 -c 'import urllib.request; urllib.request.urlopen(\"http://127.0.0.1:8000/health\")'"
                     ).returncode == 0
    assert SERVE["vllm_serve_api_key"] not in output

    # A host that served nothing before the run.
    assert host.exec("systemctl stop vllm-serve-alpha && rm /etc/systemd/system/vllm-serve-alpha.service && "
                     "systemctl daemon-reload").returncode == 0
    result, output = _run(host, tmp_path, SERVE_YML, rejected)
    assert result.returncode != 0
    assert "Nothing served on it before this run (no vllm_serve unit), so there is nothing to restore." in output, \
        output[-3000:]
    assert "invalid int value: 'abc'" in output


def test_an_instance_that_never_gets_healthy_fails_with_its_journal(host, tmp_path):
    # An empty key file: the launcher refuses to serve unauthenticated, so /health never answers.
    assert host.exec("install -m 0600 /dev/null /etc/vllm-serve-empty-key").returncode == 0
    broken = dict(SERVE, vllm_serve_api_key="", vllm_serve_api_key_file="/etc/vllm-serve-empty-key",
                  vllm_serve_instances=[{"name": "alpha", "model_weights_gib": 0.1}], vllm_serve_health_timeout=5)
    result, output = _run(host, tmp_path, "arm_inference.vllm.vllm_serve", broken)
    assert result.returncode != 0
    # The launcher exits at once: the wait stops there, with its refusal as the decisive line.
    assert "vllm_serve: not every instance can serve: vllm-serve-alpha.service" in output, output[-3000:]
    assert "decisive journal line: vllm-serve-launch: an API key is configured" in output, output[-3000:]
    assert "refusing to start unauthenticated" in output, output[-3000:]
    assert json.dumps(SERVE["vllm_serve_api_key"]) not in output


def test_a_model_the_service_user_cannot_read_is_named(host, tmp_path):
    assert host.exec("mkdir -p /srv/models/private && install -m 0600 /dev/null /srv/models/private/model.safetensors"
                     ).returncode == 0
    for model, words in (("/srv/models/private", "unreadable: /srv/models/private/model.safetensors"),
                         ("/srv/models/absent", "No such file or directory")):
        variables = dict(SERVE, vllm_serve_model=model, vllm_serve_instances=[ALPHA])
        result, output = _run(host, tmp_path, "arm_inference.vllm.vllm_serve", variables)
        assert result.returncode != 0
        assert "the model %s must exist and be readable by vllm-serve" % model in output, output[-3000:]
        assert words in output, output[-3000:]


SITE_YML = str(REPO_ROOT / "playbooks" / "site.yml")
# site.yml as it runs on a provisioned host, without the three roles that only prepare it (build_deps, tcmalloc,
# python_venv: the prepared image ran them): the preflight, keep, and the block whose rescue is recover.
SITE_TAGS = ("--tags", "vllm_build,vllm_model,vllm_serve")
LINKS = "readlink /opt/vllm/current /var/lib/vllm-models/tiny/current"


def _health(host):
    return host.exec("python3 -c 'import urllib.request; urllib.request.urlopen(\"http://127.0.0.1:8000/health\")'")


def test_site_yml_puts_back_the_release_and_the_model_revision_that_served(host, tmp_path):
    """site.yml: a new release (vllm_build) or a new model revision (vllm_model) whose server fails at start gets
    the release link, the model's current link and alpha's unit and environment that served back, serving; a model
    that cannot be placed after a new release was activated puts the release link back and restarts nothing."""
    release = host.exec("readlink /opt/vllm/current").stdout.strip()
    assert release.startswith("releases/v0.32."), release
    model = tmp_path / "models" / "tiny"
    write_tiny_model(str(model), seed=1)
    # alpha serves a model placed from the controller; the fixture server fails at start from any other release.
    served = dict(BUILD_SETUP, **ALPHA_ONLY)
    served.update(vllm_serve_model="tiny", vllm_model_models=[{"name": "tiny", "source": "controller://%s" % model}],
                  vllm_serve_instances=[{key: value for key, value in ALPHA.items() if key != "model_weights_gib"}],
                  vllm_serve_environment={"VLLM_FIXTURE_FAIL_UNLESS_RELEASE": release.split("/")[-1]})
    result = host.playbook(tmp_path, SITE_YML, served, options=SITE_TAGS)
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
    before, links = host.exec(SERVED).stdout, host.exec(LINKS).stdout
    assert _health(host).returncode == 0 and "releases/" in links and links.count("\n") == 2, links

    # One run that brings both a new release (the wheel this release was built from, installed as a release of its
    # own: no compile) and a new model revision: the server fails at start, and both links go back with the units.
    built = json.loads(host.exec("cat /opt/vllm/%s/release.json" % release).stdout)
    wheel = tmp_path / built["wheel"]
    podman("cp", "%s:/opt/vllm/builds/%s/dist/%s" % (host.name, built["identity"], built["wheel"]), str(wheel))
    new_release = dict(served, vllm_build_method="wheel", vllm_build_wheel=str(wheel))
    write_tiny_model(str(model), seed=2)
    result, output = _run_site(host, tmp_path, new_release)
    assert result.returncode != 0
    assert "decisive journal line: RuntimeError: fixture release vllm-0.32." in output, output[-3000:]
    revision = links.split()[1].split("/")[-1]
    assert re.search(r"Restored what served before this run, and it answers /health again: the instances "
                     r"vllm-serve-alpha\.service with their units and environment as before, on the release %s; put back "
                     r"as current the release %s \(this run had made vllm-0\.32\.\S+ current\); model tiny at revision %s "
                     r"\(this run had made [\w-]+ current\)\." % (
                         re.escape(release.split("/")[-1]), re.escape(release.split("/")[-1]), revision), output), \
        output[-3000:]
    _assert_serves_as(host, before, links)
    before = host.exec(SERVED).stdout  # alpha's new process, which the next run must leave alone

    # A model that cannot be placed, after the new release was activated: the release link goes back, alpha is not
    # restarted. Its directory exists (the preflight asks only that of a controller source) but a pin is wrong, which
    # only reading the files finds, in vllm_model.
    pins = dict((name, hashlib.sha256((model / name).read_bytes()).hexdigest()) for name in os.listdir(model))
    pins["config.json"] = "0" * 64
    result, output = _run_site(host, tmp_path, dict(new_release, vllm_model_models=[
        {"name": "tiny", "source": "controller://%s" % model, "sha256": pins}]))
    assert result.returncode != 0
    assert re.search(r"Nothing that serves was changed \(the run stopped before vllm_serve changed anything\), so no "
                     r"instance was restarted; put back as current the release %s \(this run had made vllm-0\.32\."
                     % re.escape(release.split("/")[-1]), output), output[-3000:]
    assert host.exec(SERVED).stdout == before and host.exec(LINKS).stdout == links
    assert SERVE["vllm_serve_api_key"] not in output


def _run_site(host, tmp_path, variables):
    result = host.playbook(tmp_path, SITE_YML, variables, options=SITE_TAGS)
    return result, result.stdout + result.stderr


def _assert_serves_as(host, before, links):
    """alpha runs again (a new process) with the unit, environment, release and model revision it had."""
    after = host.exec(SERVED).stdout
    assert after.split("\n", 1)[1] == before.split("\n", 1)[1] and after.split()[0] not in ("", "0", before.split()[0])
    assert host.exec(LINKS).stdout == links
    assert _health(host).returncode == 0


GENERATED_KEY = "/etc/vllm-serve/generated_api_key"
# alpha's /v1/models status, asked without a key or with the one in GENERATED_KEY (read on the host, not passed in).
MODELS_STATUS = ("python3 -c 'import sys, urllib.request, urllib.error\n"
                 "request = urllib.request.Request(\"http://127.0.0.1:8000/v1/models\")\n"
                 "if sys.argv[1:]: request.add_header(\"Authorization\", \"Bearer \" + open(sys.argv[1]).read().strip())\n"
                 "try: print(urllib.request.urlopen(request).status)\n"
                 "except urllib.error.HTTPError as error: print(error.code)' ")


def _run_and_read_made_key(host, tmp_path, role, variables, path):
    """Run role; the key it made at path (module vllm_serve_api_key) is a 0600 root file of 64 hex characters:
    (the run's output, the key)."""
    result, output = _run(host, tmp_path, role, variables)
    assert result.returncode == 0, output[-3000:]
    assert host.exec("stat -c '%U:%G %a' " + path).stdout.strip() == "root:root 600"
    key = host.exec("cat " + path).stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{64}", key), len(key)
    return output, key


def test_with_the_gateway_on_and_no_key_vllm_gets_a_root_only_key_of_its_own(host, tmp_path):
    """No key given and vllm_gateway_enabled: vllm_serve makes vLLM a key on the host (root-only), /v1 answers only
    with it, the endpoints file (what the gateway sends upstream, smoke.yml and the chat load read) names it, and
    no output shows it. Turning the gateway off keeps it required and changes nothing (the re-run is idle)."""
    generated = dict(SERVE, vllm_serve_api_key="", vllm_serve_instances=[ALPHA], vllm_gateway_enabled=True)
    output, key = _run_and_read_made_key(host, tmp_path, "arm_inference.vllm.vllm_serve", generated, GENERATED_KEY)
    assert host.exec("test -e /etc/vllm-serve/api_key").returncode != 0
    assert host.exec(MODELS_STATUS).stdout.strip() == "401"
    assert host.exec(MODELS_STATUS + GENERATED_KEY).stdout.strip() == "200"
    endpoints = json.loads(host.exec("cat /etc/vllm-serve/endpoints.json").stdout)
    assert [endpoint["api_key_file"] for endpoint in endpoints] == [GENERATED_KEY]
    assert "LoadCredential=api_key:" + GENERATED_KEY in host.exec("cat /etc/systemd/system/vllm-serve-alpha.service").stdout

    pid = host.exec("systemctl show -P MainPID vllm-serve-alpha").stdout.strip()
    result, rerun = _run(host, tmp_path, "arm_inference.vllm.vllm_serve", dict(generated, vllm_gateway_enabled=False))
    assert result.returncode == 0 and "changed=0" in rerun, rerun[-3000:]
    assert host.exec("systemctl show -P MainPID vllm-serve-alpha").stdout.strip() == pid
    assert host.exec("cat " + GENERATED_KEY).stdout.strip() == key
    assert host.exec(MODELS_STATUS).stdout.strip() == "401"
    assert key not in output + rerun


def test_the_preflight_counts_a_generated_key_the_host_keeps(host, tmp_path):
    """The gateway off, no key given, and the key vllm_serve generated above still on the host: the run would serve
    with it (api_key_plan keeps it), so the preflight lets a non-loopback bind through; with generation off it
    refuses, saying what to do. Only the preflight runs (its tag)."""
    assert host.exec("test -s " + GENERATED_KEY).returncode == 0
    open_bind = dict(SERVE, vllm_serve_api_key="", vllm_serve_instances=[ALPHA], vllm_gateway_enabled=False,
                     vllm_serve_host="0.0.0.0", vllm_serve_ip_address_allow=["any"])
    preflight = ("--tags", "vllm_serve_preflight")
    result = host.playbook(tmp_path, "arm_inference.vllm.vllm_serve", open_bind, options=preflight)
    assert result.returncode == 0, result.stdout[-3000:]
    result = host.playbook(tmp_path, "arm_inference.vllm.vllm_serve", dict(open_bind, vllm_serve_api_key_generate="never"),
                           options=preflight)
    assert result.returncode != 0
    assert "vllm_serve_host: is reachable from other machines, but no API key is configured (got '0.0.0.0'); set " \
        "vllm_serve_api_key (or vllm_serve_api_key_file), let the role generate one" in result.stdout, \
        result.stdout[-3000:]


PROBE_KEY = "/etc/haproxy/vllm-gateway/probe.key"


def test_the_gateway_makes_its_probe_key_root_only_once_and_shows_it_nowhere(host, tmp_path):
    """vllm_gateway (Debian's HAProxy) in front of alpha, which serves with the key vllm_serve generated above: the
    probe key is a 0600 root file from its creation (whatever the umask; `openssl rand -out` gave 0644 under root's
    022), its whole chain answers (the role's own check with the probe key), a re-run changes nothing and keeps the
    key, and no output shows it; nor the key of a pair on the host, joined into HAProxy's PEM there."""
    gateway = dict(SERVE, vllm_serve_api_key="", vllm_serve_instances=[ALPHA], vllm_gateway_enabled=True,
                   vllm_gateway_api_keys=[{"name": "ops", "key": "7c41f0d9a2b85e36c1d4f9087ab2e5c3"}],
                   # HAProxy asks for about two descriptors per connection: within the container's nofile (4096).
                   vllm_gateway_max_connections=1024)
    output, key = _run_and_read_made_key(host, tmp_path, "arm_inference.vllm.vllm_gateway", gateway, PROBE_KEY)

    result, rerun = _run(host, tmp_path, "arm_inference.vllm.vllm_gateway", gateway)
    assert result.returncode == 0 and "changed=0" in rerun, rerun[-3000:]
    assert host.exec("cat " + PROBE_KEY).stdout.strip() == key
    assert key not in output + rerun and "7c41f0d9a2b85e36c1d4f9087ab2e5c3" not in output + rerun

    # A changed client key is written with the gateway's other files in one module run (file_set): with --diff and
    # -v, the run shows what changed in the plain files and neither key, old or new; HAProxy reloads (its master
    # stays) and takes it.
    master = host.exec("systemctl show -P MainPID haproxy").stdout.strip()
    rotated = dict(gateway, vllm_gateway_api_keys=[{"name": "ops", "key": "d93e0b7a61c24f58a0e7b3c9d1f6a2e8"}])
    result = host.playbook(tmp_path, "arm_inference.vllm.vllm_gateway", rotated, options=("--diff", "-v"))
    shown = result.stdout + result.stderr
    # Two changes: the file set and HAProxy's reload.
    assert result.returncode == 0 and re.search(r"\bchanged=2\s", shown), shown[-3000:]
    assert host.exec("systemctl show -P MainPID haproxy").stdout.strip() == master != "0"
    assert "/etc/haproxy/vllm-gateway/clients.map" in shown
    digest = hashlib.sha256(b"d93e0b7a61c24f58a0e7b3c9d1f6a2e8").hexdigest()
    for secret in (key, "7c41f0d9a2b85e36c1d4f9087ab2e5c3", "d93e0b7a61c24f58a0e7b3c9d1f6a2e8", digest):
        assert secret not in shown
    assert "%s ops" % digest in host.exec("cat /etc/haproxy/vllm-gateway/clients.map").stdout

    # The operator's pair on the host (vllm_gateway_tls_source: host) is joined into HAProxy's PEM there: the key
    # is in no output (-v), the gateway's own probes pass through it, and a re-run changes nothing.
    made = host.exec("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 40 -subj /CN=gw "
                     "-addext subjectAltName=IP:127.0.0.1 -keyout /root/gw.key -out /root/gw.crt")
    assert made.returncode == 0, made.stderr
    own = dict(rotated, vllm_gateway_tls_source="host", vllm_gateway_tls_certificate="/root/gw.crt",
               vllm_gateway_tls_key="/root/gw.key")
    result = host.playbook(tmp_path, "arm_inference.vllm.vllm_gateway", own, options=("-v",))
    shown = result.stdout + result.stderr
    assert result.returncode == 0, shown[-3000:]
    pair = [host.exec("cat /root/gw.%s" % kind).stdout.strip() for kind in ("crt", "key")]
    assert host.exec("cat /etc/haproxy/vllm-gateway/gateway.pem").stdout == "%s\n%s\n" % tuple(pair)
    assert pair[1].splitlines()[1] not in shown
    result, rerun = _run(host, tmp_path, "arm_inference.vllm.vllm_gateway", own)
    assert result.returncode == 0 and "changed=0" in rerun, rerun[-3000:]


CLASS_PLAY = """
- hosts: all
  gather_facts: false
  tasks:
    - arm_inference.vllm.host_facts:
    - ansible.builtin.debug:
        msg: "CLASS={{ ansible_facts.arm_inference_host | arm_inference.vllm.vllm_autotune_class }}"
"""


def test_the_classes_autotune_result_is_applied_where_the_inventory_leaves_it(host, tmp_path):
    """A tuned file under autotune/<class>/ next to the inventory (vllm_autotune_output_dir's default, read through
    vllm_autotune's contract) sets what the inventory leaves empty and the play says so; a value the inventory sets
    wins; a file measured on another release is still applied and called stale; vllm_serve_autotune_apply: false
    deploys the rules' profile."""
    (tmp_path / "class.yml").write_text(CLASS_PLAY)
    result, output = _run(host, tmp_path, str(tmp_path / "class.yml"), {})
    assert result.returncode == 0, output[-3000:]
    hardware = re.search(r"CLASS=(\S+?)\"", output).group(1)
    release = host.exec("basename $(readlink -f /opt/vllm/current)").stdout.strip()
    tuned = tmp_path / "autotune" / hardware / "arm-inference--test-model.yml"
    tuned.parent.mkdir(parents=True)
    document = {"hardware_class": hardware, "model": "arm-inference/test-model", "dimension": "max_num_seqs",
                "settings": {"vllm_serve_max_num_seqs": 7}, "winner": "c02-max_num_seqs", "reason": "test",
                "measured_on": {"release": release, "model_revision": "arm-inference/test-model"}}
    tuned.write_text(json.dumps(document))
    unit = "cat /etc/systemd/system/vllm-serve-alpha.service"
    one = dict(SERVE, vllm_serve_instances=[ALPHA])

    result, output = _run(host, tmp_path, "arm_inference.vllm.vllm_serve", one)
    assert result.returncode == 0, output[-3000:]
    assert "vllm_serve: autotune %s/arm-inference--test-model.yml: vllm_serve_max_num_seqs=7\"" % hardware in output
    assert "--max-num-seqs 7" in host.exec(unit).stdout

    tuned.write_text(json.dumps(dict(document, measured_on={"release": "vllm-0.31.0-old",
                                                            "model_revision": "arm-inference/test-model"})))
    result, output = _run(host, tmp_path, "arm_inference.vllm.vllm_serve",
                          dict(one, vllm_serve_instances=[dict(ALPHA, max_num_seqs=8)]))
    assert result.returncode == 0, output[-3000:]
    assert "kept vllm_serve_max_num_seqs (set in the inventory); STALE (vLLM release was vllm-0.31.0-old, is now %s)" \
        % release in output
    assert "--max-num-seqs 8" in host.exec(unit).stdout

    result, output = _run(host, tmp_path, "arm_inference.vllm.vllm_serve", dict(one, vllm_serve_autotune_apply=False))
    assert result.returncode == 0, output[-3000:]
    assert "vllm_serve: autotune" not in output and "--max-num-seqs" not in host.exec(unit).stdout
