"""rolling_update scenario: update three hosts serving fixture vLLM v0.32.0 and a model placed from the
controller to v0.32.1 and a new revision of that model, while the second one (serial order) fails its
health gate. Host 1 is updated and healthy and serves the new revision, host 2 is rolled back to its
release and the old revision and serves again, the rollout stops and host 3 keeps its server and model
untouched. Then an update to a ref that does not compile fails in batch 1 and touches nobody's server,
and so does a model that cannot be placed."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from types import SimpleNamespace

import pytest
import testinfra

import test_site
from serve_checks import only_in_scenario, run_playbook, write_report

pytestmark = only_in_scenario("rolling_update", "only the rolling_update scenario rolls an update out")

HEALTH = "python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:8000/health', timeout=5).status)\""
# The model the instances serve (group_vars/vllm_hosts.yml): written by converge.yml on the controller,
# placed by vllm_model in its default store.
CONTROLLER_MODEL = os.path.join(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", ""), "models", "tiny")
STORE = "/var/lib/vllm-models/tiny"
# Seconds each rolling_update.yml run took, reported (not asserted) after the scenario.
SECONDS = {}


def roll_out(name, *extra_vars):
    """rolling_update.yml with `extra_vars`, timed under `name` in the scenario's report."""
    started = time.monotonic()
    result = run_playbook("arm_inference.vllm.rolling_update", *extra_vars)
    SECONDS[name] = round(time.monotonic() - started, 1)
    write_report("rolling-update-seconds", SECONDS)
    return result


def state(host):
    """(current release, MainPID of the server, what /health answers)."""
    health = host.run(HEALTH)
    return (host.check_output("readlink /opt/vllm/current"), host.check_output("systemctl show -P MainPID vllm-serve-main"),
            health.stdout.strip() or health.stderr.strip()[-200:])


def model(host):
    """(the model's current revision in the store, the revision whose directory the unit serves, the store's
    revision directories)."""
    unit = host.check_output("systemctl show -P ExecStart vllm-serve-main")
    served = re.search(r"--model %s/(\S+)" % re.escape(STORE), unit)
    return (host.check_output("readlink %s/current" % STORE), served.group(1) if served else unit,
            sorted(set(host.check_output("ls %s" % STORE).split()) - {"current"}))


def new_model_revision():
    """New weights in the controller's model directory: a new revision (named after the checksums). Returns the
    new weights' sha256."""
    sys.path.insert(0, os.path.join(os.environ["MOLECULE_PROJECT_DIRECTORY"], "tests", "stand_ins"))
    from tiny_model import write_tiny_model  # pylint: disable=import-outside-toplevel

    write_tiny_model(CONTROLLER_MODEL, seed=2)
    with open(os.path.join(CONTROLLER_MODEL, "model.safetensors"), "rb") as weights:
        return hashlib.sha256(weights.read()).hexdigest()


@pytest.fixture(scope="module")
def rollout():
    # Serial order is inventory order: rolling-1, rolling-2, rolling-3.
    fleet = [testinfra.get_host(address) for address in test_site._podman_hosts()]  # pylint: disable=protected-access
    before = [state(host) for host in fleet]
    assert all(release.startswith("releases/v0.32.0-") and health == "200" for release, dummy, health in before), before
    models_before = [model(host) for host in fleet]
    old = models_before[0][0]
    assert models_before == [(old, old, [old])] * 3, models_before
    weights = new_model_revision()
    returncode, output = roll_out("release and model, fails at host 2", "vllm_build_git_ref=v0.32.1")
    return SimpleNamespace(fleet=fleet, before=before, returncode=returncode, output=output,
                           after=[state(host) for host in fleet], rotations=[rotation(host) for host in fleet],
                           models_before=models_before, models_after=[model(host) for host in fleet], weights=weights)


def rotation(host):
    """What the scenario's balancer hooks (molecule/rolling_update/rotation) recorded, in order."""
    return host.run("cat /var/tmp/arm-inference-rotation.log").stdout.split("\n")[:-1]


def test_the_rollout_fails_at_host_2_and_says_it_stops(rollout):
    output = rollout.output
    assert rollout.returncode != 0, output[-3000:]
    assert "vllm_rollout: the update of rolling-2 failed" in output, output[-3000:]
    assert "The rollout stops here." in output, output[-3000:]


def test_host_1_is_updated_and_healthy(rollout):
    after = rollout.after
    assert after[0][0].startswith("releases/v0.32.1-") and after[0][2] == "200", after


def test_host_1_serves_the_new_model_revision_and_keeps_the_old_one(rollout):
    old, new = rollout.models_before[0][0], rollout.models_after[0][0]
    assert new != old and rollout.models_after[0] == (new, new, sorted([old, new])), rollout.models_after
    served = rollout.fleet[0].check_output("sha256sum %s/%s/model.safetensors" % (STORE, new))
    assert served.split()[0] == rollout.weights


def test_host_2_is_back_on_its_release_and_healthy(rollout):
    fleet, before, after = rollout.fleet, rollout.before, rollout.after
    assert after[1][0] == before[1][0] and after[1][2] == "200", (before, after)
    unit = fleet[1].check_output("systemctl show -P ExecStart vllm-serve-main")
    assert re.search(r"/opt/vllm/%s/venv/bin/python" % re.escape(before[1][0]), unit), unit
    # It was switched to v0.32.1, then back.
    assert "v0.32.1" in fleet[1].check_output("cat /opt/vllm/release-history")


def test_host_2_serves_the_old_model_revision_again_whose_directory_is_still_there(rollout):
    """The new revision was placed (host 1's), the restored unit names the old revision's directory, and the
    store's current link is back on it."""
    old, new = rollout.models_before[1][0], rollout.models_after[0][0]
    assert rollout.models_after[1] == (old, old, sorted([old, new])), rollout.models_after
    assert rollout.fleet[1].run("test -s %s/%s/model.safetensors" % (STORE, old)).rc == 0
    history = json.loads(rollout.fleet[1].check_output("cat %s/.state.json" % STORE))["history"]
    assert [(entry["revision"], entry["previous"]) for entry in history] == [(old, None), (new, old), (old, new)]


def test_host_3_never_got_the_update(rollout):
    fleet, before, after = rollout.fleet, rollout.before, rollout.after
    # Same release, same server process, healthy, and nothing of v0.32.1 on it; the old model revision only.
    assert after[2] == before[2], (before, after)
    assert fleet[2].check_output("ls /opt/vllm/releases").split() == [before[2][0].split("/", 1)[1]]
    assert rollout.models_after[2] == rollout.models_before[2], (rollout.models_before, rollout.models_after)


def test_the_balancer_hooks_run_around_each_host_it_reached(rollout):
    """Host 1 left and rejoined on the new release, host 2 left and rejoined once rolled back, host 3 was
    never taken out of the rotation."""
    before, after, rotations = rollout.before, rollout.after, rollout.rotations
    assert rotations[0] == ["left " + before[0][0], "joined " + after[0][0]], rotations
    assert rotations[1] == ["left " + before[1][0], "joined " + before[1][0]], rotations
    assert rotations[2] == [], rotations


def test_every_gateway_answers_health_after_the_rollout(rollout):
    for host in rollout.fleet:
        assert host.check_output("python3 -c \"import ssl, urllib.request as u; print(u.urlopen("
                                 "'https://127.0.0.1:8443/health', context=ssl._create_unverified_context(), "
                                 "timeout=5).status)\"") == "200"


def test_a_ref_that_does_not_compile_stops_the_rollout_at_host_1_and_touches_no_server(rollout):
    """Runs after the rollout above (pytest keeps file order): whatever each host serves now, an update
    whose build fails on host 1 leaves every release and server process as it was (nothing to restore)."""
    fleet = rollout.fleet
    before = [state(host) for host in fleet]
    assert all(health == "200" for dummy, dummy, health in before), before
    returncode, output = roll_out("build fails at host 1", "vllm_build_git_ref=v0.32.2-broken")
    assert returncode != 0, output[-3000:]
    assert "vllm_rollout: the update of rolling-1 failed" in output, output[-3000:]
    assert "fixture_undeclared_bias" in output, output[-3000:]
    assert [state(host) for host in fleet] == before


def test_a_model_that_cannot_be_placed_stops_the_rollout_at_host_1_before_it_leaves_the_rotation(rollout):
    """A model whose files do not match their pins: host 1 fails while placing it (the controller reads the files
    for the first time then; the preflight asks only that the directory exists), before it leaves the rotation and
    before anything that serves changes."""
    fleet = rollout.fleet
    before = [(state(host), model(host), rotation(host)) for host in fleet]
    pins = dict((name, hashlib.sha256(open(os.path.join(CONTROLLER_MODEL, name), "rb").read()).hexdigest())
                for name in os.listdir(CONTROLLER_MODEL))
    pins["config.json"] = "0" * 64
    wrong = {"vllm_model_models": [{"name": "tiny", "source": "controller://" + CONTROLLER_MODEL, "sha256": pins}]}
    returncode, output = roll_out("model placement fails at host 1", json.dumps(wrong))
    assert returncode != 0, output[-3000:]
    assert "vllm_rollout: placing the models on rolling-1 failed" in output, output[-3000:]
    assert "Nothing that serves changed and the host did not leave the rotation. The rollout stops here." in output
    assert [(state(host), model(host), rotation(host)) for host in fleet] == before
