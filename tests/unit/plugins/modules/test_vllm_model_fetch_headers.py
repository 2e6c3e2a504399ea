"""vllm_model_fetch with vllm_model_models[].headers: an HTTP(S) origin that needs credentials in a header (an API
gateway's key, a bearer token), as the issue asked instead of user:password@ in the URL. A real HTTP origin
(tests/unit/http_origin.py) answers 401 without the headers and sends the archive to another host:port with a
redirect, as an origin sends files to its CDN.

The headers go with every request to the source's origin (HEAD, SHA256SUMS, the ranged reads of small files and
safetensors headers, the downloads, the preflight's reach), never along the redirect and never to a SHA256SUMS URL
on another origin; their values are nowhere in the module's result (its invocation included), the state file or the
store; a rotated value is not a new revision. On the old code the key was refused as unknown, and such an origin
could not be placed at all."""

from __future__ import annotations

import hashlib
import json
import os
import tarfile

import pytest

from http_origin import http_origin
from model_fetch import run_module
from stand_ins.tiny_model import write_tiny_model
from test_vllm_model_fetch_serving import facts, fit
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_store as rules
from ansible_collections.arm_inference.vllm.plugins.modules import vllm_model_fetch

KEY = "k3y-never-shown-8d41c0"
BEARER = "Bearer b3arer-never-shown-27fa"
ROTATED = "k3y-rotated-never-shown-55e0"
HEADERS = {"X-Api-Key": KEY, "Authorization": BEARER}
SECRETS = (KEY, BEARER.split()[1], ROTATED)


@pytest.fixture()
def web(tmp_path):
    """tmp_path/web/tiny: a tiny model, its pins; tmp_path/web/tiny.tar.gz and SHA256SUMS listing it."""
    model = tmp_path / "web" / "tiny"
    write_tiny_model(str(model), seed=11)
    pins = dict((name, hashlib.sha256((model / name).read_bytes()).hexdigest()) for name in sorted(os.listdir(model)))
    with tarfile.open(tmp_path / "web" / "tiny.tar.gz", "w:gz") as tar:
        tar.add(model, arcname="tiny")
    digest = hashlib.sha256((tmp_path / "web" / "tiny.tar.gz").read_bytes()).hexdigest()
    (tmp_path / "web" / "SHA256SUMS").write_text("%s  tiny.tar.gz\n" % digest)
    return tmp_path / "web", pins


def _args(tmp_path, **args):
    return dict({"store": str(tmp_path / "store"), "name": "tiny", "keep": 2, "min_free_disk_gib": 0}, **args)


def _nowhere(tmp_path, result):
    """No secret in the module's whole JSON result, the state file or any file of the store."""
    text = json.dumps(result)
    assert not [secret for secret in SECRETS if secret in text], text
    for root, _dirs, files in os.walk(tmp_path / "store"):
        for name in files:
            data = open(os.path.join(root, name), "rb").read()
            assert not [secret for secret in SECRETS if secret.encode() in data], os.path.join(root, name)


def test_a_file_list_behind_a_key_is_placed_with_its_headers_and_never_shows_them(capsys, tmp_path, web):
    directory, pins = web
    with http_origin(directory, require=HEADERS) as server:
        source = server.url + "/tiny/"
        refused = run_module(capsys, **_args(tmp_path, source=source, sha256=pins))
        assert refused.get("failed") is True, refused
        assert refused["msg"].startswith("vllm_model_models (tiny).source: %s" % source), refused["msg"]
        assert "HTTP Error 401" in refused["msg"] and "\n" not in refused["msg"], refused["msg"]
        server.headers.clear()

        # With the fit to check, the small files and safetensors headers are read from the origin first (ranged).
        placed = run_module(capsys, **_args(tmp_path, source=source, sha256=pins, headers=HEADERS,
                                            fit=fit(facts("graviton4-c8g-16xlarge"))))
        assert placed.get("failed") is not True, placed
        assert placed["changed"] is True
        # Ansible's no_log on a mapping: the invocation shows the names, each value hidden.
        hidden = dict.fromkeys(HEADERS, "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER")
        assert placed["invocation"]["module_args"]["headers"] == hidden
        # Every request carried both (HEAD for sizes, the ranged reads of small files and headers, the downloads).
        methods = set()
        for method, path, sent in server.headers:
            assert sent.get("X-Api-Key") == KEY and sent.get("Authorization") == BEARER, (method, path)
            methods.add((method, "Range" in sent))
        assert {("HEAD", False), ("GET", False), ("GET", True)} <= methods, methods
        store = tmp_path / "store" / "tiny"
        for name, digest in pins.items():
            assert hashlib.sha256((store / "current" / name).read_bytes()).hexdigest() == digest
        _nowhere(tmp_path, placed)
        assert placed["revision"] == rules.manifest_revision(dict((name, {"sha256": digest})
                                                                  for name, digest in pins.items()))

        # A wrong key: the origin's 401 repeats it in its reason phrase, the message does not (ansible's no_log).
        wrong = run_module(capsys, **_args(tmp_path, source=source, sha256=pins, revision="wrong",
                                           headers=dict(HEADERS, **{"X-Api-Key": ROTATED})))
        assert wrong.get("failed") is True and "HTTP Error 401" in wrong["msg"], wrong
        assert "X-Api-Key: ********" in wrong["msg"], wrong["msg"]
        _nowhere(tmp_path, wrong)

        # A rotated key is not a new revision: the record decides, the origin is asked nothing.
        server.require["X-Api-Key"] = ROTATED
        server.requests.clear()
        again = run_module(capsys, **_args(tmp_path, source=source, sha256=pins,
                                           headers=dict(HEADERS, **{"X-Api-Key": ROTATED})))
        assert again.get("failed") is not True, again
        assert again["changed"] is False and again["revision"] == placed["revision"]
        assert server.requests == []
        _nowhere(tmp_path, again)


def test_the_headers_never_follow_a_redirect_or_reach_another_origin(capsys, tmp_path, web):
    directory, _pins = web
    # The CDN: another port, serving the same directory without asking for anything; it records what it was sent.
    with http_origin(directory) as cdn, http_origin(directory, require=HEADERS) as origin:
        origin.redirect["/tiny.tar.gz"] = cdn.url + "/tiny.tar.gz"
        placed = run_module(capsys, **_args(tmp_path, source=origin.url + "/tiny.tar.gz", sha256sums="SHA256SUMS",
                                            headers=HEADERS))
        assert placed.get("failed") is not True, placed
        assert ("GET", "/tiny.tar.gz") in cdn.requests and ("HEAD", "/tiny.tar.gz") in cdn.requests
        assert ("GET", "/SHA256SUMS") in origin.requests
        for method, path, sent in cdn.headers:
            assert "X-Api-Key" not in sent and "Authorization" not in sent, (method, path, sent)
        for method, path, sent in origin.headers:
            assert sent.get("X-Api-Key") == KEY, (method, path)
        _nowhere(tmp_path, placed)

        # A SHA256SUMS URL on another origin (the CDN's) is asked without them.
        cdn.headers.clear()
        other = run_module(capsys, **_args(tmp_path, source=origin.url + "/tiny.tar.gz", revision="other",
                                           sha256sums=cdn.url + "/SHA256SUMS", headers=HEADERS))
        assert other.get("failed") is not True, other
        assert ("GET", "/SHA256SUMS") in [(method, path) for method, path, _sent in cdn.headers]
        assert not [sent for _method, _path, sent in cdn.headers if "X-Api-Key" in sent or "Authorization" in sent]


def test_the_preflights_reach_sends_them_too(capsys, tmp_path, web):
    directory, pins = web
    with http_origin(directory, require=HEADERS) as server:
        source = server.url + "/tiny/"
        refused = run_module(capsys, action="reach", **_args(tmp_path, source=source, sha256=pins))
        assert refused.get("failed") is True and "HTTP Error 401" in refused["msg"], refused
        server.headers.clear()
        answer = run_module(capsys, action="reach", **_args(tmp_path, source=source, sha256=pins, headers=HEADERS))
        assert answer.get("failed") is not True, answer
        assert answer["reached"] == "source" and answer["needed"] is True
        assert server.headers and all(sent.get("Authorization") == BEARER for _m, _p, sent in server.headers)
        _nowhere(tmp_path, answer)
    assert not os.path.exists(tmp_path / "store")


def test_the_revision_key_ignores_the_headers():
    model = rules.normalize_model({"name": "tiny", "source": "https://models.example/tiny/",
                                   "sha256sums": "SHA256SUMS", "headers": {"X-Api-Key": KEY}}, 0)
    rotated = dict(model, headers={"X-Api-Key": ROTATED})
    assert vllm_model_fetch._http_key(model) == vllm_model_fetch._http_key(rotated)
    assert KEY not in vllm_model_fetch._http_key(model)


@pytest.mark.parametrize("url, sent", [
    ("https://models.example/tiny/config.json", True),
    ("https://MODELS.example:443/other/SHA256SUMS", True),
    ("https://models.example:8443/tiny/config.json", False),
    ("http://models.example/tiny/config.json", False),
    ("https://cdn.example/tiny/config.json", False),
    ("https://models.example:x/tiny/config.json", False),
])
def test_only_the_sources_own_origin_gets_them(url, sent):
    model = {"source": "https://models.example/tiny/", "headers": {"X-Api-Key": KEY}}
    assert vllm_model_fetch._own_headers(model, url) == ({"X-Api-Key": KEY} if sent else {})


@pytest.mark.parametrize("headers, problem", [
    (["X-Api-Key: %s" % KEY], "must be a mapping"),
    ({"Authorization: Bearer %s" % KEY: "x"}, "not an HTTP token"),
    ({"X Api Key": "x"}, "not an HTTP token"),
    ({"X-Api-Key": KEY + "\r\nX-Evil: 1"}, "not one non-empty line"),
    ({"X-Api-Key": KEY + "\x00"}, "not one non-empty line"),
    ({"X-Api-Key": KEY + "\u00e9"}, "not one non-empty line"),
    ({"X-Api-Key": 12345}, "not one non-empty line"),
    ({"X-Api-Key": "  "}, "not one non-empty line"),
    ({"range": "bytes=0-"}, "sets range, which the module sets"),
    ({"Host": "evil.example"}, "sets Host"),
    ({"Content-Length": "0"}, "sets Content-Length"),
    ({"Transfer-Encoding": "chunked"}, "sets Transfer-Encoding"),
    ({"accept-encoding": "gzip"}, "sets accept-encoding"),
    ({"Connection": "close"}, "sets Connection"),
    ({"X-Api-Key": KEY, "x-api-key": KEY}, "twice"),
])
def test_bad_headers_are_refused_in_one_line_without_their_values(headers, problem):
    with pytest.raises(rules.ModelInputError) as refused:
        rules.normalize_model({"name": "tiny", "source": "https://models.example/tiny/", "sha256sums": "SHA256SUMS",
                               "headers": headers}, 0)
    message = str(refused.value)
    assert message.startswith("vllm_model_models[0] (tiny).headers: ") and problem in message, message
    assert KEY not in message and "\n" not in message and "(got " in message, message


@pytest.mark.parametrize("source", ["hf://org/tiny", "s3://models/tiny", "file:///srv/tiny", "controller:///srv/tiny"])
def test_only_http_sources_take_them(source):
    model = {"name": "tiny", "source": source, "revision": "a" * 40, "sha256sums": "SHA256SUMS",
             "headers": {"X-Api-Key": KEY}}
    if source.startswith("hf"):
        model.pop("sha256sums")
    with pytest.raises(rules.ModelInputError) as refused:
        rules.normalize_model(model, 0)
    assert str(refused.value).startswith("vllm_model_models[0] (tiny).headers: only applies to http:// and https://")
    assert KEY not in str(refused.value)


def test_the_checked_models_hide_them():
    from ansible_collections.arm_inference.vllm.plugins.filter.vllm_model import vllm_model_check

    checked = vllm_model_check({"vllm_model_models": [{"name": "tiny", "source": "https://models.example/tiny/",
                                                       "sha256sums": "SHA256SUMS", "headers": HEADERS}]})
    assert checked[0]["has_headers"] is True and "headers" not in checked[0]
    assert KEY not in json.dumps(checked)
