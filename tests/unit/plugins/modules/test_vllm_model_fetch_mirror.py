"""vllm_model_fetch's fleet mirror: the real boto3 against moto's S3 server (tests/stand_ins/s3_origin.py) with IAM
enforced. The controller publishes a controller:// directory once (action seed); hosts report whether they hold
it (status) and place it from the mirror (place with mirror_revision), verified against the seeder's checksums;
a re-run asks nothing; a tampered mirror object, a mirror that disagrees with what the seeder verified and a
seeder without write access each fail on one line naming the mirror, with the previous revision kept."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from ansible_collections.arm_inference.vllm.plugins.filter.vllm_model import vllm_model_seeder

from stand_ins.s3_origin import REGION, S3Origin
from stand_ins.tiny_model import write_tiny_model
from model_fetch import run_module  # noqa: E402

BUCKET = "fleet-cache"


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    server = S3Origin().start()
    server.client().create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    iam = server.client("iam")
    keys = {}
    for user, actions in (("seeder", ["s3:GetObject", "s3:PutObject"]), ("reader", ["s3:GetObject"])):
        iam.create_user(UserName=user)
        statements = [{"Effect": "Allow", "Action": actions, "Resource": ["arn:aws:s3:::%s/models/*" % BUCKET]},
                      {"Effect": "Allow", "Action": ["s3:ListBucket"], "Resource": ["arn:aws:s3:::%s" % BUCKET]}]
        iam.put_user_policy(UserName=user, PolicyName="mirror", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": statements}))
        key = iam.create_access_key(UserName=user)["AccessKey"]
        keys[user] = {"access_key_id": key["AccessKeyId"], "secret_access_key": key["SecretAccessKey"]}
    server.enforce_iam()
    yield server, keys
    server.stop()


def manifest_of(capsys, source):
    result = run_module(capsys, action="manifest", name="tiny", source="controller://" + source)
    assert result.get("failed") is not True, result
    return result


def mirrored(server, keys, source, **extra):
    return dict({"name": "tiny", "source": "controller://" + source, "mirror": "s3://%s/models" % BUCKET,
                 "region": REGION, "endpoint_url": server.endpoint, "min_free_disk_gib": 0}, **dict(keys, **extra))


def test_controller_publishes_once_and_hosts_place_from_the_mirror(capsys, tmp_path, mirror):
    server, keys = mirror
    model = write_tiny_model(str(tmp_path / "model"), seed=51)
    manifest = manifest_of(capsys, model)
    seed_args = mirrored(server, keys["seeder"], model, action="seed", revision=manifest["revision"],
                         manifest=manifest["manifest"])
    # Check mode reports the upload and makes none.
    checked = run_module(capsys, **dict(seed_args, _ansible_check_mode=True))
    assert checked["changed"] and "uploaded_bytes" not in checked
    assert "Contents" not in server.client(
        aws_access_key_id=keys["seeder"]["access_key_id"], aws_secret_access_key=keys["seeder"]["secret_access_key"]
    ).list_objects_v2(Bucket=BUCKET, Prefix="models/tiny/")
    seeded = run_module(capsys, **seed_args)
    assert seeded.get("failed") is not True, seeded
    assert seeded["changed"] and seeded["seeded_from"] == "controller"
    assert seeded["uploaded_bytes"] == sum(os.path.getsize(os.path.join(model, name)) for name in os.listdir(model))
    seeder = server.client(aws_access_key_id=keys["seeder"]["access_key_id"],
                           aws_secret_access_key=keys["seeder"]["secret_access_key"])
    listing = seeder.list_objects_v2(Bucket=BUCKET, Prefix="models/tiny/")["Contents"]
    assert sorted(item["Key"] for item in listing) == sorted(
        ["models/tiny/refs.json", "models/tiny/%s/SHA256SUMS" % manifest["revision"]]
        + ["models/tiny/%s/%s" % (manifest["revision"], name) for name in os.listdir(model)])
    # Published already: a second seed uploads nothing.
    again = run_module(capsys, **seed_args)
    assert not again["changed"] and "uploaded_bytes" not in again and again["manifest"] == seeded["manifest"]

    store = tmp_path / "store"
    host_args = mirrored(server, keys["reader"], model, store=str(store), revision=manifest["revision"],
                         manifest=manifest["manifest"])
    status = run_module(capsys, **dict(host_args, action="status"))
    assert status == dict(status, changed=False, needed=True, revision=None)
    placed = run_module(capsys, **dict(host_args, mirror_revision=seeded["revision"],
                                       mirror_manifest=seeded["manifest"]))
    assert placed.get("failed") is not True, placed
    assert placed["changed"] and placed["placed"]["source"] == "controller"
    for name in os.listdir(model):
        assert hashlib.sha256(Path(store, "tiny", "current", name).read_bytes()).hexdigest() == \
            hashlib.sha256(Path(model, name).read_bytes()).hexdigest()
    state = json.loads((store / "tiny" / ".state.json").read_text())
    assert state["revisions"][manifest["revision"]]["via"] == "s3://%s/models/tiny/%s" % (BUCKET, manifest["revision"])
    assert run_module(capsys, **dict(host_args, action="status"))["needed"] is False

    # Converged: decided from the record, the mirror unreachable.
    offline = dict(host_args, endpoint_url="http://127.0.0.1:9", mirror_revision=seeded["revision"],
                   mirror_manifest=seeded["manifest"])
    assert run_module(capsys, **offline)["changed"] is False

    # A mirror object replaced behind the seeder's back is refused; the previous revision stays current.
    changed = write_tiny_model(str(tmp_path / "model-2"), seed=52)
    second = manifest_of(capsys, changed)
    run_module(capsys, **mirrored(server, keys["seeder"], changed, action="seed", revision=second["revision"],
                                  manifest=second["manifest"]))
    seeder.put_object(Bucket=BUCKET, Key="models/tiny/%s/config.json" % second["revision"], Body=b"{}")
    refused = run_module(capsys, **dict(host_args, revision=second["revision"], manifest=second["manifest"],
                                        mirror_revision=second["revision"],
                                        mirror_manifest=dict((name, entry["sha256"])
                                                             for name, entry in second["manifest"].items())))
    assert refused["failed"] and "config.json" in refused["msg"]
    assert "the previous revision (%s) stays current" % manifest["revision"] in refused["msg"]
    assert os.readlink(store / "tiny" / "current") == manifest["revision"]
    assert not [entry for entry in os.listdir(store / "tiny") if entry.startswith(".staging-")]

    # The seeder finds the mirror disagreeing with what it verified: refused, naming the mirror.
    disagree = run_module(capsys, **mirrored(server, keys["seeder"], changed, action="seed",
                                             revision=second["revision"], manifest=dict(
                                                 second["manifest"], **{"config.json": dict(
                                                     second["manifest"]["config.json"], sha256="0" * 64)})))
    assert disagree["failed"] and disagree["msg"].startswith("vllm_model_models (tiny).mirror: s3://%s/models/tiny/%s/"
                                                             "SHA256SUMS disagrees" % (BUCKET, second["revision"]))


def test_a_seeder_without_write_access_is_told_which_permission(capsys, tmp_path, mirror):
    server, keys = mirror
    model = write_tiny_model(str(tmp_path / "model"), seed=53)
    manifest = manifest_of(capsys, model)
    denied = run_module(capsys, **mirrored(server, keys["reader"], model, action="seed", name="other",
                                           revision=manifest["revision"], manifest=manifest["manifest"]))
    assert denied["failed"]
    assert denied["msg"].startswith("vllm_model_models (other).mirror: access to s3://%s/models/other/" % BUCKET)
    assert "s3:PutObject" in denied["msg"]
    assert keys["reader"]["secret_access_key"] not in json.dumps(denied)


@pytest.mark.parametrize("statuses, seeder", [
    ({"a": {"needed": False}, "b": {"needed": False}}, ""),
    ({"a": {"needed": True}, "b": {"needed": False}, "c": {"needed": True}}, "b"),
    ({"a": {"needed": True}, "b": {"needed": True}}, "a"),
    # A host whose status did not run (skipped, failed) counts as one that needs the model.
    ({"a": {"skipped": True}, "b": {"needed": False}}, "b"),
])
def test_the_seeder_is_a_host_that_holds_the_revision_else_the_first(statuses, seeder):
    assert vllm_model_seeder(statuses) == seeder
