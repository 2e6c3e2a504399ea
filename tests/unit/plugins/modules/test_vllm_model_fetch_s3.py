"""vllm_model_fetch's S3 source: the real boto3 against moto's S3 server (tests/stand_ins/s3_origin.py) on
the loopback, with IAM enforced, so access is decided by a real policy. Placed and verified against the
SHA256SUMS object; a re-run with the server stopped asks nothing; access denied, an unreachable endpoint
and a corrupted object each fail on one line and leave the previous revision current, with no partial
directory."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from stand_ins.s3_origin import REGION, S3Origin, free_port
from stand_ins.tiny_model import write_tiny_model
from model_fetch import run_module  # noqa: E402
import published_samples
from ansible_collections.arm_inference.vllm.plugins.module_utils.host_facts import build_host_facts
from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_model_store import manifest_revision

BNB_CONFIG = Path(__file__).resolve().parents[2] / "samples" / "models" / "llama-3.1-8b-instruct-bnb-8bit" / "config.json"


@pytest.fixture(scope="module")
def origin(tmp_path_factory):
    root = tmp_path_factory.mktemp("s3")
    server = S3Origin(log=str(root / "moto.log")).start()
    models = {}
    for seed, label in enumerate(("v1", "v2", "bad"), 1):
        models[label] = write_tiny_model(str(root / label), seed=seed)
        server.put_model("models", "org/tiny/" + label, models[label])
    # "bad": an object replaced after its SHA256SUMS was written (a corrupted upload).
    server.client().put_object(Bucket="models", Key="org/tiny/bad/config.json", Body=b"{}")
    # "bnb": the published config.json of a bitsandbytes checkpoint (tests/unit/samples/models), whose weights were
    # replaced after its SHA256SUMS was written: a download of them would fail its checksum.
    models["bnb"] = write_tiny_model(str(root / "bnb"), seed=4)
    Path(models["bnb"], "config.json").write_bytes(BNB_CONFIG.read_bytes())
    server.put_model("models", "org/tiny/bnb", models["bnb"])
    server.client().put_object(Bucket="models", Key="org/tiny/bnb/model.safetensors", Body=b"not the weights")
    server.put_model("locked", "org/tiny/v1", models["v1"])
    keys = server.reader("models", "org/tiny")
    server.enforce_iam()
    yield server, keys, models
    server.stop()


def s3_args(server, keys, store, label, bucket="models", **extra):
    return dict({"store": str(store), "name": "tiny", "source": "s3://%s/org/tiny/%s" % (bucket, label),
                 "sha256sums": "SHA256SUMS", "region": REGION, "endpoint_url": server.endpoint,
                 "min_free_disk_gib": 0}, **dict(keys, **extra))


@pytest.mark.parametrize("change, expected", [
    # The IAM user's key id with another secret: S3 (moto with IAM enforced) answers SignatureDoesNotMatch.
    ({"secret_access_key": "not-the-secret-of-this-key"},
     "vllm_model_models (tiny).secret_access_key: is wrong: S3 rejected the request's signature for "
     "s3://models/org/tiny/v1/SHA256SUMS, so the secret does not belong to the access key id (got "
     "SignatureDoesNotMatch); set the secret_access_key issued with access_key_id"),
    # A key id the store does not know: InvalidAccessKeyId.
    ({"access_key_id": "AKIAUNKNOWNUNKNOWN00"},
     "vllm_model_models (tiny).access_key_id: is wrong: the S3 store knows no such access key id for "
     "s3://models/org/tiny/v1/SHA256SUMS (got InvalidAccessKeyId); set an access key id that exists on "),
])
def test_wrong_keys_name_the_key_not_a_missing_grant(capsys, tmp_path, origin, change, expected):
    # Before the test below, which restarts moto (its buckets and users are gone then).
    server, keys, dummy = origin
    result = run_module(capsys, **s3_args(server, dict(keys, **change), tmp_path / "store", "v1"))
    assert result.get("failed"), result
    assert result["msg"].startswith(expected), result["msg"]
    assert "grant" not in result["msg"] and "denied" not in result["msg"]
    assert keys["secret_access_key"] not in result["msg"] and change.get("secret_access_key", "-") not in result["msg"]


def test_a_quantization_vllm_serve_refuses_is_refused_from_its_config_before_the_weights(capsys, tmp_path, origin):
    # Before the test below, which restarts moto. config.json is read with a ranged GET and checked against the
    # SHA256SUMS object; the refusal is vllm_serve's, not the weights' checksum: they were never fetched.
    server, keys, dummy = origin
    fit = {"facts": build_host_facts(published_samples.load_sample("graviton4-c8g-16xlarge")),
           "instances": [{"name": "main"}], "serve_model": "tiny", "kv_cache_min_gib": 1}
    result = run_module(capsys, fit=fit, **s3_args(server, keys, tmp_path / "store", "bnb"))
    assert result.get("failed"), result
    assert result["msg"].startswith("vllm_serve_instances[0] (main).model: bitsandbytes checkpoints are not served by "
                                    "vLLM's CPU backend on Arm"), result["msg"]
    assert "Nothing was fetched; the previous revision (none) stays current." in result["msg"]
    assert not os.path.lexists(tmp_path / "store" / "tiny" / "current")


def interrupted(store, model, files):
    """What an interrupted run leaves for the revision of `model` (its SHA256SUMS): its staging directory, with
    files ({name: bytes}) as boto3 left them (it renames a file into place once it is complete)."""
    sums = dict((name, {"sha256": hashlib.sha256(Path(model, name).read_bytes()).hexdigest()})
                for name in os.listdir(model))
    staging = store / "tiny" / (".staging-" + manifest_revision(sums))
    staging.mkdir(parents=True, mode=0o700)
    for name, data in files.items():
        (staging / name).write_bytes(data)
    return staging


def gets(server, name):
    return [path for method, path in server.requests() if method == "GET" and path.split("?")[0].endswith("/" + name)]


def test_a_file_already_complete_in_staging_is_not_downloaded_again(capsys, tmp_path, origin):
    # Before the test below, which restarts moto.
    server, keys, models = origin
    store = tmp_path / "store"
    shard = Path(models["v2"], "model.safetensors").read_bytes()
    interrupted(store, models["v2"], {"model.safetensors": shard})
    before = len(gets(server, "model.safetensors")), len(gets(server, "config.json"))
    placed = run_module(capsys, **s3_args(server, keys, store, "v2"))
    assert placed.get("failed") is not True, placed
    assert placed["resumed_bytes"] == len(shard), placed
    assert len(gets(server, "model.safetensors")) == before[0], gets(server, "model.safetensors")  # not asked again
    assert len(gets(server, "config.json")) > before[1]  # the file that was missing was
    for name in os.listdir(models["v2"]):
        assert (store / "tiny" / "current" / name).read_bytes() == Path(models["v2"], name).read_bytes()


def test_a_same_size_staged_file_that_does_not_verify_is_refused_and_fetched_by_the_next_run(capsys, tmp_path, origin):
    """Its size is all the download skips it by: it is hashed and verified as every file is, refused (staging goes,
    nothing becomes current), and the next run downloads it from S3 and places it verified."""
    server, keys, models = origin
    store = tmp_path / "store"
    size = os.path.getsize(os.path.join(models["v2"], "model.safetensors"))
    interrupted(store, models["v2"], {"model.safetensors": b"\x07" * size})
    before = len(gets(server, "model.safetensors"))
    refused = run_module(capsys, **s3_args(server, keys, store, "v2"))
    assert refused.get("failed") is True, refused
    assert "model.safetensors has sha256 %s" % hashlib.sha256(b"\x07" * size).hexdigest() in refused["msg"], refused
    assert "stay in" not in refused["msg"] and not os.path.lexists(store / "tiny" / "current")
    assert not [name for name in os.listdir(store / "tiny") if name.startswith(".staging-")]
    assert len(gets(server, "model.safetensors")) == before
    placed = run_module(capsys, **s3_args(server, keys, store, "v2"))
    assert placed.get("failed") is not True and "resumed_bytes" not in placed, placed
    assert len(gets(server, "model.safetensors")) > before
    assert (store / "tiny" / "current" / "model.safetensors").read_bytes() == \
        Path(models["v2"], "model.safetensors").read_bytes()


def test_s3_model_placed_verified_rerun_offline_and_refusals_keep_the_previous(capsys, tmp_path, origin):
    server, keys, models = origin
    store = tmp_path / "store"
    placed = run_module(capsys, **s3_args(server, keys, store, "v1"))
    assert placed.get("failed") is not True, placed
    revision = placed["revision"]
    assert revision.startswith("sha256-") and placed["placed"]["source"] == "s3"
    for name in os.listdir(models["v1"]):
        want = hashlib.sha256(Path(models["v1"], name).read_bytes()).hexdigest()
        assert hashlib.sha256((store / "tiny" / "current" / name).read_bytes()).hexdigest() == want
    assert placed["weight_bytes"] == os.path.getsize(os.path.join(models["v1"], "model.safetensors"))
    # No secret in the module's result.
    assert keys["secret_access_key"] not in json.dumps(placed)

    def refused(label, message_part, **extra):
        result = run_module(capsys, **s3_args(server, keys, store, label, **extra))
        assert result["failed"] is True, result
        assert "\n" not in result["msg"] and message_part in result["msg"], result["msg"]
        assert keys["secret_access_key"] not in result["msg"]
        assert os.readlink(store / "tiny" / "current") == revision
        assert sorted(os.listdir(store / "tiny")) == [".state.json", "current", revision]
        return result["msg"]

    message = refused("v1", "access to s3://locked/org/tiny/v1/SHA256SUMS is denied (got AccessDenied)",
                      bucket="locked")
    assert message.startswith("vllm_model_models (tiny).source: ")
    closed = "http://127.0.0.1:%d" % free_port()
    message = refused("v2", "vllm_model_models (tiny).endpoint_url: %s cannot be reached" % closed,
                      endpoint_url=closed)
    message = refused("bad", "config.json has sha256")
    assert "the previous revision (%s) stays current" % revision in message

    server.stop()
    try:
        again = run_module(capsys, **s3_args(server, keys, store, "v1"))
    finally:
        server.start()
    assert again.get("failed") is not True and again["changed"] is False and again["revision"] == revision
