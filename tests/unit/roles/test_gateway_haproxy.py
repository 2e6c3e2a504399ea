"""vllm_gateway's HAProxy configuration, rendered from the role's template and run by Debian's own HAProxy
(2.6 on bookworm, what the hosts run; `make setup` installs it) on this machine, in front of a stand-in
vLLM (tests/stand_ins/openai_upstream.py) on 127.0.0.1. No container: HAProxy starts in well under a second.

The rendered configuration is the role's, with short timeouts (seconds instead of minutes) so that the
slow-client probes take seconds. Clients come from several loopback addresses (127.0.0.x) to be several
sources. Each probe says what it proves; docs/gateway.md states the limits these probes measure.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import shutil
import select
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import jinja2
import pytest
import yaml

from conftest import free_port, start_openai_stand_in
from ansible_collections.arm_inference.vllm.plugins.module_utils import host_ports, vllm_gateway
from ansible_collections.arm_inference.vllm.plugins.modules import vllm_gateway_probe

ROOT = Path(__file__).resolve().parents[3]
TEMPLATE = ROOT / "roles" / "vllm_gateway" / "templates" / "haproxy.cfg.j2"
SELF_SIGNED_TASKS = ROOT / "roles" / "vllm_gateway" / "tasks" / "self_signed.yml"
KEY = "6c7c6b5e209c56001c0f83c2c0bd64ab"
RATE_KEY = "f7b0626a65700b082e4f62bbbf66c766"
UPSTREAM_KEY = "u" * 24
ROUTES = ["/v1/chat/completions", "/v1/completions", "/v1/models"]
# The role's settings with the probes' short timeouts and small limits.
SETTINGS = {"address": "127.0.0.1", "metrics_address": "127.0.0.1", "metrics_allow": ["127.0.0.1/32"],
            "rate_limit_per_minute": 40, "max_request_mib": 16, "timeout": 8, "client_timeout": 2,
            "header_timeout": 2, "max_connections": 40, "connections_per_source": 5, "metrics_max_connections": 4,
            "concurrency_per_key": 2, "failed_keys_per_minute": 5}

pytestmark = pytest.mark.skipif(shutil.which("haproxy") is None and os.environ.get("CI") != "true",
                                reason="Debian's haproxy is not installed here (make setup installs it)")


def render(directory, settings, endpoints):
    """The role's template with the role's filter's values, as the template task renders it."""
    directory = Path(directory)
    config = vllm_gateway.gateway_config(endpoints, settings)
    environment = jinja2.Environment(trim_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    text = environment.from_string(TEMPLATE.read_text()).render(
        __vllm_gateway_config=config, _vllm_gateway_pem=directory / "gateway.pem",
        _vllm_gateway_routes_file=directory / "routes.map", _vllm_gateway_clients_map=directory / "clients.map",
        _vllm_gateway_upstream_map=directory / "upstream.map")
    (directory / "routes.map").write_text(config["route_map"])
    (directory / "clients.map").write_text(vllm_gateway.client_key_map(
        [{"name": "ops", "key": KEY}, {"name": "rate", "key": RATE_KEY}]))
    (directory / "upstream.map").write_text("vllm %s\n" % UPSTREAM_KEY)
    if not (directory / "gateway.pem").exists():
        make_self_signed(directory)
        (directory / "gateway.pem").write_text((directory / "cert.pem").read_text() + (directory / "key.pem").read_text())
    path = directory / "haproxy.cfg"
    path.write_text(text)
    return path


def _self_signed_task(name):
    """One task of the role's tasks/self_signed.yml: its command line and its condition, as the role has them."""
    return next(task for task in yaml.safe_load(SELF_SIGNED_TASKS.read_text()) if task["name"] == name)


def _self_signed_values(directory, days):
    return {"vllm_gateway_self_signed_days": days, "inventory_hostname": "gateway.test",
            "__vllm_gateway_san": vllm_gateway.certificate_names(["gateway.test", "localhost"], ["127.0.0.1", "::1"]),
            "_vllm_gateway_self_signed_key": str(directory / "key.pem"),
            "_vllm_gateway_self_signed_certificate": str(directory / "cert.pem")}


def _role_command(task_name, directory, days=2):
    """The argv of the role's command task, rendered with a test host's values."""
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined)
    return [environment.from_string(str(part)).render(**_self_signed_values(directory, days))
            for part in _self_signed_task(task_name)["ansible.builtin.command"]["argv"]]


def make_self_signed(directory, days=2):
    """cert.pem and key.pem in directory, made by the role's own openssl command (tasks/self_signed.yml)."""
    subprocess.run(_role_command("Make the self-signed certificate and key", directory, days), check=True,
                   capture_output=True)


def _settings(**changes):
    base = dict(SETTINGS, routes=ROUTES, extra_routes=[], port=free_port(), metrics_port=free_port(),
                peers_port=free_port())
    return dict(base, **changes)


INVENTORIES = {
    "defaults": dict(address="0.0.0.0", metrics_address="0.0.0.0", metrics_allow=["127.0.0.0/8", "::1/128"],
                     rate_limit_per_minute=600, max_request_mib=16, timeout=600, client_timeout=30, header_timeout=10,
                     max_connections=4096, connections_per_source=64, metrics_max_connections=64,
                     concurrency_per_key=64, failed_keys_per_minute=20),
    "ipv6-no-rate-limit-tls13": dict(address="::", metrics_address="::1", metrics_allow=["::1/128", "10.0.0.0/8"],
                                     rate_limit_per_minute=0, concurrency_per_key=0, tls_min_version="1.3"),
    # No network may scrape: every metrics connection is closed (and HAProxy does not warn about it).
    "no-metrics-networks": dict(metrics_allow=[]),
    "metrics-on-loopback": dict(address="0.0.0.0", metrics_address="127.0.0.1", connections_per_source=1,
                                extra_routes=["/v1/rerank", "/pooling"]),
}


@pytest.mark.parametrize("inventory", sorted(INVENTORIES))
def test_the_rendered_configuration_passes_haproxy_check(tmp_path, inventory):
    endpoints = [{"name": "main", "base_url": "http://127.0.0.1:8000", "model": "m"},
                 {"name": "second", "base_url": "http://127.0.0.1:8001", "model": "m"}]
    path = render(tmp_path, _settings(**INVENTORIES[inventory]), endpoints)
    check = subprocess.run(["haproxy", "-c", "-f", str(path)], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    # HAProxy warns about what it would silently change or ignore; the role's configuration has nothing of that.
    assert "WARNING" not in check.stdout + check.stderr, check.stdout + check.stderr


def _start_with_open_files(path, limit, port):
    """HAProxy on the rendered configuration with `limit` open files (soft and hard), as systemd gives a service
    whose LimitNOFILE= is above what PID 1 may grant: (exit status or None while serving, stderr)."""
    import resource

    process = subprocess.Popen(["haproxy", "-W", "-db", "-f", str(path)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)))
    deadline = time.time() + 10
    try:
        while process.poll() is None and time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return None, ""
            except OSError:
                time.sleep(0.1)
        return process.wait(timeout=5), process.stderr.read()
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=10)


@pytest.mark.skipif(host_ports.has_capability(Path("/proc/self/status").read_text(), host_ports.CAP_SYS_RESOURCE),
                    reason="with CAP_SYS_RESOURCE HAProxy raises its own hard limit")
def test_haproxy_starts_with_the_open_files_the_rule_asks_for_and_not_with_a_containers_4096(tmp_path):
    """The role's defaults (4096 + 64 slots): with the LimitNOFILE= the role renders HAProxy serves; with a 4096
    container's limit (what systemd lowers it to there) it exits, as the preflight rule says it would."""
    settings = _settings(**INVENTORIES["defaults"])
    path = render(tmp_path, settings, [{"name": "main", "base_url": "http://127.0.0.1:8000", "model": "m"}])
    need = vllm_gateway.gateway_config([], settings)["limit_nofile"]
    assert vllm_gateway.descriptor_problems(settings, need) == []
    assert vllm_gateway.descriptor_problems(settings, 4096)
    assert _start_with_open_files(path, need, settings["port"]) == (None, "")
    status, stderr = _start_with_open_files(path, 4096, settings["port"])
    assert status == 1 and "Cannot raise FD limit" in stderr and "limit is 4096" in stderr, (status, stderr)


class Gateway:
    """HAProxy in master-worker mode (as Debian's unit runs it: reload = SIGUSR2) and the stand-in."""

    def __init__(self, directory):
        self.directory = Path(directory)
        self.upstream_port = free_port()
        self.upstream, dummy = start_openai_stand_in(port=self.upstream_port)
        self.settings = _settings()
        self.endpoints = [{"name": "main", "base_url": "http://127.0.0.1:%d" % self.upstream_port, "model": "m"}]
        self.config = render(self.directory, self.settings, self.endpoints)
        self.cafile = str(self.directory / "cert.pem")
        self.process = subprocess.Popen(["haproxy", "-W", "-db", "-f", str(self.config)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        self.port, self.metrics_port = self.settings["port"], self.settings["metrics_port"]
        self.wait_ready()

    def wait_ready(self):
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                if self.request("GET", "/health", key=None, source="127.0.0.200")[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise AssertionError("HAProxy did not answer /health 200: %s" % self.process.stderr.read())

    def context(self):
        """What a client does with the role's self-signed certificate (vllm_chat_load, the engine tests, curl
        --cacert): it is the CA file, and the name checked is the address connected to (127.0.0.1)."""
        return ssl.create_default_context(cafile=self.cafile)

    def request(self, method, path, key=KEY, source="127.0.0.1", body=None, headers=None, timeout=15):
        connection = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context(),
                                                 source_address=(source, 0), timeout=timeout)
        try:
            headers = dict(headers or {})
            if key:
                headers.setdefault("Authorization", "Bearer " + key)
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def tls(self, source="127.0.0.1", alpn=("http/1.1",)):
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=15, source_address=(source, 0))
        context = self.context()
        context.set_alpn_protocols(list(alpn))
        return context.wrap_socket(raw, server_hostname="127.0.0.1")

    def upstream_requests(self, marker):
        with socket.create_connection(("127.0.0.1", self.upstream_port)) as raw:
            raw.sendall(b"GET /_stand_in/requests HTTP/1.0\r\n\r\n")
            answer = b"".join(iter(lambda: raw.recv(65536), b""))
        return [record for record in json.loads(answer.split(b"\r\n\r\n", 1)[1]) if marker in record["path"]]

    def reload(self):
        self.process.send_signal(signal.SIGUSR2)
        time.sleep(1.5)
        self.wait_ready()

    def stop(self):
        for process in (self.process, self.upstream):
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    running = Gateway(tmp_path_factory.mktemp("gateway"))
    yield running
    running.stop()


def closed_after(sock, limit):
    """Seconds until the peer closes sock (reads end or reset), at most limit; None if still open."""
    started = time.monotonic()
    sock.settimeout(limit)
    try:
        while sock.recv(65536):
            pass
    except socket.timeout:
        return None
    except (ConnectionResetError, ssl.SSLError):
        pass
    return time.monotonic() - started


def test_a_silent_connection_is_closed_after_the_client_timeout_not_the_generation_timeout(gateway):
    # A TCP connection that never starts its TLS handshake, and one that stops half-way through its ClientHello.
    idle = socket.create_connection(("127.0.0.1", gateway.port), source_address=("127.0.0.11", 0))
    half = socket.create_connection(("127.0.0.1", gateway.port), source_address=("127.0.0.11", 0))
    half.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    for sock in (idle, half):
        with sock:
            waited = closed_after(sock, SETTINGS["timeout"] + 2)
            assert waited is not None and waited < SETTINGS["client_timeout"] + 1.5, waited


def test_a_client_that_half_closes_mid_request_is_not_held(gateway):
    with gateway.tls(source="127.0.0.12") as sock:
        sock.sendall(b"POST /v1/completions?probe=fin HTTP/1.1\r\nHost: g\r\n")
        # The client's FIN: HAProxy has the rest of the request head's time at most, then closes.
        sock.shutdown(socket.SHUT_WR)
        waited = closed_after(sock, SETTINGS["timeout"] + 2)
    assert waited is not None and waited < SETTINGS["client_timeout"] + 1.5, waited


def test_slow_headers_are_cut_at_the_header_timeout(gateway):
    with gateway.tls(source="127.0.0.13") as sock:
        sock.sendall(b"POST /v1/completions?probe=slow-headers HTTP/1.1\r\nHost: g\r\n")
        started = time.monotonic()
        answer = b""
        # One header byte every half second: each keeps the client timeout alive, never the header timeout.
        for dummy in range(int(SETTINGS["timeout"] * 2)):
            try:
                sock.sendall(b"X")
            except OSError:
                break
            sock.settimeout(0.5)
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                continue
            except (ConnectionResetError, ssl.SSLError):
                break
            answer += chunk
            if not chunk or answer:
                break
        waited = time.monotonic() - started
    assert waited < SETTINGS["header_timeout"] + 1.5, waited
    assert not answer or answer.startswith(b"HTTP/1.1 408"), answer[:100]
    assert gateway.upstream_requests("probe=slow-headers") == []


def test_a_slow_body_is_cut_before_it_reaches_vllm(gateway):
    with gateway.tls(source="127.0.0.14") as sock:
        sock.sendall(b"POST /v1/completions?probe=slow-body HTTP/1.1\r\nHost: g\r\nAuthorization: Bearer %s\r\n"
                     b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"prompt\":" % KEY.encode())
        waited = closed_after(sock, SETTINGS["timeout"] + 2)
    assert waited is not None and waited < SETTINGS["client_timeout"] + 1.5, waited
    # The body is buffered before the request goes on: vLLM never holds a connection for a slow client.
    assert gateway.upstream_requests("probe=slow-body") == []


def test_one_source_cannot_hold_every_connection(gateway):
    held = [socket.create_connection(("127.0.0.1", gateway.port), source_address=("127.0.0.15", 0))
            for dummy in range(SETTINGS["connections_per_source"])]
    try:
        time.sleep(0.3)
        extra = socket.create_connection(("127.0.0.1", gateway.port), source_address=("127.0.0.15", 0))
        with extra:
            waited = closed_after(extra, 1.0)
        assert waited is not None and waited < 0.5, "the source's connection past the limit was not closed at once"
        # Another source is served meanwhile.
        assert gateway.request("GET", "/v1/models?probe=other-source", source="127.0.0.16")[0] == 200
    finally:
        for sock in held:
            sock.close()


def test_the_metrics_listener_cannot_take_the_tls_listeners_slots(gateway):
    # As many idle connections to the metrics listener, from an allowed source, as the TLS listener has slots.
    held = []
    try:
        for dummy in range(SETTINGS["max_connections"] + 2):
            try:
                held.append(socket.create_connection(("127.0.0.1", gateway.metrics_port), timeout=0.5))
            except OSError:
                # The metrics listener's slots and its backlog are full: the rest wait in the kernel.
                break
        assert len(held) > SETTINGS["metrics_max_connections"]
        time.sleep(0.3)
        assert gateway.request("GET", "/v1/models?probe=metrics-full", source="127.0.0.17", timeout=5)[0] == 200
    finally:
        for sock in held:
            sock.close()


def _metrics_answer(gateway, source):
    """What the metrics listener answers a scrape from `source` with; b"" when it closes (or resets) first."""
    try:
        with socket.create_connection(("127.0.0.1", gateway.metrics_port), source_address=(source, 0), timeout=2) as sock:
            sock.sendall(b"GET /gateway/metrics HTTP/1.0\r\n\r\n")
            return b"".join(iter(lambda: sock.recv(65536), b""))
    except OSError:
        return b""


def test_the_metrics_listener_closes_disallowed_sources_at_once(gateway):
    assert _metrics_answer(gateway, "127.0.0.18") == b""
    # An allowed source is answered (retried: the previous test's idle connections may still be closing).
    for dummy in range(10):
        answer = _metrics_answer(gateway, "127.0.0.1")
        if answer:
            break
        time.sleep(0.3)
    assert answer.startswith(b"HTTP/1.1 200") and b"haproxy_process" in answer, answer[:200]


def test_a_generation_silent_longer_than_the_client_timeout_completes(gateway):
    silent = SETTINGS["client_timeout"] + 1
    status, body = gateway.request("POST", "/v1/completions?probe=silent&silent=%s" % silent, body=b"{}",
                                   source="127.0.0.19", headers={"Content-Type": "application/json"})
    assert status == 200, body
    status, body = gateway.request("POST", "/v1/completions?probe=stream&stream=2&gap=%s" % silent, body=b"{}",
                                   source="127.0.0.19", headers={"Content-Type": "application/json"})
    assert status == 200 and body.count(b"data: ") == 2, body


def test_length_limits_hold_over_http1(gateway):
    with gateway.tls(source="127.0.0.20") as sock:
        sock.sendall(b"POST /v1/completions?probe=chunked HTTP/1.1\r\nHost: g\r\nAuthorization: Bearer %s\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n" % KEY.encode())
        assert sock.recv(65536).startswith(b"HTTP/1.1 411")
    with gateway.tls(source="127.0.0.20") as sock:
        sock.sendall(b"POST /v1/completions?probe=too-long HTTP/1.1\r\nHost: g\r\nAuthorization: Bearer %s\r\n"
                     b"Content-Length: %d\r\n\r\n" % (KEY.encode(), 16 * 1024 * 1024 + 1))
        assert sock.recv(65536).startswith(b"HTTP/1.1 413")
    assert gateway.upstream_requests("probe=chunked") == gateway.upstream_requests("probe=too-long") == []


def test_the_rate_limit_answers_429(gateway):
    statuses = [gateway.request("GET", "/v1/models?probe=rate", key=RATE_KEY, source="127.0.0.21")[0]
                for dummy in range(SETTINGS["rate_limit_per_minute"] + 2)]
    assert statuses[:SETTINGS["rate_limit_per_minute"]] == [200] * SETTINGS["rate_limit_per_minute"]
    assert statuses[-1] == 429, statuses


def _send_over_http2(sock, path, total, seconds=30):
    """A real HTTP/2 client (PyPI's h2) on a TLS connection that agreed on http/1.1: the preface, a POST
    without content-length and up to `total` body bytes as fast as flow control lets. Returns the first
    bytes the gateway answered and the body bytes sent."""
    connection = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    connection.initiate_connection()
    connection.send_headers(1, [(":method", "POST"), (":path", path), (":scheme", "https"),
                                (":authority", "gateway.test"), ("authorization", "Bearer " + KEY),
                                ("content-type", "application/json")])
    sock.sendall(connection.data_to_send())
    answer, sent, chunk = b"", 0, b"x" * 16384
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if sock.pending() or select.select([sock], [], [], 0 if sent < total else 0.2)[0]:
            try:
                data = sock.recv(65536)
            except (OSError, ssl.SSLError):
                break
            if not data:
                break
            answer += data[:4096] if len(answer) < 4096 else b""
            try:
                events = connection.receive_data(data)
            except h2.exceptions.ProtocolError:
                break  # not HTTP/2: the gateway answered in HTTP/1
            if any(isinstance(event, (h2.events.StreamReset, h2.events.StreamEnded, h2.events.ConnectionTerminated))
                   for event in events):
                break
        elif sent < total:
            size = min(len(chunk), total - sent, connection.local_flow_control_window(1))
            if size <= 0:
                select.select([sock], [], [], 0.2)
                continue
            connection.send_data(1, chunk[:size], end_stream=sent + size == total)
            sent += size
        else:
            continue
        try:
            sock.sendall(connection.data_to_send())
        except OSError:
            break
    return answer, sent


def test_the_http2_preface_is_refused_and_a_body_without_length_never_reaches_vllm(gateway):
    limit = SETTINGS["max_request_mib"] * 1024 * 1024
    with gateway.tls(source="127.0.0.22") as sock:
        assert sock.selected_alpn_protocol() == "http/1.1"
        answer, sent = _send_over_http2(sock, "/v1/completions?probe=h2", 64 * 1024 * 1024)
    reached = sum(record["body_bytes"] for record in gateway.upstream_requests("probe=h2"))
    assert reached < limit, "%d body bytes reached vLLM over HTTP/2 (%d sent)" % (reached, sent)
    assert gateway.upstream_requests("probe=h2") == []
    assert answer.startswith(b"HTTP/1.1 400"), answer[:100]


def test_counters_are_kept_across_a_reload(gateway):
    # After test_the_rate_limit_answers_429 the rate key is over its limit; a reload (as every key, route
    # or certificate change makes) hands the counter to the new process.
    gateway.reload()
    assert gateway.request("GET", "/v1/models?probe=after-reload", key=RATE_KEY, source="127.0.0.21")[0] == 429
    assert gateway.request("GET", "/v1/models?probe=after-reload", source="127.0.0.21")[0] == 200


def test_requests_in_flight_per_key_are_limited(gateway):
    from concurrent.futures import ThreadPoolExecutor

    limit = SETTINGS["concurrency_per_key"]
    with ThreadPoolExecutor(limit + 1) as pool:
        futures = []
        for index in range(limit + 1):
            futures.append(pool.submit(gateway.request, "POST", "/v1/completions?probe=in-flight&hold=1.5",
                                       body=b"{}", source="127.0.0.%d" % (40 + index)))
            time.sleep(0.2)
        statuses = sorted(future.result()[0] for future in futures)
    assert statuses == [200] * limit + [429], statuses
    # Finished requests free their places.
    assert gateway.request("GET", "/v1/models?probe=in-flight-after", source="127.0.0.39")[0] == 200


def test_only_a_bearer_key_is_a_key_and_wrong_keys_are_throttled_per_source(gateway):
    assert gateway.request("GET", "/v1/models?probe=bare", key=None, source="127.0.0.23",
                           headers={"Authorization": KEY})[0] == 401
    assert gateway.request("GET", "/v1/models?probe=basic", key=None, source="127.0.0.24",
                           headers={"Authorization": "Basic " + KEY})[0] == 401
    assert gateway.request("GET", "/v1/models?probe=trailing", key=None, source="127.0.0.24",
                           headers={"Authorization": "Bearer %s extra" % KEY})[0] == 401
    wrong = [gateway.request("GET", "/v1/models?probe=wrong", key="w" * 32, source="127.0.0.25")[0]
             for dummy in range(SETTINGS["failed_keys_per_minute"] + 1)]
    assert wrong == [401] * SETTINGS["failed_keys_per_minute"] + [429], wrong
    # The source waits even with a right key now; another source is not affected.
    assert gateway.request("GET", "/v1/models?probe=wrong", source="127.0.0.25")[0] == 429
    assert gateway.request("GET", "/v1/models?probe=wrong", source="127.0.0.26")[0] == 200
    assert gateway.upstream_requests("probe=bare") == gateway.upstream_requests("probe=basic") == []


def test_the_host_holds_only_key_digests_and_only_the_whole_key_opens(gateway):
    # Every file the role renders for HAProxy: no client key in any of them (vLLM's own key is in upstream.map).
    for path in gateway.directory.iterdir():
        if path.is_file():
            text = path.read_text(errors="replace")
            assert KEY not in text and RATE_KEY not in text, path.name
    lines = (gateway.directory / "clients.map").read_text().splitlines()
    assert lines == ["%s ops" % hashlib.sha256(KEY.encode()).hexdigest(),
                     "%s rate" % hashlib.sha256(RATE_KEY.encode()).hexdigest()]
    assert gateway.request("GET", "/v1/models?probe=whole-key", source="127.0.0.31")[0] == 200
    # One source each, so that the failed-key throttle (5 a minute) answers none of them.
    refused = {"another key": "941eeb2bdf0cb3dc6c976db09ca92cc3", "a prefix": KEY[:-1], "a suffix": KEY[1:],
               "the key and more": KEY + "0", "the key in capitals": KEY.upper(),
               "the digest from a leaked map file": lines[0].split()[0]}
    statuses = {what: gateway.request("GET", "/v1/models?probe=not-the-key", key=key, source="127.0.0.%d" % (50 + index))[0]
                for index, (what, key) in enumerate(sorted(refused.items()))}
    assert statuses == dict.fromkeys(refused, 401), statuses
    assert gateway.upstream_requests("probe=not-the-key") == []


def test_client_headers_vllm_trusts_never_reach_it(gateway):
    spoofed = {"X-Forwarded-For": "203.0.113.9", "Forwarded": "for=203.0.113.9", "X-Request-Id": "chosen-by-client",
               "X-data-parallel-rank": "1", "X-Real-IP": "203.0.113.9"}
    assert gateway.request("GET", "/v1/models?probe=spoof", source="127.0.0.27", headers=spoofed)[0] == 200
    [record] = gateway.upstream_requests("probe=spoof")
    headers = {name.lower(): value for name, value in record["headers"].items()}
    assert headers["x-forwarded-for"] == "127.0.0.27"
    assert "forwarded" not in headers and "x-data-parallel-rank" not in headers and "x-real-ip" not in headers
    assert len(headers["x-request-id"]) == 36 and headers["x-request-id"] != "chosen-by-client"
    assert headers["authorization"] == "Bearer " + UPSTREAM_KEY


@pytest.mark.parametrize("path", ["/tokenize", "/metrics", "/v1/load_lora_adapter", "/pause", "/v1/models/../../tokenize",
                                  "/V1/MODELS", "/v1/models/"])
def test_private_routes_are_not_forwarded(gateway, path):
    status, dummy = gateway.request("POST", path + "?probe=private", body=b"{}", source="127.0.0.28")
    assert status == 404
    assert gateway.upstream_requests("probe=private") == []


def test_each_route_takes_only_its_method(gateway):
    assert gateway.request("DELETE", "/v1/models?probe=method", source="127.0.0.29")[0] == 405
    assert gateway.request("GET", "/v1/chat/completions?probe=method", source="127.0.0.29")[0] == 405
    assert gateway.upstream_requests("probe=method") == []
    assert gateway.request("POST", "/v1/chat/completions?probe=method-ok", body=b"{}", source="127.0.0.29")[0] == 200


def test_every_answer_carries_hsts(gateway):
    connection = http.client.HTTPSConnection("127.0.0.1", gateway.port, context=gateway.context(),
                                             source_address=("127.0.0.30", 0), timeout=10)
    connection.request("GET", "/v1/models", headers={"Authorization": "Bearer " + KEY})
    response = connection.getresponse()
    assert response.status == 200 and response.getheader("Strict-Transport-Security") == "max-age=63072000"
    connection.close()


def test_a_tls_1_3_only_gateway_refuses_tls_1_2(tmp_path):
    endpoints = [{"name": "main", "base_url": "http://127.0.0.1:8000", "model": "m"}]
    settings = _settings(tls_min_version="1.3")
    path = render(tmp_path, settings, endpoints)
    process = subprocess.Popen(["haproxy", "-db", "-f", str(path)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
        context = ssl.create_default_context(cafile=str(tmp_path / "cert.pem"))
        context.check_hostname = False
        for dummy in range(50):
            try:
                with context.wrap_socket(socket.create_connection(("127.0.0.1", settings["port"]))) as sock:
                    assert sock.version() == "TLSv1.3"
                break
            except ConnectionRefusedError:
                time.sleep(0.1)
        context.maximum_version = ssl.TLSVersion.TLSv1_2
        with pytest.raises(ssl.SSLError):
            context.wrap_socket(socket.create_connection(("127.0.0.1", settings["port"])))
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_self_signed_certificate_is_a_leaf_clients_accept_as_their_ca_file(gateway, tmp_path):
    """The role's openssl command (tasks/self_signed.yml) made the certificate the gateway fixture serves; every
    probe above verified it as its CA file with Python's ssl. It cannot vouch for another name."""
    text = subprocess.run(["openssl", "x509", "-noout", "-text", "-in", gateway.cafile], capture_output=True, text=True,
                          check=True).stdout
    extensions = " ".join(text.split("X509v3 extensions:")[1].split())
    assert "X509v3 Basic Constraints: critical CA:FALSE" in extensions, extensions
    assert "X509v3 Key Usage: critical Digital Signature X509v3" in extensions, extensions
    assert "X509v3 Extended Key Usage: TLS Web Server Authentication" in extensions, extensions
    assert "IP Address:127.0.0.1" in extensions and "DNS:gateway.test" in extensions
    # curl, as an operator checks the gateway: the name it connects to is checked against the certificate.
    curl = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--cacert", gateway.cafile,
                           "https://127.0.0.1:%d/health" % gateway.port], capture_output=True, text=True, check=False)
    assert curl.stdout == "200", curl.stderr
    # Its key signs a certificate for another name: a client that trusts the gateway's certificate refuses it.
    subprocess.run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-subj", "/CN=bank.example", "-keyout", tmp_path / "other.key", "-out", tmp_path / "other.csr"],
                   check=True, capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", tmp_path / "other.csr", "-CA", gateway.cafile,
                    "-CAkey", gateway.directory / "key.pem", "-days", "1", "-out", tmp_path / "other.crt"],
                   check=True, capture_output=True)
    verify = subprocess.run(["openssl", "verify", "-CAfile", gateway.cafile, tmp_path / "other.crt"],
                            capture_output=True, text=True, check=False)
    assert verify.returncode != 0 and "invalid CA certificate" in verify.stdout + verify.stderr, verify


def _renewal_wanted(directory):
    """Whether the role would make the self-signed pair in directory again: its check command and the make task's
    condition, as tasks/self_signed.yml has them (the certificate's names unchanged)."""
    check = subprocess.run(_role_command("Check the self-signed certificate's remaining validity and that it is no CA",
                                         directory), capture_output=True, text=True, check=False)
    environment = jinja2.Environment(undefined=jinja2.StrictUndefined)
    environment.tests["changed"] = lambda result: result["changed"]
    condition = environment.compile_expression(_self_signed_task("Make the self-signed certificate and key")["when"])
    return bool(condition(__vllm_gateway_validity={"rc": check.returncode, "stdout": check.stdout},
                          __vllm_gateway_names_changed=False))


def test_a_ca_certificate_an_earlier_version_made_is_made_again_as_a_leaf(tmp_path):
    # What the role made before: a CA that could sign for any name.
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                    "-days", "400", "-subj", "/CN=gateway.test", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,digitalSignature,keyCertSign",
                    "-addext", "extendedKeyUsage=serverAuth", "-keyout", tmp_path / "key.pem", "-out", tmp_path / "cert.pem"],
                   check=True, capture_output=True)
    assert _renewal_wanted(tmp_path)
    make_self_signed(tmp_path, days=400)
    assert not _renewal_wanted(tmp_path)
    # A leaf close to its end is made again too (2 days left, 30 wanted).
    make_self_signed(tmp_path, days=2)
    assert _renewal_wanted(tmp_path)


def test_the_role_s_probe_passes_through_the_real_gateway_and_names_a_key_that_does_not(gateway, tmp_path):
    """vllm_gateway_probe (service.yml's one probe) against Debian's HAProxy with this test's configuration: /health,
    the refusal without a key, and a listed key reaching the upstream; an unlisted one is named."""
    key_file = tmp_path / "probe.key"
    key_file.write_text(KEY + "\n")
    params = {"base_url": "https://127.0.0.1:%d" % gateway.port, "health_route": "/health",
              "probe_key_file": str(key_file), "upstreams": True, "retries": 3, "delay": 1}
    result, failure = vllm_gateway_probe.probe(params)
    assert failure is None and (result["health"], result["without_key"], result["with_probe_key"]) == (200, 401, 200)
    key_file.write_text("not-a-listed-key-5e11\n")
    result, failure = vllm_gateway_probe.probe(params)
    assert result["with_probe_key"] == 401 and failure.startswith(
        "vllm_gateway: a listed key (the role's probe key) got 401 at https://127.0.0.1:%d/v1/models" % gateway.port)
    # Without instances behind it, only the refusal is asked (the key file is not even read).
    result, failure = vllm_gateway_probe.probe(dict(params, upstreams=False, probe_key_file=str(tmp_path / "none")))
    assert failure is None and (result["health"], result["without_key"], result["with_probe_key"]) == (None, 401, None)
