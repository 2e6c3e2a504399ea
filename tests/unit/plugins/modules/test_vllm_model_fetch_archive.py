"""vllm_model_fetch places an HTTP(S) archive: a real HTTP origin (Python's http.server on the loopback) serves a
tar.gz of a tiny model (tests/stand_ins/tiny_model.py) under one top directory and a SHA256SUMS file beside it.

Placed: each extracted file recorded with its sha256 and size, no archive left in the store; a re-run asks the
origin nothing; a corrupted archive, a sums file that does not list the archive, and a model whose members turn
out too large for the host's memory or disk (known only once the archive is read) each fail on one line with the
previous revision current and nothing left behind."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tarfile
from pathlib import Path

import pytest
from ansible.module_utils.basic import AnsibleModule

import published_samples
from http_origin import http_origin
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_info as info
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_store as rules
from ansible_collections.arm_inference.vllm.plugins.module_utils.host_facts import build_host_facts

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "stand_ins"))
from tiny_model import write_tiny_model  # noqa: E402
from model_fetch import run_module  # noqa: E402

ZEROS = 64 << 20  # weights that compress to almost nothing: the archive's size says little about them


def _pack(web, name, model_dir, top="tiny"):
    """web/name: a tar.gz of model_dir under top/; its line appended to web/SHA256SUMS. The archive's sha256."""
    with tarfile.open(web / name, "w:gz") as tar:
        tar.add(model_dir, arcname=top)
    digest = hashlib.sha256((web / name).read_bytes()).hexdigest()
    with open(web / "SHA256SUMS", "a", encoding="utf-8") as sums:
        sums.write("%s  %s\n" % (digest, name))
    return digest


@pytest.fixture()
def origin(tmp_path):
    web = tmp_path / "web"
    web.mkdir()
    for seed, name in ((1, "v1.tar.gz"), (2, "v2.tar.gz")):
        _pack(web, name, write_tiny_model(str(tmp_path / name.split(".", 1)[0]), seed=seed))
    with http_origin(web) as server:
        yield web, server, tmp_path


def _common(tmp_path, sums="SHA256SUMS"):
    return {"store": str(tmp_path / "store"), "name": "tiny", "sha256sums": sums, "keep": 2, "min_free_disk_gib": 0}


def test_an_archive_is_placed_file_by_file_and_a_rerun_asks_nothing(capsys, origin):
    web, server, tmp_path = origin
    url = server.url + "/"
    placed = run_module(capsys, source=url + "v1.tar.gz", **_common(tmp_path))
    assert placed.get("failed") is not True, placed
    model_dir = tmp_path / "store" / "tiny"
    revision = placed["revision"]
    assert revision == rules.manifest_revision({"v1.tar.gz": {"sha256": hashlib.sha256(
        (web / "v1.tar.gz").read_bytes()).hexdigest()}})
    assert placed["placed"]["source"] == "archive"
    # The top directory is stripped; the record holds each extracted file's sha256 and size, not the archive's.
    record = rules.read_state(str(model_dir))["revisions"][revision]
    for name in ("config.json", "model.safetensors", "tokenizer_config.json"):
        data = (tmp_path / "v1" / name).read_bytes()
        assert dict(record["files"][name], mtime_ns=0, ino=0) == {"sha256": hashlib.sha256(data).hexdigest(),
                                                                  "size": len(data), "mtime_ns": 0, "ino": 0}
    assert sorted(record["files"]) == sorted(os.listdir(tmp_path / "v1"))
    assert placed["total_bytes"] == sum(entry["size"] for entry in record["files"].values())
    assert sorted(os.listdir(model_dir)) == [".state.json", "current", revision]
    assert ("GET", "/SHA256SUMS") in server.requests and ("HEAD", "/v1.tar.gz") in server.requests
    server.requests.clear()
    again = run_module(capsys, source=url + "v1.tar.gz", **_common(tmp_path))
    assert again["changed"] is False and again["revision"] == revision
    assert server.requests == []


def test_a_corrupted_archive_and_an_unlisted_one_leave_the_previous_revision(capsys, origin):
    web, server, tmp_path = origin
    url = server.url + "/"
    first = run_module(capsys, source=url + "v1.tar.gz", **_common(tmp_path))
    model_dir = tmp_path / "store" / "tiny"
    data = (web / "v2.tar.gz").read_bytes()
    (web / "v2.tar.gz").write_bytes(data[:100] + bytes([data[100] ^ 1]) + data[101:])
    refused = run_module(capsys, source=url + "v2.tar.gz", **_common(tmp_path))
    assert refused["failed"] is True and "\n" not in refused["msg"]
    assert refused["msg"].startswith("tiny: v2.tar.gz has sha256 ")
    assert refused["msg"].endswith("a corrupted download or a wrong checksum; the previous revision (%s) stays current"
                                   % first["revision"])
    assert sorted(os.listdir(model_dir)) == [".state.json", "current", first["revision"]]
    assert os.readlink(model_dir / "current") == first["revision"]
    (web / "OTHER").write_text("%s  v1.tar.gz\n" % ("0" * 64))
    refused = run_module(capsys, source=url + "v2.tar.gz", **_common(tmp_path, sums=url + "OTHER"))
    assert refused["msg"] == ("vllm_model_models (tiny).sha256sums: %sOTHER does not list the archive v2.tar.gz (got "
                              "[\"v1.tar.gz\"]); add the archive's line, as sha256sum writes it in the archive's "
                              "directory" % url)
    # The same SHA256SUMS lists both archives: the re-run key names the archive, so the switch to v2 happens.
    (web / "v2.tar.gz").write_bytes(data)
    second = run_module(capsys, source=url + "v2.tar.gz", **_common(tmp_path))
    assert second["changed"] is True and second["revision"] != first["revision"], second
    assert sorted(os.listdir(model_dir)) == sorted([".state.json", "current", first["revision"], second["revision"]])


def test_members_too_large_for_the_host_are_refused_before_extraction(capsys, origin, monkeypatch):
    web, server, tmp_path = origin
    url = server.url + "/"
    heavy = write_tiny_model(str(tmp_path / "heavy"), seed=3)
    with open(os.path.join(heavy, "model.safetensors"), "ab") as handle:
        handle.write(b"\0" * ZEROS)
    _pack(web, "heavy.tar.gz", heavy)
    facts = build_host_facts(published_samples.load_sample("graviton4-c8g-16xlarge"))
    archive, weights = os.path.getsize(web / "heavy.tar.gz"), os.path.getsize(os.path.join(heavy, "model.safetensors"))
    # A headroom between the two: the archive's size fits the node, the members' weights do not.
    share = info.check_fit(facts, 0, memory_headroom_gib=0)["node_share_gib"]
    headroom = share - 1 - (archive + weights) / 2.0 / (1 << 30)
    assert info.check_fit(facts, archive, memory_headroom_gib=headroom)["checked"] is True
    with pytest.raises(Exception, match="needs"):
        info.check_fit(facts, weights, memory_headroom_gib=headroom)
    fit = {"facts": facts, "instances": [{"name": "main"}], "serve_model": "tiny", "kv_cache_min_gib": 1,
           "memory_headroom_gib": headroom}
    refused = run_module(capsys, source=url + "heavy.tar.gz", fit=fit, **_common(tmp_path))
    assert refused["failed"] is True, refused
    assert refused["msg"].startswith("tiny: vllm_serve_instances[0] (main): tiny at sha256-")
    assert refused["msg"].endswith("Weighed from the archive's members: nothing was extracted; the previous revision "
                                   "(none) stays current")
    assert os.listdir(tmp_path / "store" / "tiny") == []
    # Disk: twice the archive is free before the download, the extracted files need more than what is left.
    monkeypatch.setattr(rules, "free_bytes", lambda path: 3 * archive)
    refused = run_module(capsys, source=url + "heavy.tar.gz", **_common(tmp_path))
    assert refused["msg"].startswith("tiny: vllm_model_store: not enough free disk for tiny at sha256-"), refused
    files = sum(os.path.getsize(os.path.join(heavy, name)) for name in os.listdir(heavy))
    assert "needs %d bytes" % files in refused["msg"]
    assert os.listdir(tmp_path / "store" / "tiny") == []


def test_a_presigned_query_is_never_printed_nor_stored(capsys, origin, monkeypatch):
    """A presigned URL's query is a credential: the origin gets it, the state file, the error messages, the result's
    invocation and the host's journal (what AnsibleModule logs of its arguments) do not."""
    web, server, tmp_path = origin
    journal = []
    monkeypatch.setattr(AnsibleModule, "log", lambda module, message, log_args=None: journal.append(message))
    secret = "X-Amz-Signature=0123456789abcdef&X-Amz-Credential=AKIAEXAMPLE"
    digest = hashlib.sha256((web / "v1.tar.gz").read_bytes()).hexdigest()
    common = dict(_common(tmp_path), sha256sums=None, sha256={"v1.tar.gz": digest})
    placed = run_module(capsys, source=server.url + "/v1.tar.gz?" + secret, **common)
    assert placed.get("failed") is not True, placed
    assert ("GET", "/v1.tar.gz?" + secret) in server.requests
    # Nor the result's invocation (what -v shows and a registered result keeps).
    assert "X-Amz" not in json.dumps(placed) and placed["invocation"]["module_args"]["source"] != server.url, placed
    state = (tmp_path / "store" / "tiny" / ".state.json").read_text()
    assert "X-Amz" not in state and server.url + "/v1.tar.gz?(redacted)" in state
    refused = run_module(capsys, source=server.url + "/missing.tar.gz?" + secret,
                         **dict(common, sha256={"missing.tar.gz": digest}))
    assert refused["failed"] and "X-Amz" not in json.dumps(refused), refused
    assert journal and not [message for message in journal if "X-Amz" in message], journal
    assert refused["msg"].startswith("vllm_model_models (tiny).source: %s/missing.tar.gz?(redacted) cannot be fetched "
                                     "(got HTTPError: " % server.url), refused["msg"]


def test_a_member_under_the_name_the_download_uses_is_refused(capsys, origin):
    """Staging's .archive holds the download while it arrives (an interrupted run goes on from it): an archive whose
    members would be extracted there is refused before anything is extracted."""
    web, server, tmp_path = origin
    model_dir = write_tiny_model(str(tmp_path / "taken"), seed=4)
    os.makedirs(os.path.join(model_dir, ".archive"))
    with open(os.path.join(model_dir, ".archive", "archive"), "w", encoding="utf-8") as handle:
        handle.write("not the download")
    _pack(web, "taken.tar.gz", model_dir)
    refused = run_module(capsys, source=server.url + "/taken.tar.gz", **_common(tmp_path))
    assert refused["failed"] is True and "\n" not in refused["msg"], refused
    assert "member .archive uses the name .archive, which the store reserves for the download" in \
        refused["msg"], refused["msg"]
    assert os.listdir(tmp_path / "store" / "tiny") == []
