"""vllm_model_fetch trusts the operator's CA bundle (a TLS-intercepting proxy's CA) for HTTPS and S3 downloads.

A CA made here signs a certificate for 127.0.0.1; Python's http.server serves a model over TLS with it, and
moto's S3 server (tests/stand_ins/s3_origin.py) runs over TLS with it. Without the bundle both are refused
on one line (the certificate does not verify, nothing changes); with it both are placed and verified."""

from __future__ import annotations

import datetime
import functools
import hashlib
import http.server
import ipaddress
import os
import ssl
import threading
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from stand_ins.s3_origin import REGION, S3Origin
from stand_ins.tiny_model import write_tiny_model
from model_fetch import run_module  # noqa: E402


def _certificate(subject, issuer, public_key, signing_key, ca):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer).public_key(public_key)
               .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if not ca:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                        critical=False)
    return builder.sign(signing_key, hashes.SHA256())


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A proxy-like CA and a server certificate for 127.0.0.1 it signed: (ca.pem, server.pem, server.key)."""
    root = tmp_path_factory.mktemp("pki")
    ca_key, server_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test intercepting proxy CA")])
    ca = _certificate(ca_name, ca_name, ca_key.public_key(), ca_key, True)
    server = _certificate(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]), ca_name,
                          server_key.public_key(), ca_key, False)
    (root / "ca.pem").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (root / "server.pem").write_bytes(server.public_bytes(serialization.Encoding.PEM))
    (root / "server.key").write_bytes(server_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return root


def https_origin(directory, pki):
    """Python's http.server serving directory over TLS with the certificate the test CA signed, in a thread."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(pki / "server.pem"), str(pki / "server.key"))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_https_and_s3_downloads_trust_the_bundle_given(capsys, tmp_path, pki):
    web = tmp_path / "web"
    model = write_tiny_model(str(web / "tiny"), seed=41)
    sums = {name: hashlib.sha256(Path(model, name).read_bytes()).hexdigest() for name in os.listdir(model)}
    server = https_origin(web, pki)
    s3 = S3Origin(tls=(str(pki / "server.pem"), str(pki / "server.key")), ca_bundle=str(pki / "ca.pem")).start()
    try:
        s3.put_model("models", "org/tiny", model)
        store = tmp_path / "store"
        https = {"store": str(store), "name": "web", "min_free_disk_gib": 0, "sha256": sums,
                 "source": "https://127.0.0.1:%d/tiny/" % server.server_address[1]}
        bucket = {"store": str(store), "name": "bucket", "min_free_disk_gib": 0, "sha256sums": "SHA256SUMS",
                  "source": "s3://models/org/tiny", "region": REGION, "endpoint_url": s3.endpoint,
                  "access_key_id": "AKIATESTTESTTEST0001", "secret_access_key": "any-while-iam-is-off"}
        for args, words in ((https, "vllm_model_models (web).source: https://127.0.0.1"),
                            (bucket, "vllm_model_models (bucket).endpoint_url: %s cannot be reached" % s3.endpoint)):
            refused = run_module(capsys, **args)
            assert refused["failed"] is True and words in refused["msg"], refused
            assert "CERTIFICATE_VERIFY_FAILED" in refused["msg"] or "certificate verify failed" in refused["msg"]
            assert not os.path.exists(store / args["name"] / "current")
        for args in (https, bucket):
            placed = run_module(capsys, ca_bundle=str(pki / "ca.pem"), **args)
            assert placed.get("failed") is not True, placed
            assert placed["changed"] is True
            for name, digest in sums.items():
                assert hashlib.sha256((store / args["name"] / "current" / name).read_bytes()).hexdigest() == digest
    finally:
        s3.stop()
        server.shutdown()
        server.server_close()


def test_the_hub_environment_points_hf_xet_at_the_bundle_alone():
    from ansible_collections.arm_inference.vllm.plugins.modules.vllm_model_fetch import hub_environment

    given = hub_environment("/srv/store", "/opt/model-tools/pip-ca-bundle.pem")
    assert given["SSL_CERT_FILE"] == "/opt/model-tools/pip-ca-bundle.pem" and given["SSL_CERT_DIR"] is None
    assert given["HF_HUB_DISABLE_TELEMETRY"] == "1" and given["HF_HOME"] == "/srv/store/.hf-home"
    assert given["HF_XET_CHUNK_CACHE_SIZE_BYTES"] == "0"  # no cache outside staging, where the cap's watch looks
    assert "SSL_CERT_FILE" not in hub_environment("/srv/store", None)
    assert "SSL_CERT_DIR" not in hub_environment("/srv/store", "")


# hf_xet (installed with huggingface_hub) asks a Xet CAS server for a file's reconstruction over its own HTTP client.
# The server below stands in for that CAS host (cas-server.xethub.hf.co behind a TLS-intercepting proxy): it only
# records the paths asked for over TLS with the proxy CA's certificate and answers 404, enough to see whether
# hf_xet's TLS handshake succeeded. hf_xet runs in a subprocess, as the module runs it: with the environment the
# module computes (hub_environment) or without the bundle.
XET_CLIENT = """
import sys, time, hf_xet
info = hf_xet.PyXetDownloadInfo(sys.argv[2], "a" * 64, 10)
try:
    hf_xet.download_files([info], sys.argv[1], ("token", int(time.time()) + 600), None, None)
except Exception as error:
    print(type(error).__name__, error)
"""


def test_hf_xet_trusts_the_bundle_through_the_hub_environment(tmp_path, pki):
    import subprocess
    import sys

    from ansible_collections.arm_inference.vllm.plugins.modules.vllm_model_fetch import hub_environment

    pytest.importorskip("hf_xet")
    asked = []

    class CasStandIn(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            asked.append(self.path)
            self.send_error(404)

        do_POST = do_GET

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), CasStandIn)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(str(pki / "server.pem"), str(pki / "server.key"))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = "https://127.0.0.1:%d" % server.server_address[1]

    def run(ca_bundle):
        environment = dict(os.environ, HF_XET_CLIENT_RETRY_MAX_DURATION="1s")
        environment.pop("SSL_CERT_FILE", None)
        for name, value in hub_environment(str(tmp_path), ca_bundle).items():
            if value is None:
                environment.pop(name, None)
            else:
                environment[name] = value
        return subprocess.run([sys.executable, "-c", XET_CLIENT, endpoint, str(tmp_path / "out")], env=environment,
                              capture_output=True, text=True, timeout=120, check=False)

    try:
        refused = run(None)
        assert asked == [], asked  # the system's store does not hold the proxy's CA: no request got through TLS
        assert "error sending request" in refused.stdout, refused.stdout + refused.stderr
        trusted = run(str(pki / "ca.pem"))
        assert any("/reconstructions/" + "a" * 64 in path for path in asked), (asked, trusted.stdout)
        assert not any("telemetry" in path for path in asked), asked
    finally:
        server.shutdown()


# The preflight (plugins/action/input_check.py, _reach_models) asks each host before any host changes, so before the
# role has installed vllm_model_ca_bundle there: it hands the bundle's PEM text (ca_bundle_pem), which action reach
# writes to the module's temporary directory and trusts for its question. A fresh host has no tools venv yet (no hub
# client: the hub's API over plain HTTPS); a host with one asks through the client.
@pytest.mark.parametrize("without_client", [True, False])
def test_reach_trusts_the_pem_text_of_the_bundle_the_role_installs_later(capsys, tmp_path, pki, monkeypatch,
                                                                         without_client):
    import sys

    from stand_ins.hub_server import HubProcess, hub_repository

    commit = "c" * 40
    hub_repository(tmp_path / "hub", "org/tiny", {"main": commit}, seed=12)
    web = tmp_path / "web"
    model = write_tiny_model(str(web / "tiny"), seed=13)
    sums = {name: hashlib.sha256(Path(model, name).read_bytes()).hexdigest() for name in os.listdir(model)}
    server = https_origin(web, pki)
    hub = HubProcess(tmp_path / "hub", tls=(str(pki / "server.pem"), str(pki / "server.key")),
                     ca_bundle=str(pki / "ca.pem")).start()
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR", "HF_HOME"):  # what the hub client's environment sets, restored
        monkeypatch.setenv(name, "-")
        monkeypatch.delenv(name)
    if without_client:
        monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    pem = (pki / "ca.pem").read_text()
    sources = ({"source": "hf://org/tiny", "revision": "main", "endpoint": hub.endpoint},
               {"source": "https://127.0.0.1:%d/tiny/" % server.server_address[1], "sha256": sums})
    try:
        for source in sources:
            args = dict(action="reach", store=str(tmp_path / "store"), name="tiny", min_free_disk_gib=0, **source)
            refused = run_module(capsys, **args)
            assert refused.get("failed") is True, refused
            assert "CERTIFICATE_VERIFY_FAILED" in refused["msg"] or "certificate verify failed" in refused["msg"], \
                refused["msg"]
            assert refused["msg"].startswith("vllm_model_models (tiny).%s: " % (
                "endpoint" if "endpoint" in source else "source")), refused["msg"]
            reached = run_module(capsys, ca_bundle_pem=pem, **args)
            assert reached.get("failed") is not True, reached
            assert reached["needed"] is True and reached["reached"] == (
                "hub API" if without_client and "endpoint" in source else "source"), reached
            if "endpoint" in source:
                assert reached["revision"] == commit
        assert not os.path.exists(tmp_path / "store")
    finally:
        hub.stop()
        server.shutdown()
        server.server_close()
