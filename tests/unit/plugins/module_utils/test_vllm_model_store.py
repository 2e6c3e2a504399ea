"""vllm_model's input rules and its store: one-line errors naming the variable, checksums, pruning."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess

import pytest

from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_store as rules

COMMIT = "0123456789abcdef0123456789abcdef01234567"
DIGEST = "a" * 64
HUB = {"name": "tiny", "source": "hf://org/tiny", "revision": COMMIT}
# <variable>: <what is wrong> (got <value>); <what to do>
ONE_LINE = re.compile(r"^\S[^\n]*: [^\n]+ \(got [^\n]*\); [^\n]+$")


def check(*models, **settings):
    variables = dict({"vllm_model_models": list(models)}, **settings)
    rules.check_vllm_model_variables(variables)


def refused(*models, **settings):
    with pytest.raises(rules.ModelInputError) as error:
        check(*models, **settings)
    message = str(error.value)
    assert ONE_LINE.match(message), message
    return message


def test_good_models_of_every_implemented_kind_pass():
    check(HUB,
          {"name": "gated", "source": "hf://meta/llama", "revision": "main", "token": "hf_secret",
           "include": ["*.safetensors", "*.json"], "exclude": ["original/*"], "endpoint": "https://mirror.example/hf"},
          {"name": "local", "source": "file:///srv/models/x", "sha256": {"model.safetensors": DIGEST}},
          {"name": "sums", "source": "file:///srv/models/y", "sha256sums": "SHA256SUMS", "revision": "v1"},
          {"name": "pushed", "source": "controller:///home/me/models/tiny"},
          {"name": "web", "source": "https://models.example.com/tiny/", "sha256sums": "SHA256SUMS"},
          {"name": "packed", "source": "https://models.example.com/tiny.tar.gz", "sha256sums": "SHA256SUMS"},
          {"name": "zipped", "source": "http://models.example.com/tiny.zip", "sha256": {"tiny.zip": DIGEST}})


def test_s3_model_is_normalized_and_its_secret_never_reaches_a_message():
    model = {"name": "s", "source": "s3://models.example/org/tiny/", "sha256sums": "SHA256SUMS", "region": "eu-west-1",
             "endpoint_url": "http://127.0.0.1:9000", "access_key_id": "AKIAEXAMPLEEXAMPLE01",
             "secret_access_key": "very/secret+key"}
    normalized = rules.normalized_models({"vllm_model_models": [model]})[0]
    assert (normalized["kind"], normalized["bucket"], normalized["prefix"]) == ("s3", "models.example", "org/tiny")
    assert normalized["region"] == "eu-west-1" and normalized["secret_access_key"] == "very/secret+key"
    assert rules.normalized_models({"vllm_model_models": [{"name": "b", "source": "s3://bucket",
                                                           "sha256": {"a": DIGEST}}]})[0]["prefix"] == ""
    for bad in ("very\nsecret", ""):
        message = refused(dict(model, secret_access_key=bad))
        assert ".secret_access_key: " in message and "very" not in message
    message = refused(dict(model, source="file:///m"))
    assert message.startswith("vllm_model_models[0] (s).region: only applies to s3://")
    message = refused({"name": "h", "source": "file:///m", "sha256sums": "S", "secret_access_key": "very/secret"})
    assert "(got (hidden))" in message and "very/secret" not in message


@pytest.mark.parametrize("suffix", [".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2", ".tbz2", ".zip", ".TAR.GZ"])
def test_an_http_url_ending_in_an_archive_suffix_is_an_archive(suffix):
    name = "qwen-0.5b" + suffix
    model = {"name": "q", "source": "https://models.example/qwen/%s?X-Signature=1" % name, "sha256": {name: DIGEST}}
    normalized = rules.normalized_models({"vllm_model_models": [model]})[0]
    assert (normalized["kind"], normalized["archive"]) == ("archive", name)
    # The name is the file name as sha256sum prints it: a percent-encoded URL names "qwen 0.5b.zip".
    assert rules.archive_name("http://h/m/qwen%200.5b.zip") == "qwen 0.5b.zip"
    for directory in ("https://models.example/qwen/", "https://models.example/qwen.tar.gz/", "https://h/.tar.gz"):
        assert rules.source_kind(directory) == "http" and rules.archive_name(directory) is None


@pytest.mark.parametrize("model, variable, words", [
    ({"name": "x", "source": "https://h/m/tiny.tar.gz", "sha256": {"config.json": DIGEST}},
     "vllm_model_models[0] (x).sha256", "must name the archive tiny.tar.gz, and only it (got [\"config.json\"])"),
    ({"name": "x", "source": "https://h/m/tiny.tar.gz", "sha256": {"tiny.tar.gz": DIGEST, "config.json": DIGEST}},
     "vllm_model_models[0] (x).sha256", "and only it"),
    ({"name": "x", "source": "https://h/m/tiny.zip"}, "vllm_model_models[0] (x)", "needs checksums"),
    ({"name": "x", "source": "https://h/m/tiny.zip", "sha256sums": "S", "include": ["*.json"]},
     "vllm_model_models[0] (x).include", "only applies to hf://"),
    ({"name": "x", "source": "https:///tiny.zip", "sha256sums": "S"}, "vllm_model_models[0] (x).source",
     "URL of the archive"),
    ({"name": "x", "source": "https://h/a/../tiny.zip", "sha256sums": "S"}, "vllm_model_models[0] (x).source",
     "URL of the archive"),
])
def test_bad_archive_sources_name_the_variable(model, variable, words):
    message = refused(model)
    assert message.startswith(variable + ": ") and words in message, message


def test_normalized_model_splits_kind_and_location():
    models = rules.normalized_models({"vllm_model_models": [HUB, {"name": "c", "source": "controller:///m"}]})
    assert [(model["kind"], model["location"]) for model in models] == [("hf", "org/tiny"), ("controller", "/m")]


@pytest.mark.parametrize("model, variable, words", [
    ({"name": "x", "source": "ftp://host/model"}, "vllm_model_models[0] (x).source", "unknown source scheme"),
    ({"name": "x", "source": "org/name"}, "vllm_model_models[0] (x).source", "unknown source scheme"),
    ({"name": "x", "source": ["hf://a/b", "file:///m"]}, "vllm_model_models[0] (x).source", "2 sources"),
    ({"name": "x", "source": "hf://a/b", "revision": "main", "path": "/m"}, "vllm_model_models[0]", "unknown keys"),
    ({"name": "bad/name", "source": "hf://a/b", "revision": "main"}, "vllm_model_models[0].name", "letters"),
    ({"name": "tab\tname", "source": "hf://a/b", "revision": "main"}, "vllm_model_models[0].name", "letters"),
    ({"name": "", "source": "hf://a/b", "revision": "main"}, "vllm_model_models[0].name", "letters"),
    ({"name": "x", "source": "hf://a/b"}, "vllm_model_models[0] (x).revision", "required"),
    ({"name": "x", "source": "hf://a/b", "revision": "../etc"}, "vllm_model_models[0] (x).revision", "not a commit"),
    ({"name": "x", "source": "hf://a/b", "revision": "ma in"}, "vllm_model_models[0] (x).revision", "not a commit"),
    ({"name": "x", "source": "hf://a b/c", "revision": "main"}, "vllm_model_models[0] (x).source", "repository id"),
    ({"name": "x", "source": "file:///m", "sha256": {"a.safetensors": "abc"}},
     "vllm_model_models[0] (x).sha256[a.safetensors]", "64 hexadecimal"),
    ({"name": "x", "source": "file:///m", "sha256": {"../a": DIGEST}}, "vllm_model_models[0] (x).sha256[../a]",
     "relative file name"),
    ({"name": "x", "source": "file:///m", "sha256": {"a": DIGEST}, "token": "hf_secret"},
     "vllm_model_models[0] (x).token", "only applies to hf://"),
    ({"name": "x", "source": "controller:///m", "endpoint": "https://h"}, "vllm_model_models[0] (x).endpoint",
     "only applies to hf://"),
    ({"name": "x", "source": "file:///m"}, "vllm_model_models[0] (x)", "needs checksums"),
    ({"name": "x", "source": "file://relative/m", "sha256": {"a": DIGEST}}, "vllm_model_models[0] (x).source",
     "absolute directory"),
    ({"name": "x", "source": "hf://a/b", "revision": "main", "sha256": {"a": DIGEST}},
     "vllm_model_models[0] (x).sha256", "does not apply to a hub model"),
    ({"name": "x", "source": "hf://a/b", "revision": "main", "include": "*.json"},
     "vllm_model_models[0] (x).include", "list of non-empty glob patterns"),
    ({"name": "x", "source": "hf://a/b", "revision": "main", "endpoint": "mirror.example"},
     "vllm_model_models[0] (x).endpoint", "http:// or https://"),
    ({"name": "x", "source": "s3://bucket/prefix"}, "vllm_model_models[0] (x)", "needs checksums"),
    ({"name": "x", "source": "s3://Bucket_1/prefix", "sha256sums": "SHA256SUMS"}, "vllm_model_models[0] (x).source",
     "S3 bucket"),
    ({"name": "x", "source": "s3://bucket/a/../b", "sha256sums": "SHA256SUMS"}, "vllm_model_models[0] (x).source",
     "'..' parts"),
    ({"name": "x", "source": "s3://bucket/m", "sha256sums": "S", "region": "Europe"}, "vllm_model_models[0] (x).region",
     "region name"),
    ({"name": "x", "source": "s3://bucket/m", "sha256sums": "S", "endpoint_url": "minio:9000"},
     "vllm_model_models[0] (x).endpoint_url", "http:// or https://"),
    ({"name": "x", "source": "s3://bucket/m", "sha256sums": "S", "access_key_id": "AKIAEXAMPLEEXAMPLE01"},
     "vllm_model_models[0] (x).secret_access_key", "go together"),
    ({"name": "x", "source": "s3://bucket/m", "sha256sums": "S", "access_key_id": "AK-1", "secret_access_key": "s"},
     "vllm_model_models[0] (x).access_key_id", "access key id"),
    ({"name": "x", "source": "https://h/m/", "sha256sums": "S", "region": "eu-west-1"},
     "vllm_model_models[0] (x).region", "only applies to s3://"),
    ({"name": "x", "source": "hf://a/b", "revision": "main", "secret_access_key": "s"},
     "vllm_model_models[0] (x).secret_access_key", "only applies to s3://"),
    ({"name": "x", "source": "https://example.com/models/m/"}, "vllm_model_models[0] (x)", "needs checksums"),
    ({"name": "x", "source": "https:///models/", "sha256": {"a": DIGEST}}, "vllm_model_models[0] (x).source",
     "URL of the directory"),
    ({"name": "x", "source": "https://h/m/", "sha256": {"a": DIGEST}, "token": "t"},
     "vllm_model_models[0] (x).token", "only applies to hf://"),
    ("hf://a/b", "vllm_model_models[0]", "must be a mapping"),
])
def test_bad_model_names_the_variable(model, variable, words):
    message = refused(model)
    assert message.startswith(variable + ": "), message
    assert words in message


@pytest.mark.parametrize("settings, variable", [
    ({"vllm_model_keep": 0}, "vllm_model_keep"),
    ({"vllm_model_keep": True}, "vllm_model_keep"),
    ({"vllm_model_store": "relative/dir"}, "vllm_model_store"),
    ({"vllm_model_store": "/var/lib"}, "vllm_model_store"),
    ({"vllm_model_min_free_disk_gib": -1}, "vllm_model_min_free_disk_gib"),
    ({"vllm_model_models": {"name": "x"}}, "vllm_model_models"),
])
def test_bad_settings_name_the_variable(settings, variable):
    with pytest.raises(rules.ModelInputError) as error:
        rules.check_vllm_model_variables(settings)
    assert str(error.value).startswith(variable + ": ")
    assert ONE_LINE.match(str(error.value))


def test_duplicate_names_are_refused():
    assert refused(HUB, dict(HUB)).startswith("vllm_model_models[1].name: repeats the name of entry 0")


def test_control_characters_are_shown_escaped_on_one_line():
    message = refused({"name": "x", "source": "hf://a/b\nfile:///etc", "revision": "main"})
    assert "\\x0a" in message and "\n" not in message


def test_a_token_never_reaches_a_message():
    for model in ({"name": "x", "source": "file:///m", "sha256": {"a": DIGEST}, "token": "hf_SECRET"},
                  {"name": "x", "source": "hf://a/b", "revision": "main", "token": "hf_SECRET", "bogus": 1},
                  {"name": "x", "source": "hf://a/b", "revision": "main", "token": "hf_SE\nCRET"}):
        assert "SECRET" not in refused(model) and "SE\\x0aCRET" not in refused(model)


def test_select_files_applies_include_then_exclude():
    names = ["config.json", "model.safetensors", "original/consolidated.pth", "tokenizer.json"]
    assert rules.select_files(names) == sorted(names)
    assert rules.select_files(names, ["*.json", "*.safetensors"]) == ["config.json", "model.safetensors",
                                                                      "tokenizer.json"]
    assert rules.select_files(names, None, ["original/*"]) == ["config.json", "model.safetensors", "tokenizer.json"]


def test_weight_bytes_counts_weight_files_only():
    sizes = {"config.json": 700, "model-00001-of-00002.safetensors": 5 << 30, "model-00002-of-00002.safetensors": 3,
             "tokenizer.json": 9000, "sub/pytorch_model.bin": 10}
    assert rules.weight_bytes(sizes) == (5 << 30) + 3 + 10


def test_parse_sha256sums_reads_sha256sum_output(tmp_path):
    (tmp_path / "a.json").write_text("{}")
    (tmp_path / "b.safetensors").write_bytes(b"\0" * 10)
    output = subprocess.run(["sha256sum", "a.json", "b.safetensors"], cwd=tmp_path, capture_output=True, text=True,
                            check=True).stdout
    manifest = rules.parse_sha256sums(output.replace("  b.", " *./b."), "SHA256SUMS")
    assert manifest == {"a.json": hashlib.sha256(b"{}").hexdigest(),
                        "b.safetensors": hashlib.sha256(b"\0" * 10).hexdigest()}
    with pytest.raises(rules.ModelStoreError, match="line 1 is not"):
        rules.parse_sha256sums("abc  a.json\n", "SHA256SUMS")
    with pytest.raises(rules.ModelInputError):
        rules.parse_sha256sums("%s  ../a.json\n" % DIGEST, "SHA256SUMS")


def test_git_blob_sha1_matches_git(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"hidden_size": 256}\n')
    expected = subprocess.run(["git", "hash-object", str(path)], capture_output=True, text=True, check=True)
    assert rules.git_blob_sha1(str(path)) == expected.stdout.strip()


def _model_dir(root, files):
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
    return dict((name, {"sha256": hashlib.sha256(content).hexdigest(), "size": len(content)})
                for name, content in files.items())


def test_verify_files_accepts_exact_and_refuses_altered_missing_extra(tmp_path):
    expected = _model_dir(tmp_path, {"config.json": b"{}", "sub/model.safetensors": b"weights"})
    assert rules.verify_files(str(tmp_path), expected) == expected
    (tmp_path / "sub" / "model.safetensors").write_bytes(b"weighTs")
    with pytest.raises(rules.ModelStoreError, match="sub/model.safetensors has sha256"):
        rules.verify_files(str(tmp_path), expected)
    (tmp_path / "sub" / "model.safetensors").write_bytes(b"weight")
    with pytest.raises(rules.ModelStoreError, match="truncated or corrupted"):
        rules.verify_files(str(tmp_path), expected)
    (tmp_path / "sub" / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "stray.bin").write_bytes(b"x")
    with pytest.raises(rules.ModelStoreError, match="unexpected stray.bin"):
        rules.verify_files(str(tmp_path), expected)
    os.unlink(tmp_path / "stray.bin")
    os.unlink(tmp_path / "config.json")
    with pytest.raises(rules.ModelStoreError, match="missing config.json"):
        rules.verify_files(str(tmp_path), expected)


def test_verify_files_refuses_symlinks(tmp_path):
    _model_dir(tmp_path, {"config.json": b"{}"})
    os.symlink("/etc/passwd", tmp_path / "passwd")
    with pytest.raises(rules.ModelStoreError, match="symlink"):
        rules.verify_files(str(tmp_path), {"config.json": {}})


def test_free_disk_check_gives_the_numbers():
    rules.check_free_disk("m", "r", 100, 2000, 1000, "/store")
    with pytest.raises(rules.ModelStoreError) as error:
        rules.check_free_disk("tiny", COMMIT, 5 << 30, 3 << 30, 1 << 30, "/var/lib/vllm-models")
    message = str(error.value)
    assert message.startswith("vllm_model_store: not enough free disk for tiny")
    assert "%d bytes free" % (3 << 30) in message and "needs %d bytes, 5.00 GiB" % (5 << 30) in message


def test_manifest_revision_depends_on_names_and_digests_only():
    one = {"a": {"sha256": DIGEST, "size": 1}, "b": {"sha256": "b" * 64, "size": 2}}
    two = {"b": {"sha256": "b" * 64}, "a": {"sha256": DIGEST}}
    assert rules.manifest_revision(one) == rules.manifest_revision(two)
    assert re.match(r"^sha256-[0-9a-f]{16}$", rules.manifest_revision(one))
    assert rules.manifest_revision(one) != rules.manifest_revision({"a": {"sha256": DIGEST}})


def _state(*placed):
    return {"refs": {}, "history": [],
            "revisions": dict((name, {"placed": "2026-01-%02dT00:00:00+00:00" % day}) for name, day in placed)}


def test_prune_keeps_newest_and_never_protected():
    state = _state(("r1", 1), ("r2", 2), ("r3", 3), ("r4", 4))
    assert rules.revisions_to_prune(state, 2, ["r4"]) == ["r2", "r1"]
    # The old current (still served until its server restarts) survives keep=1.
    assert rules.revisions_to_prune(state, 1, ["r4", "r1"]) == ["r3", "r2"]
    assert rules.revisions_to_prune(state, 10, ["r4"]) == []


def test_switch_current_is_a_relative_link_and_state_round_trips(tmp_path):
    (tmp_path / "r1").mkdir()
    (tmp_path / "r2").mkdir()
    assert rules.current_revision(str(tmp_path)) is None
    rules.switch_current(str(tmp_path), "r1")
    rules.switch_current(str(tmp_path), "r2")
    assert os.readlink(tmp_path / "current") == "r2" and rules.current_revision(str(tmp_path)) == "r2"
    state = rules.read_state(str(tmp_path))
    state["refs"]["main"] = COMMIT
    rules.write_state(str(tmp_path), state)
    assert rules.read_state(str(tmp_path))["refs"] == {"main": COMMIT}
    assert [entry for entry in os.listdir(tmp_path) if entry.startswith(".state.json.")] == []


def test_current_that_is_a_directory_is_refused(tmp_path):
    (tmp_path / "current").mkdir()
    with pytest.raises(rules.ModelStoreError, match="not a symlink"):
        rules.current_revision(str(tmp_path))


@pytest.mark.parametrize("state, words", [
    ({"refs": {"main": "../../escape"}}, "ref main: not a revision label"),
    ({"revisions": {"../x": {"revision": "../x", "kind": "http", "files": {}}}}, "revision: not a revision label"),
    ({"revisions": {"v1": {"revision": "v1", "kind": "hf", "files": {}}}}, "revision: not a hub commit"),
    ({"revisions": {"v1": {"revision": "v2", "kind": "http", "files": {}}}}, "the record of v1 is not"),
    ({"revisions": {"v1": {"revision": "v1", "kind": "http", "files": {"../../etc/x": {}}}}}, "got ../../etc/x"),
    ([], "is not a state record"),
])
def test_a_state_file_naming_paths_is_refused(tmp_path, state, words):
    (tmp_path / ".state.json").write_text(json.dumps(state))
    with pytest.raises(rules.ModelStoreError) as error:
        rules.read_state(str(tmp_path))
    assert words in str(error.value) and "move it away and re-run" in str(error.value)


def test_current_pointing_out_of_the_model_directory_is_refused(tmp_path):
    os.symlink("../elsewhere", tmp_path / "current")
    with pytest.raises(rules.ModelStoreError, match="not at a revision of the store"):
        rules.current_revision(str(tmp_path))
    with pytest.raises(rules.ModelStoreError, match="refusing to write or remove"):
        rules.switch_current(str(tmp_path), "../elsewhere")


@pytest.mark.parametrize("entry", ["../x", "..", ".", "", "a/b", "x\x00"])
def test_the_store_writes_and_removes_single_entries_of_the_model_directory_only(tmp_path, entry):
    (tmp_path / "x").mkdir()
    with pytest.raises(rules.ModelStoreError):
        rules.remove_entry(str(tmp_path / "model"), entry)
    assert (tmp_path / "x").is_dir()


def test_a_link_out_is_removed_as_a_link_and_refused_as_a_directory(tmp_path):
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "keep").write_text("x")
    (tmp_path / "model").mkdir()
    os.symlink(str(tmp_path / "outside"), tmp_path / "model" / "link")
    with pytest.raises(rules.ModelStoreError, match="outside"):
        rules.check_inside(str(tmp_path / "model"), str(tmp_path / "model" / "link"))
    rules.remove_entry(str(tmp_path / "model"), "link")
    assert (tmp_path / "outside" / "keep").exists() and not os.path.lexists(tmp_path / "model" / "link")


@pytest.mark.parametrize("name, good", [
    ("config.json", True), ("sub/model.safetensors", True), (".gitattributes", True),
    ("../x", False), ("/etc/passwd", False), ("a//b", False), ("./a", False), ("a/./b", False), ("a/..", False),
    ("a\x00b", False), ("a\nb", False), ("x" * 256, False), ("a/" * 600 + "b", False), ("", False), (None, False),
])
def test_file_names_from_outside_are_relative_and_normalised(name, good):
    assert rules.is_file_name(name) is good


@pytest.mark.parametrize("value, kind, good", [
    (COMMIT, "hf", True), (COMMIT.upper(), "hf", False), ("main", "hf", False), ("../" + COMMIT[3:], "hf", False),
    ("v1.0", None, True), ("sha256-0123456789abcdef", "http", True), ("../x", None, False), ("a/b", None, False),
    (".hidden", None, False), ("a..b", None, False), ("x" * 65, None, False), (None, None, False),
])
def test_revisions_from_outside_are_commits_or_strict_labels(value, kind, good):
    assert rules.is_revision(value, kind) is good


def test_intact_checks_recorded_sizes_and_leftovers_finds_partial_work(tmp_path):
    files = _model_dir(tmp_path / "r1", {"model.safetensors": b"12345"})
    record = {"files": files}
    assert rules.intact(str(tmp_path), "r1", record)
    (tmp_path / "r1" / "model.safetensors").write_bytes(b"123")
    assert not rules.intact(str(tmp_path), "r1", record)
    assert not rules.intact(str(tmp_path), "r9", record)
    (tmp_path / ".staging-r2").mkdir()
    (tmp_path / "orphan").mkdir()  # not named as the store names revisions: the operator's, left alone
    (tmp_path / "sha256-0123456789abcdef").mkdir()
    (tmp_path / COMMIT).mkdir()
    os.symlink("r1", tmp_path / "current")
    assert rules.leftovers(str(tmp_path), _state(("r1", 1))) == [".staging-r2", COMMIT, "sha256-0123456789abcdef"]
    # Never current's target, nor the revision current before the last switch.
    os.unlink(tmp_path / "current")
    os.symlink(COMMIT, tmp_path / "current")
    state = dict(_state(("r1", 1)), history=[{"revision": COMMIT, "previous": "sha256-0123456789abcdef"}])
    assert rules.leftovers(str(tmp_path), state) == [".staging-r2"]
    # No state file found by the run: staging only.
    assert rules.leftovers(str(tmp_path), _state(("r1", 1)), recorded=False) == [".staging-r2"]


def test_placed_fact_has_the_shape_vllm_serve_reads():
    fact = rules.placed_fact("/var/lib/vllm-models", "tiny", {"revision": COMMIT, "kind": "hf"})
    assert fact == {"path": "/var/lib/vllm-models/tiny/current", "revision": COMMIT,
                    "revision_path": "/var/lib/vllm-models/tiny/" + COMMIT, "source": "hf", "previous_revision": None}
    assert rules.placed_fact("/srv/m", "tiny", {"revision": "r2", "kind": "hf"}, "r1")["previous_revision"] == "r1"


def test_serving_layouts_are_the_instances_that_name_the_model():
    instances = [{"name": "a", "model": "tiny", "tensor_parallel_size": 2}, {"name": "b"},
                 {"name": "c", "model": "x", "dtype": "float32"}]
    assert rules.serving_layouts("tiny", instances, serve_model="tiny") == [
        {"variable": "vllm_serve_instances[0] (a)", "tensor_parallel_size": 2, "instances": 3, "dtype": None},
        {"variable": "vllm_serve_instances[1] (b)", "tensor_parallel_size": None, "instances": 3, "dtype": None}]
    # The instance's dtype: the weights are weighed at the dtype it serves them in.
    assert rules.serving_layouts("x", instances, serve_model="tiny") == [
        {"variable": "vllm_serve_instances[2] (c)", "tensor_parallel_size": None, "instances": 3, "dtype": "float32"}]
    # A model no instance names yet is weighed alone on the host.
    assert rules.serving_layouts("later", instances, serve_model="tiny") == [
        {"variable": "vllm_model_models (later)", "tensor_parallel_size": None, "instances": 1, "dtype": None}]
    assert rules.serving_layouts("later", None) == rules.serving_layouts("later", [])


@pytest.mark.parametrize("key, model", [
    ("source", {"name": "w", "source": "https://user:hunter2secret@models.example/tiny/", "sha256sums": "SHA256SUMS"}),
    ("source", {"name": "w", "source": "https://user:hunter2secret@models.example/tiny.tar.gz", "sha256sums": "S"}),
    ("endpoint", dict(HUB, name="w", endpoint="https://user:hunter2secret@hf-mirror.example")),
    ("sha256sums", {"name": "w", "source": "https://models.example/tiny/",
                    "sha256sums": "https://user:hunter2secret@models.example/SHA256SUMS"}),
    ("endpoint_url", {"name": "w", "source": "s3://models/tiny", "sha256sums": "S",
                      "endpoint_url": "https://key:hunter2secret@minio.example:9000"}),
])
def test_credentials_in_a_url_are_refused_and_never_shown(key, model):
    message = refused(model)
    assert message.startswith("vllm_model_models[0] (w).%s: carries credentials in the URL" % key), message
    assert "hunter2secret" not in message and "user" not in message.partition("(got ")[2].partition(")")[0]


def test_urls_are_redacted_for_messages_and_the_state_file():
    assert rules.redact_url("https://u:p@h.example:8443/a/b.tar.gz?X-Amz-Signature=s#f") == \
        "https://h.example:8443/a/b.tar.gz?(redacted)"
    assert rules.redact_url("https://h.example/a/") == "https://h.example/a/"
    assert rules.redact_url("config.json") == "config.json"
    assert rules.shown("https://h.example/m.zip?sig=secret") == "https://h.example/m.zip?(redacted)"


def _placed_revision(tmp_path):
    """A placed revision r1 of two files and its record (size, mtime, inode per file), as commit writes it."""
    root = tmp_path / "model" / "r1"
    root.mkdir(parents=True)
    (root / "config.json").write_text("{}")
    (root / "model.safetensors").write_bytes(b"\x01" * 64)
    files = dict((name, {"size": os.path.getsize(root / name)}) for name in ("config.json", "model.safetensors"))
    return root, {"files": rules.record_stats(str(root), files)}


def test_each_recorded_stat_alone_is_noticed(tmp_path):
    """Each of size, mtime and inode, changed while the other two stay as recorded, is found without reading a byte;
    so is a file removed."""
    root, record = _placed_revision(tmp_path)
    weights = root / "model.safetensors"
    model_dir = str(tmp_path / "model")
    assert rules.changes(model_dir, "r1", record) == []
    stat = weights.stat()
    with open(weights, "r+b") as handle:  # size: cut short, its mtime put back
        handle.truncate(32)
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert rules.changes(model_dir, "r1", record) == ["model.safetensors changed (size)"]
    weights.write_bytes(b"\x02" * 64)  # mtime: same size, other bytes
    assert rules.changes(model_dir, "r1", record) == ["model.safetensors changed (mtime)"]
    copy = root / "copy"
    copy.write_bytes(b"\x01" * 64)  # inode: the same bytes in another file renamed over it, its mtime put back
    os.utime(copy, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    os.rename(copy, weights)
    assert weights.stat().st_ino != record["files"]["model.safetensors"]["ino"]
    assert rules.changes(model_dir, "r1", record) == ["model.safetensors changed (ino)"]
    weights.unlink()
    assert rules.changes(model_dir, "r1", record) == ["model.safetensors removed"]
