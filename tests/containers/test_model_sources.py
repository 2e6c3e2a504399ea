"""vllm_model on one native Debian 12 container: the hub source through the real huggingface_hub client
(against the hub stand-in, the real hub being unreachable here), the S3 source through the real boto3
(against moto's S3 server on the loopback, IAM enforced), the controller-directory, HTTP file list and
HTTP archive (Python's own http.server on the loopback) and host-path sources, and bad input.

The tests share one container and run in file order, each building on the store the previous one
left: placed and verified; re-run changed=0 with the hub stopped; a revision switch keeping the old
one; a corrupted download refused with the previous revision current; pruning.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

import harness
from harness import NATIVE, REPO_ROOT, Container, playbook_command, run_playbook

from stand_ins.hub_server import HubProcess
from stand_ins.s3_origin import REGION, S3Origin
from stand_ins.tiny_model import write_tiny_model

MODELS_PLAYBOOK = REPO_ROOT / "playbooks" / "models.yml"
STORE = "/var/lib/vllm-models"
COMMITS = {"main": "1" * 40, "v2": "2" * 40, "v3": "3" * 40, "x-bnb": "5" * 40}
# x-bnb: the tiny model under the published config.json of a bitsandbytes checkpoint (tests/unit/samples/models),
# a quantization vLLM's CPU backend serves on no architecture.
BNB_CONFIG = REPO_ROOT / "tests" / "unit" / "samples" / "models" / "llama-3.1-8b-instruct-bnb-8bit" / "config.json"
# The container reaches PyPI (for huggingface_hub) through the machine's CA, like prepare.yml's runs.
PIP = {"python_venv_pip_ca_bundle": harness.HOST_CA_BUNDLE}
TOKEN = "hf_test_token_never_shown"
FLEET_COMMIT = "4" * 40
FLEET_MODEL_SIZE = {"hidden": 256, "vocab": 8192}
# Three inventory hosts, one container: a store each. Three hosts to the role, one container to the machine.
FLEET = ("fleet-1", "fleet-2", "fleet-3")
METERED = REPO_ROOT / "tests" / "containers" / "connection_plugins"


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Hub(HubProcess):
    """The hub stand-in as a process the tests start and stop."""

    def file(self, ref, name):
        return self.root / "org" / "tiny" / COMMITS[ref] / name


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("hub")
    for seed, (ref, commit) in enumerate(sorted(COMMITS.items()), 1):
        write_tiny_model(str(root / "org" / "tiny" / commit), seed=seed)
    (root / "org" / "tiny" / "refs.json").write_text(json.dumps(COMMITS))
    (root / "org" / "tiny" / COMMITS["x-bnb"] / "config.json").write_bytes(BNB_CONFIG.read_bytes())
    write_tiny_model(str(root / "org" / "gated" / COMMITS["main"]), seed=9)
    # The fleet tests' model: 16 MiB of weights, so its bytes stand out from the modules Ansible sends.
    write_tiny_model(str(root / "org" / "fleet" / FLEET_COMMIT), seed=41, **FLEET_MODEL_SIZE)
    (root / "org" / "fleet" / "refs.json").write_text(json.dumps({"main": FLEET_COMMIT}))
    (root / "org" / "gated" / "refs.json").write_text(json.dumps({"main": COMMITS["main"]}))
    (root / "org" / "gated" / "gated.json").write_text(json.dumps({"token": TOKEN}))
    server = Hub(root)
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def host():
    # Host networking: the container reaches the stand-in on the machine's loopback.
    container = Container("localhost/arm-inference/debian12-%s:latest" % NATIVE, systemd=False,
                          options=["--network", "host"])
    yield container
    container.remove()


def hub_model(hub, revision, **extra):
    return dict({"name": "tiny", "source": "hf://org/tiny", "revision": revision, "endpoint": hub.endpoint}, **extra)


def place(host, tmp_path, models, **variables):
    """Run models.yml, then write the published fact to placed.json on the controller."""
    playbook = tmp_path / "models-and-fact.yml"
    playbook.write_text(json.dumps([
        {"import_playbook": str(MODELS_PLAYBOOK)},
        {"name": "Save the fact", "hosts": "vllm_hosts", "gather_facts": False, "tasks": [
            {"ansible.builtin.copy": {"content": "{{ vllm_model_placed | to_json }}",
                                      "dest": str(tmp_path / "placed.json"), "mode": "0644"},
             # The test's own bookkeeping: not counted in the recap the tests read.
             "delegate_to": "localhost", "become": False, "changed_when": False}]},
    ]))
    started = time.monotonic()
    result = run_playbook([host], tmp_path, str(playbook), dict(PIP, vllm_model_models=models, **variables))
    result.elapsed = time.monotonic() - started
    print("models.yml: %.1f s" % result.elapsed)
    result.placed = json.loads((tmp_path / "placed.json").read_text()) if result.returncode == 0 else None
    return result


def changed_count(result):
    recap = [line for line in result.stdout.splitlines() if " changed=" in line]
    assert recap, result.stdout[-3000:]
    return int(recap[-1].split(" changed=")[1].split()[0])


def sha256_in(host, path):
    return host.exec("sha256sum %s | cut -d' ' -f1" % path).stdout.strip()


def current(host, name="tiny"):
    return host.exec("readlink %s/%s/current" % (STORE, name)).stdout.strip()


def entries(host, name="tiny"):
    return sorted(host.exec("ls -A %s/%s" % (STORE, name)).stdout.split())


def test_bad_input_fails_before_anything_changes(host, hub, tmp_path):
    before = host.exec("ls -d %s /opt/vllm/model-tools 2>&1; getent group vllm-serve" % STORE).stdout
    result = place(host, tmp_path, [hub_model(hub, "main"), {"name": "two", "source": "ftp://mirror/m"}])
    assert result.returncode != 0
    assert "vllm_model_models[1] (two).source: has an unknown source scheme (got ftp://mirror/m); use hf://" \
        in result.stdout
    result = place(host, tmp_path, [{"name": "x", "source": "file:///m", "sha256": {"a": "b" * 64}, "token": TOKEN}])
    assert "vllm_model_models[0] (x).token: only applies to hf:// sources (got (hidden))" in result.stdout
    assert TOKEN not in result.stdout + result.stderr
    assert host.exec("ls -d %s /opt/vllm/model-tools 2>&1; getent group vllm-serve" % STORE).stdout == before


def test_hub_model_is_placed_verified_and_readable_by_the_serve_group_only(host, hub, tmp_path):
    result = place(host, tmp_path, [hub_model(hub, "main")])
    assert result.returncode == 0, result.stdout[-3000:]
    assert result.placed == {"tiny": {"path": STORE + "/tiny/current", "revision": COMMITS["main"],
                                      "revision_path": STORE + "/tiny/" + COMMITS["main"], "source": "hf",
                                      "previous_revision": None}}
    assert current(host) == COMMITS["main"]
    # The branch was resolved once, on the controller, and the play says which commit it meant for every host.
    assert "tiny: hf://org/tiny main is commit %s for every host" % COMMITS["main"] in result.stdout
    for name in ("config.json", "model.safetensors", "tokenizer_config.json"):
        expected = hashlib.sha256(hub.file("main", name).read_bytes()).hexdigest()
        assert sha256_in(host, "%s/tiny/current/%s" % (STORE, name)) == expected
    listing = host.exec("stat -c '%%U %%G %%a %%n' %s %s/tiny %s/tiny/%s %s/tiny/%s/model.safetensors"
                        % (STORE, STORE, STORE, COMMITS["main"], STORE, COMMITS["main"])).stdout.split("\n")
    assert [line.split()[:3] for line in listing if line] == [["root", "vllm-serve", "750"]] * 3 + [
        ["root", "vllm-serve", "640"]]
    assert entries(host) == [".state.json", COMMITS["main"], "current"]


def test_rerun_with_the_hub_stopped_changes_nothing(host, hub, tmp_path):
    hub.stop()
    try:
        result = place(host, tmp_path, [hub_model(hub, "main")])
    finally:
        hub.start()
    assert result.returncode == 0, result.stdout[-3000:]
    assert changed_count(result) == 0
    assert result.placed["tiny"]["revision"] == COMMITS["main"]
    # The controller cannot resolve main either: the host keeps the commit it recorded, and the play says so.
    assert "tiny: hf://org/tiny main was not resolved: the hub at %s cannot be reached from the controller" % (
        hub.endpoint) in result.stdout, result.stdout[-3000:]


def test_revision_switch_keeps_the_old_revision(host, hub, tmp_path):
    # With a CA bundle the hub client is built through its client factory (the stand-in speaks plain HTTP, so
    # this proves the factory's client downloads; the TLS trust itself is the unit tests' for HTTPS and S3).
    result = place(host, tmp_path, [hub_model(hub, "v2")], vllm_model_ca_bundle=harness.HOST_CA_BUNDLE)
    assert result.returncode == 0, result.stdout[-3000:]
    assert current(host) == COMMITS["v2"]
    assert result.placed["tiny"]["previous_revision"] == COMMITS["main"]
    assert entries(host) == [".state.json", COMMITS["main"], COMMITS["v2"], "current"]
    assert host.exec("test -s /etc/ssl/arm-inference-vllm-model-ca.pem && echo present").stdout.strip() == "present"


def test_a_model_too_large_for_the_host_is_refused_before_the_download(host, hub, tmp_path):
    # The container has the machine's memory; a headroom larger than any node leaves no room for any model.
    result = place(host, tmp_path, [hub_model(hub, "v3")], vllm_serve_model="tiny",
                   vllm_serve_memory_headroom_gib=100000)
    assert result.returncode != 0
    assert "vllm_serve_instances[0] (main): tiny at %s needs " % COMMITS["v3"] in result.stdout
    assert "Nothing was fetched; the previous revision (%s) stays current." % COMMITS["v2"] in result.stdout
    assert current(host) == COMMITS["v2"]
    assert entries(host) == [".state.json", COMMITS["main"], COMMITS["v2"], "current"]


def test_corrupted_download_is_refused_and_the_previous_revision_stays_current(host, hub, tmp_path):
    weights = hub.file("v3", "model.safetensors")
    original = weights.read_bytes()
    weights.write_bytes(original[:-1] + bytes([original[-1] ^ 1]))
    try:
        result = place(host, tmp_path, [hub_model(hub, "v3")])
    finally:
        weights.write_bytes(original)
    assert result.returncode != 0
    assert "tiny: model.safetensors has sha256" in result.stdout and "a corrupted download" in result.stdout
    assert "the previous revision (%s) stays current" % COMMITS["v2"] in result.stdout
    assert current(host) == COMMITS["v2"]
    assert entries(host) == [".state.json", COMMITS["main"], COMMITS["v2"], "current"]


def test_missing_revision_and_gated_model_are_refused_with_the_variable(host, hub, tmp_path):
    result = place(host, tmp_path, [hub_model(hub, "no-such-tag")])
    assert "vllm_model_models (tiny).revision: org/tiny has no revision no-such-tag" in result.stdout
    gated = {"name": "gated", "source": "hf://org/gated", "revision": "main", "endpoint": hub.endpoint}
    result = place(host, tmp_path, [gated])
    assert "vllm_model_models (gated).token: org/gated is gated and no token is set" in result.stdout
    assert current(host) == COMMITS["v2"]
    result = place(host, tmp_path, [dict(gated, token=TOKEN)], vllm_model_keep=1)
    assert result.returncode == 0, result.stdout[-3000:]
    assert TOKEN not in result.stdout + result.stderr
    assert current(host, "gated") == COMMITS["main"]


def test_pruning_keeps_current_and_the_one_before(host, hub, tmp_path):
    result = place(host, tmp_path, [hub_model(hub, "v3")], vllm_model_keep=1)
    assert result.returncode == 0, result.stdout[-3000:]
    assert current(host) == COMMITS["v3"]
    # keep=1 still keeps v2: it was current until now, and a server may still be running on it.
    assert entries(host) == [".state.json", COMMITS["v2"], COMMITS["v3"], "current"]
    result = place(host, tmp_path, [hub_model(hub, "v3")], vllm_model_keep=1)
    assert entries(host) == [".state.json", COMMITS["v3"], "current"]


def test_a_quantization_vllm_serve_refuses_is_refused_before_any_weight_byte(host, hub, tmp_path):
    # vllm_serve's own rules run on the revision's config.json (read through the hub client's HTTP client and
    # checked against the hub's pin) before the weights are asked for; the hub's log shows they never were.
    before = len(hub.requests())
    result = place(host, tmp_path, [hub_model(hub, "x-bnb")], vllm_serve_model="tiny")
    asked = hub.requests()[before:]
    assert result.returncode != 0
    assert ("vllm_serve_instances[0] (main).model: bitsandbytes checkpoints are not served by vLLM's CPU backend on "
            "%s" % ("Arm" if NATIVE in ("arm64", "aarch64") else "x86_64")) in result.stdout, result.stdout[-3000:]
    assert "Nothing was fetched; the previous revision (%s) stays current." % COMMITS["v3"] in result.stdout
    assert ("GET", "/org/tiny/resolve/%s/config.json" % COMMITS["x-bnb"]) in asked, asked
    assert [request for request in asked if request[1].endswith(".safetensors")] == [], asked
    assert current(host) == COMMITS["v3"]
    assert entries(host) == [".state.json", COMMITS["v3"], "current"]


def pack(model_dir, archive):
    """A tar.gz of model_dir under one top directory (as people pack a model); the archive's sha256."""
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(model_dir, arcname="qwen")
    return hashlib.sha256(Path(archive).read_bytes()).hexdigest()


def test_controller_http_and_host_path_sources(host, tmp_path):
    pushed = write_tiny_model(str(tmp_path / "pushed"), seed=21)
    local = write_tiny_model(str(tmp_path / "local"), seed=22)
    served = write_tiny_model(str(tmp_path / "web" / "tiny"), seed=23)
    for directory in (local, served):
        sums = subprocess.run("sha256sum *", shell=True, cwd=directory, capture_output=True, text=True,
                              check=True).stdout
        Path(directory, "SHA256SUMS").write_text(sums)
    # An archive beside the file list, its line in the web root's SHA256SUMS (placed by the same runs).
    packed = write_tiny_model(str(tmp_path / "packed"), seed=24)
    (tmp_path / "web" / "SHA256SUMS").write_text("%s  tiny.tar.gz\n" % pack(packed, tmp_path / "web" / "tiny.tar.gz"))
    host.exec("mkdir -p /srv/models")
    subprocess.run(["podman", "cp", local, "%s:/srv/models/local" % host.name], check=True)
    port = _free_port()
    web = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port), "--directory",
                            str(tmp_path / "web")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    models = [{"name": "pushed", "source": "controller://" + pushed},
              {"name": "local", "source": "file:///srv/models/local", "sha256sums": "SHA256SUMS"},
              {"name": "web", "source": "http://127.0.0.1:%d/tiny/" % port, "sha256sums": "SHA256SUMS"},
              {"name": "packed", "source": "http://127.0.0.1:%d/tiny.tar.gz" % port, "sha256sums": "SHA256SUMS"}]
    try:
        time.sleep(0.5)
        result = place(host, tmp_path, models)
    finally:
        web.terminate()
        web.wait(10)
    assert result.returncode == 0, result.stdout[-3000:]
    assert [result.placed[name]["source"] for name in ("pushed", "local", "web", "packed")] == [
        "controller", "host", "http", "archive"]
    assert result.placed["pushed"]["revision"].startswith("sha256-")
    # The archive's top directory is stripped, and nothing but the revision is left beside it.
    assert entries(host, "packed") == [".state.json", "current", result.placed["packed"]["revision"]]
    for name, directory in (("pushed", pushed), ("web", served), ("packed", packed)):
        for file_name in ("config.json", "model.safetensors", "tokenizer_config.json"):
            expected = hashlib.sha256(Path(directory, file_name).read_bytes()).hexdigest()
            assert sha256_in(host, "%s/%s/current/%s" % (STORE, name, file_name)) == expected
    assert host.exec("readlink -f %s/local/current" % STORE).stdout.strip() == "/srv/models/local"
    # The HTTP origin is stopped: the re-run decides from the store's record.
    again = place(host, tmp_path, models)
    assert again.returncode == 0 and changed_count(again) == 0
    # A host file altered behind the role's back is verified again, and refused.
    host.exec("echo tampered >> /srv/models/local/config.json")
    refused = place(host, tmp_path, models)
    assert refused.returncode != 0 and "config.json has sha256" in refused.stdout


def test_a_corrupted_archive_is_refused_and_the_previous_revision_stays_current(host, tmp_path):
    # The archive placed by test_controller_http_and_host_path_sources (which also re-ran it with the origin
    # stopped) is the previous revision; a new one is pinned by its sha256, and the bytes served differ by one bit.
    previous = current(host, "packed")
    assert previous.startswith("sha256-"), "runs after test_controller_http_and_host_path_sources"
    (tmp_path / "web").mkdir()
    archive = tmp_path / "web" / "tiny.tar.gz"
    digest = pack(write_tiny_model(str(tmp_path / "v2"), seed=25), archive)
    data = archive.read_bytes()
    archive.write_bytes(data[:-9] + bytes([data[-9] ^ 1]) + data[-8:])
    port = _free_port()
    web = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port), "--directory",
                            str(tmp_path / "web")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        result = place(host, tmp_path, [{"name": "packed", "source": "http://127.0.0.1:%d/tiny.tar.gz" % port,
                                         "sha256": {"tiny.tar.gz": digest}}])
    finally:
        web.terminate()
        web.wait(10)
    assert result.returncode != 0
    assert "packed: tiny.tar.gz has sha256 %s, expected %s: a corrupted download" % (
        hashlib.sha256(archive.read_bytes()).hexdigest(), digest) in result.stdout, result.stdout[-3000:]
    assert "the previous revision (%s) stays current" % previous in result.stdout
    assert current(host, "packed") == previous
    # No staging directory, no archive file: the store holds what it held.
    assert entries(host, "packed") == [".state.json", "current", previous]


def test_s3_source_with_keys_rerun_offline_and_access_denied(host, tmp_path):
    origin = S3Origin().start()
    try:
        model = write_tiny_model(str(tmp_path / "s3-model"), seed=31)
        origin.put_model("models", "org/tiny", model)
        origin.put_model("locked", "org/tiny", model)
        keys = origin.reader("models", "org/tiny")
        origin.enforce_iam()
        entry = dict({"name": "bucketed", "source": "s3://models/org/tiny", "sha256sums": "SHA256SUMS",
                      "region": REGION, "endpoint_url": origin.endpoint}, **keys)
        result = place(host, tmp_path, [entry])
        assert result.returncode == 0, result.stdout[-3000:]
        assert result.placed["bucketed"]["source"] == "s3"
        revision = result.placed["bucketed"]["revision"]
        for file_name in ("config.json", "model.safetensors", "tokenizer_config.json"):
            expected = hashlib.sha256(Path(model, file_name).read_bytes()).hexdigest()
            assert sha256_in(host, "%s/bucketed/current/%s" % (STORE, file_name)) == expected
        denied = place(host, tmp_path, [dict(entry, source="s3://locked/org/tiny", name="bucketed")])
        assert denied.returncode != 0
        assert ("vllm_model_models (bucketed).source: access to s3://locked/org/tiny/SHA256SUMS is denied "
                "(got AccessDenied)") in denied.stdout
        assert current(host, "bucketed") == revision
    finally:
        origin.stop()
    # The S3 server is gone: the re-run decides from the store's record.
    again = place(host, tmp_path, [entry])
    assert again.returncode == 0 and changed_count(again) == 0, again.stdout[-3000:]
    for run in (result, denied, again):
        assert keys["secret_access_key"] not in run.stdout + run.stderr


def fleet_run(host, tmp_path, models, hosts=FLEET, keys=None, limit=None):
    """models.yml on the fleet through the metered podman connection; .controller_bytes is what the
    controller sent to the hosts (files put and commands' input), .recap {host: changed}. keys: {host: S3 keys}
    each host's entries carry (host variables), else the models' own; limit: ansible-playbook's --limit."""
    inventory = tmp_path / "fleet.json"
    inventory.write_text(json.dumps({"vllm_hosts": {"hosts": dict((alias, dict({
        "ansible_host": host.name, "ansible_connection": "metered_podman",
        "ansible_python_interpreter": "/usr/bin/python3", "vllm_model_store": "/var/lib/vllm-%s" % alias},
        **({"vllm_model_models": [dict(model, **keys[alias]) for model in models]} if keys else {})))
        for alias in hosts)}}))
    variables = dict(PIP, **({} if keys else {"vllm_model_models": models}))
    command, env = playbook_command([host], tmp_path, str(MODELS_PLAYBOOK), variables)
    command[command.index("-i") + 1] = str(inventory)
    command += ["--limit", limit] if limit else []
    meter = tmp_path / "meter.log"
    meter.write_text("")
    env.update(ANSIBLE_CONNECTION_PLUGINS=str(METERED), METERED_CONNECTION_LOG=str(meter))
    started = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=tmp_path, check=False)
    result.elapsed = time.monotonic() - started
    (tmp_path / "fleet-run.log").write_text(result.stdout + result.stderr)
    result.controller_bytes = sum(int(line.split()[1]) for line in meter.read_text().splitlines())
    result.recap = dict((line.split()[0], int(line.split(" changed=")[1].split()[0]))
                        for line in result.stdout.splitlines() if " changed=" in line and " ok=" in line)
    return result


def model_bytes(directory):
    return sum(path.stat().st_size for path in Path(directory).iterdir())


def test_fleet_fetches_once_through_the_mirror(host, hub, tmp_path):
    """Three hosts fetch a controller model and a hub model once, through the mirror: the bytes through the
    controller and from the hub (with ARM_INFERENCE_FLEET_BYTES set, `make model-fleet-bytes`, also without
    the mirror, for comparison); a fourth host joining with the hub stopped; a re-run with the hub and the
    mirror stopped. Least privilege (IAM enforced): only the writer, fleet-1 (vllm_model_mirror_writer left empty:
    the first host of vllm_hosts), holds keys that may write the mirror; the controller uploads with them; every
    other host's keys only read. With the writer left out by --limit, the first host of the run does not become the
    writer: it refuses, naming fleet-1 (on the old code it seeded, and was refused s3:PutObject after placing from
    the hub). Relies on the earlier tests' tools venv (file order)."""
    pushed = write_tiny_model(str(tmp_path / "pushed"), seed=42, **FLEET_MODEL_SIZE)
    size = model_bytes(pushed)
    origin = S3Origin().start()
    report = {"model_bytes": size, "hosts": len(FLEET)}
    try:
        origin.client().create_bucket(Bucket="fleet-cache", CreateBucketConfiguration={"LocationConstraint": REGION})
        writer = origin.user("mirror-writer", "fleet-cache", "models", ["s3:GetObject", "s3:PutObject"])
        reader = origin.user("mirror-reader", "fleet-cache", "models", ["s3:GetObject"])
        origin.enforce_iam()
        keys = dict((alias, writer if alias == "fleet-1" else reader) for alias in FLEET + ("fleet-4",))
        mirror = {"mirror": "s3://fleet-cache/models", "region": REGION, "endpoint_url": origin.endpoint}
        hub_model = {"source": "hf://org/fleet", "revision": "main", "endpoint": hub.endpoint}

        if os.environ.get("ARM_INFERENCE_FLEET_BYTES"):  # make model-fleet-bytes: the modes without a mirror too
            served = hub.bytes_served()
            direct = fleet_run(host, tmp_path, [{"name": "copied", "source": "controller://" + pushed},
                                                dict(hub_model, name="direct")])
            assert direct.returncode == 0, direct.stdout[-3000:]
            report["each_host_from_origin"] = {"controller_bytes": direct.controller_bytes,
                                               "hub_bytes": hub.bytes_served() - served,
                                               "seconds": round(direct.elapsed, 1)}
            assert report["each_host_from_origin"]["hub_bytes"] >= len(FLEET) * size
            assert report["each_host_from_origin"]["controller_bytes"] >= len(FLEET) * size

        served = hub.bytes_served()
        models = [dict(mirror, name="copied-mirrored", source="controller://" + pushed),
                  dict(hub_model, name="mirrored", **mirror)]
        mirrored = fleet_run(host, tmp_path, models, keys=keys)
        assert mirrored.returncode == 0, mirrored.stdout[-3000:]
        objects = origin.client("s3", aws_access_key_id=reader["access_key_id"],
                                aws_secret_access_key=reader["secret_access_key"]).list_objects_v2(
            Bucket="fleet-cache", Prefix="models/copied-mirrored/")["Contents"]
        uploaded = sum(item["Size"] for item in objects if not item["Key"].endswith(("SHA256SUMS", "refs.json")))
        report["once_through_the_mirror"] = {"controller_bytes": mirrored.controller_bytes,
                                             "controller_upload_bytes": uploaded,
                                             "hub_bytes": hub.bytes_served() - served,
                                             "seconds": round(mirrored.elapsed, 1)}
        for alias in FLEET:
            for name, directory in (("copied-mirrored", pushed), ("mirrored", hub.root / "org" / "fleet" / FLEET_COMMIT)):
                expected = hashlib.sha256(Path(directory, "model.safetensors").read_bytes()).hexdigest()
                assert sha256_in(host, "/var/lib/vllm-%s/%s/current/model.safetensors" % (alias, name)) == expected
        assert "/var/lib/vllm-fleet-2/mirrored/" + FLEET_COMMIT == host.exec(
            "readlink -f /var/lib/vllm-fleet-2/mirrored/current").stdout.strip()
        # The writer left out of the run (--limit) and a model the mirror does not hold: the host that seeds in its
        # place refuses on one line before it asks the hub, and the other stops rather than fetch on its own.
        served = hub.bytes_served()
        unseeded = fleet_run(host, tmp_path, [dict(hub_model, name="unseeded", **mirror)], keys=keys,
                             limit="fleet-2,fleet-3")
        assert unseeded.returncode != 0
        assert ("vllm_model_models (unseeded).mirror: s3://fleet-cache/models/unseeded/%s/ is not in the mirror yet, "
                "and only vllm_model_mirror_writer (fleet-1) writes it" % FLEET_COMMIT) in unseeded.stdout, \
            unseeded.stdout[-3000:]
        assert "vllm_model_models (unseeded).mirror: its seeder, fleet-2, failed" in unseeded.stdout
        # The preflight read the small files and headers from the hub (its reach), no weights.
        assert hub.bytes_served() - served < size // 4
        assert host.exec("test ! -e /var/lib/vllm-fleet-2/unseeded/current -a "
                         "! -e /var/lib/vllm-fleet-3/unseeded/current").returncode == 0
        # A host joins while the hub is down: it gets the revision the fleet serves, from the mirror.
        hub.stop()
        joined = fleet_run(host, tmp_path, models, hosts=FLEET + ("fleet-4",), keys=keys)
        assert joined.returncode == 0, joined.stdout[-3000:]
        assert joined.recap["fleet-4"] > 0 and [joined.recap[alias] for alias in FLEET] == [0, 0, 0], joined.recap
        assert host.exec("readlink /var/lib/vllm-fleet-4/mirrored/current").stdout.strip() == FLEET_COMMIT
        report["host_joins_hub_stopped"] = {"controller_bytes": joined.controller_bytes,
                                            "seconds": round(joined.elapsed, 1)}
    finally:
        origin.stop()
    try:
        # Both origins stopped: a converged fleet decides from each store's record.
        again = fleet_run(host, tmp_path, models, hosts=FLEET + ("fleet-4",), keys=keys)
        assert again.returncode == 0 and set(again.recap.values()) == {0}, again.stdout[-3000:]
        report["rerun_origins_stopped"] = {"controller_bytes": again.controller_bytes,
                                           "seconds": round(again.elapsed, 1)}
    finally:
        hub.start()
    print("fleet of three: %s" % json.dumps(report))
    (REPO_ROOT / "build").mkdir(exist_ok=True)
    (REPO_ROOT / "build" / "model-fleet-bytes.json").write_text(json.dumps(report, indent=1) + "\n")
    # Once through the mirror: the hub served one copy of the weights, the controller uploaded one and sent the hosts
    # none. Besides, the small files and each safetensors file's length and header, on which vllm_serve's rules run
    # before any weight: read by the preflight's question to each of the three hosts (can it place the model?) and
    # by the seeder's placing.
    fleet_model = hub.root / "org" / "fleet" / FLEET_COMMIT
    small = sum((fleet_model / name).stat().st_size for name in ("config.json", "model.safetensors.index.json")
                if (fleet_model / name).exists())
    headers = sum(8 + 8 + int.from_bytes(path.read_bytes()[:8], "little")
                  for path in fleet_model.glob("*.safetensors"))
    assert report["once_through_the_mirror"]["hub_bytes"] == model_bytes(fleet_model) + (len(FLEET) + 1) * (small + headers)
    assert report["once_through_the_mirror"]["controller_upload_bytes"] == size
    assert report["once_through_the_mirror"]["controller_bytes"] < size


def test_a_branch_means_one_commit_for_every_batch_of_a_serial_run(host, hub, tmp_path):
    """rolling_update.yml's shape: the preflight play, then the role in batches of one host. `main` moves to another
    commit after the first batch (a task of the play rewrites the hub's refs); every host still places the commit
    `main` meant when the run began, resolved once, for every host, in the preflight play. On the old code each batch
    resolved `main` again, so the second host placed the new commit."""
    refs = hub.root / "org" / "tiny" / "refs.json"
    aliases = ("batch-1", "batch-2")
    playbook = tmp_path / "batches.yml"
    playbook.write_text(json.dumps([
        {"import_playbook": str(REPO_ROOT / "playbooks" / "preflight.yml"), "vars": {"preflight_roles": ["vllm_model"]}},
        {"name": "Place in batches", "hosts": "vllm_hosts", "become": True, "gather_facts": False, "serial": 1,
         "roles": [{"role": "arm_inference.vllm.vllm_model"}],
         "post_tasks": [{"name": "Move main on the hub", "delegate_to": "localhost", "become": False, "run_once": True,
                         "changed_when": False, "ansible.builtin.copy": {
                             "content": json.dumps(dict(COMMITS, main=COMMITS["v3"])), "dest": str(refs),
                             "mode": "0644"}},
                        {"name": "Save what the host placed", "delegate_to": "localhost", "become": False,
                         "changed_when": False, "ansible.builtin.copy": {
                             "content": "{{ vllm_model_placed | to_json }}", "mode": "0644",
                             "dest": str(tmp_path / "placed-{{ inventory_hostname }}.json")}}]},
    ]))
    alias_hosts = [type("Alias", (), {"name": alias}) for alias in aliases]
    host_vars = dict((alias, {"ansible_host": host.name, "vllm_model_store": "/var/lib/vllm-%s" % alias})
                     for alias in aliases)
    try:
        result = run_playbook(alias_hosts, tmp_path, str(playbook), dict(PIP, vllm_model_models=[hub_model(hub, "main")]),
                              host_vars=host_vars)
    finally:
        refs.write_text(json.dumps(COMMITS))
    assert result.returncode == 0, result.stdout[-3000:]
    assert result.stdout.count("tiny: hf://org/tiny main is commit %s for every host" % COMMITS["main"]) == 1, \
        result.stdout[-3000:]
    placed = dict((alias, json.loads((tmp_path / ("placed-%s.json" % alias)).read_text())["tiny"]["revision"])
                  for alias in aliases)
    assert placed == dict((alias, COMMITS["main"]) for alias in aliases), placed
