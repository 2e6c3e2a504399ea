"""vllm_model_fetch's fleet mirror: the real boto3 against moto's S3 server (tests/stand_ins/s3_origin.py) with IAM
enforced. The controller publishes a controller:// directory once (action seed); hosts report whether they hold
it (status) and place it from the mirror (place with mirror_revision), verified against the seeder's checksums;
a re-run asks nothing; a tampered mirror object, a mirror that disagrees with what the seeder verified and a
seeder without write access each fail on one line naming the mirror, with the previous revision kept. Only the writer
(vllm_model_mirror_writer) writes: a seeder that is not it takes what the mirror holds with read-only keys, and refuses
what the mirror does not hold yet without asking the origin."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from ansible_collections.arm_inference.vllm.plugins.filter.vllm_model import vllm_model_seeder

from stand_ins.s3_origin import REGION, S3Origin
from stand_ins.tiny_model import write_tiny_model
from http_origin import http_origin  # noqa: E402
from model_fetch import run_module  # noqa: E402

BUCKET = "fleet-cache"


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    server = S3Origin().start()
    server.client().create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
    keys = dict((user, server.user(user, BUCKET, "models", actions)) for user, actions in (
        ("seeder", ["s3:GetObject", "s3:PutObject"]), ("reader", ["s3:GetObject"])))
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


@pytest.mark.parametrize("statuses, writer, seeder", [
    ({"a": {"needed": False}, "b": {"needed": False}}, "b", ""),
    # The writer seeds whenever it is in the batch: from its store when it holds the revision, else from the mirror
    # or the origin, even when another host holds one (that host could not write it).
    ({"a": {"needed": True}, "b": {"needed": False}, "c": {"needed": True}}, "c", "c"),
    ({"a": {"needed": True}, "b": {"needed": False}, "c": {"needed": False}}, "c", "c"),
    # Without it in the batch, a host that only reads: one that holds a revision, else the first.
    ({"a": {"needed": True}, "b": {"needed": False}, "c": {"needed": True}}, "z", "b"),
    ({"a": {"needed": True}, "b": {"needed": True}}, "z", "a"),
    ({"a": {"needed": True}, "b": {"needed": True}}, "", "a"),
    # A host whose status did not run (skipped, failed) counts as one that needs the model.
    ({"a": {"skipped": True}, "b": {"needed": False}}, "z", "b"),
])
def test_the_seeder_is_the_writer_else_a_host_that_holds_the_revision_else_the_first(statuses, writer, seeder):
    assert vllm_model_seeder(statuses, writer) == seeder


def test_a_host_whose_last_status_is_another_models_is_left_out():
    """The writer does not declare this model: its last status is another model's. It cannot seed this one (it
    never runs its seed), so a reader seeds; on the old code the writer was chosen and nobody seeded."""
    statuses = {"writer": {"needed": False, "name": "other"}, "b": {"needed": True, "name": "tiny"},
                "c": {"needed": False, "name": "tiny"}}
    assert vllm_model_seeder(statuses, "writer", "tiny") == "c"
    assert vllm_model_seeder(statuses, "c", "tiny") == "c"
    assert vllm_model_seeder({"writer": {"needed": True, "name": "other"}, "b": {"needed": False, "name": "tiny"}},
                             "writer", "tiny") == ""


def listed(server, keys, prefix):
    client = server.client(aws_access_key_id=keys["access_key_id"], aws_secret_access_key=keys["secret_access_key"])
    return sorted(item["Key"] for item in client.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", []))


def test_only_the_writer_writes_the_mirror(capsys, tmp_path, mirror):
    """vllm_model_mirror_writer (here host-1) alone uploads. A seeder that is not the writer, with keys that could
    write, refuses a revision the mirror does not hold before it asks the origin or changes anything; with read-only
    keys it takes a revision the mirror holds, verified against the source's pins, and leaves refs.json alone; a
    holder that is not the writer does not upload what it holds, nor adds its ref to refs.json. On the old code the
    first refusal placed from the origin and uploaded, and the read-only holder failed writing refs.json."""
    server, keys = mirror
    model = write_tiny_model(str(tmp_path / "model"), seed=57)
    pins = dict((name, hashlib.sha256(Path(model, name).read_bytes()).hexdigest()) for name in os.listdir(model))
    with http_origin(model) as origin:
        def seed(store, user, **extra):
            return run_module(capsys, **dict({
                "action": "seed", "name": "written", "source": origin.url + "/", "sha256": pins, "revision": "v1",
                "mirror": "s3://%s/models" % BUCKET, "region": REGION, "endpoint_url": server.endpoint,
                "store": str(tmp_path / store), "min_free_disk_gib": 0}, **dict(keys[user], **extra)))

        refused = seed("store-2", "seeder", mirror_writer="host-1")
        assert refused.get("failed") and refused["msg"] == (
            "vllm_model_models (written).mirror: s3://%s/models/written/v1/ is not in the mirror yet, and only "
            "vllm_model_mirror_writer (host-1) writes it, which is not in this batch of the play; run the play with "
            "host-1 in it first, or set vllm_model_mirror_writer to a host of this play that may write the mirror"
            % BUCKET), refused
        assert origin.requests == [] and listed(server, keys["seeder"], "models/written/") == []
        assert not (tmp_path / "store-2" / "written").exists()

        written = seed("store-1", "seeder")
        assert written.get("failed") is not True and written["seeded_from"] == "origin" and written["uploaded_bytes"]
        # The fleet's refs.json, as a seeder of another source left it: a reader may not add this source's ref.
        seeder = server.client(aws_access_key_id=keys["seeder"]["access_key_id"],
                               aws_secret_access_key=keys["seeder"]["secret_access_key"])
        seeder.put_object(Bucket=BUCKET, Key="models/written/refs.json", Body=b"{}")
        requests = len(origin.requests)
        taken = seed("store-3", "reader", mirror_writer="host-1")
        assert taken.get("failed") is not True, taken
        assert taken["seeded_from"] == "mirror" and taken["manifest"] == pins
        assert len(origin.requests) == requests  # the operator's sha256 are the pins: the origin is not asked
        assert seeder.get_object(Bucket=BUCKET, Key="models/written/refs.json")["Body"].read() == b"{}"

        # A host that holds v1, not the writer, and a mirror that does not hold it: nothing is uploaded.
        held = seed("store-1", "seeder", mirror_writer="host-1", mirror="s3://%s/models/other" % BUCKET)
        assert held.get("failed") and "s3://%s/models/other/written/v1/ is not in the mirror yet" % BUCKET \
            in held["msg"], held
        assert listed(server, keys["seeder"], "models/other/") == []
        # Check mode predicts it (the writer may publish it in an earlier batch of the same run): a warning, no refusal.
        predicted = seed("store-1", "seeder", mirror_writer="host-1", mirror="s3://%s/models/other" % BUCKET,
                         _ansible_check_mode=True)
        assert predicted.get("failed") is not True and predicted["changed"] and predicted["manifest"] is None
        assert "only vllm_model_mirror_writer (host-1) writes it" in predicted["msg"], predicted  # and a warning
        # A host that holds v1, not the writer, read-only keys, the mirror holding v1 and refs.json not naming its ref:
        # it hands on the mirror's checksums and leaves refs.json to the writer (the old code wrote it: AccessDenied).
        holder = seed("store-1", "reader", mirror_writer="host-1")
        assert holder.get("failed") is not True and holder["seeded_from"] == "store" and holder["manifest"] == pins
        assert seeder.get_object(Bucket=BUCKET, Key="models/written/refs.json")["Body"].read() == b"{}"


def test_a_revision_a_seeder_hands_on_must_be_the_one_the_hosts_source_fixes(capsys, tmp_path, mirror):
    """A seeder that is not the writer (a host taken over) hands on another revision the mirror holds, with its genuine
    checksums: a host whose source fixes its revision (here the operator's label v2) refuses it, naming the mirror."""
    server, keys = mirror
    model = write_tiny_model(str(tmp_path / "model"), seed=58)
    manifest = manifest_of(capsys, model)
    run_module(capsys, **mirrored(server, keys["seeder"], model, action="seed", name="fixed", revision="v1",
                                  manifest=manifest["manifest"]))
    sums = dict((name, entry["sha256"]) for name, entry in manifest["manifest"].items())
    refused = run_module(capsys, **mirrored(server, keys["reader"], model, name="fixed", store=str(tmp_path / "store"),
                                            revision="v2", manifest=manifest["manifest"], mirror_revision="v1",
                                            mirror_manifest=sums))
    assert refused.get("failed") and refused["msg"].startswith(
        "vllm_model_models (fixed).mirror: the seeder's result names revision v1, but this host's source leads to v2"), \
        refused
    assert not (tmp_path / "store" / "fixed" / "current").exists()
