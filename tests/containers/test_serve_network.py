"""vllm_serve's units talk to loopback only (systemd IPAddressDeny=any, IPAddressAllow= from
vllm_serve_ip_address_allow), proven with systemd 252 in a Debian 12 container on this cgroup v1 "hybrid"
machine: systemd attaches its BPF filter in the unified hierarchy.

The unit's whole sandbox block (from NoNewPrivileges= to the end of [Service]) is taken from the role's
template and rendered with what module_utils/vllm_serve computes by default ("localhost": the unit tests of
serve_units check that); its command is a plain HTTP listener on
every interface, as torch.distributed's ports of a tensor-parallel instance are. The same unit without
the two IPAddress lines is the control: it is reachable on the container's own non-loopback address.
"""

from __future__ import annotations

import ipaddress
import re
import time
from pathlib import Path

import jinja2
import pytest

import harness
from harness import NATIVE, Container

TEMPLATE = Path(__file__).resolve().parents[2] / "roles" / "vllm_serve" / "templates" / "vllm-serve.service.j2"
PROBE = ("python3 -c \"import socket, sys\ns = socket.socket(); s.settimeout(3)\ntry:\n    s.connect((sys.argv[1], "
         "int(sys.argv[2]))); print('reached')\nexcept OSError as error: print('refused', type(error).__name__)\" ")


def sandbox(allow):
    """The role's sandbox lines, rendered for an instance whose IPAddressAllow= is `allow`."""
    text = TEMPLATE.read_text()
    block = text[text.index("NoNewPrivileges="):text.index("[Install]")]
    return jinja2.Template(block).render(item={"ip_address_allow": allow})


@pytest.fixture(scope="module")
def host():
    container = Container(harness.image_tag("debian12-%s" % NATIVE), systemd=True)
    deadline = time.time() + 60
    while time.time() < deadline and container.exec("systemctl is-system-running").stdout.strip() not in (
            "running", "degraded"):
        time.sleep(1)
    yield container
    container.remove()


def _start(host, name, port, lines):
    unit = "[Service]\nExecStart=/usr/bin/python3 -m http.server %d --bind 0.0.0.0\n%s" % (port, lines)
    host.exec("cat > /etc/systemd/system/%s.service <<'EOF'\n%sEOF\nsystemctl daemon-reload && systemctl start %s"
              % (name, unit, name))
    for dummy in range(30):
        if "reached" in host.exec(PROBE + "127.0.0.1 %d" % port).stdout:
            return
        time.sleep(0.5)
    raise AssertionError(host.exec("systemctl status %s; journalctl -u %s" % (name, name)).stdout)


def test_a_serve_unit_listening_everywhere_is_reachable_on_loopback_only(host):
    lines = sandbox("localhost")
    assert "IPAddressDeny=any\nIPAddressAllow=localhost\n" in lines
    address = host.exec("hostname -I").stdout.split()[0]
    assert not ipaddress.ip_address(address).is_loopback
    _start(host, "vllm-serve-probe", 8123, lines)
    _start(host, "vllm-serve-control", 8124, re.sub(r"(?m)^IPAddress.*\n", "", lines))
    shown = host.exec("systemctl show vllm-serve-probe -p IPAddressDeny -p IPAddressAllow").stdout
    assert sorted(re.search(r"IPAddressAllow=(.*)", shown).group(1).split()) == ["127.0.0.0/8", "::1/128"], shown
    # The listener is there (loopback above); from the host's other address it is not reachable, the control is.
    assert host.exec(PROBE + "%s 8123" % address).stdout.strip() == "refused TimeoutError"
    assert host.exec(PROBE + "%s 8124" % address).stdout.strip() == "reached"
    # Nor does the unit reach anything off loopback itself.
    outbound = host.exec("systemd-run --wait --pipe -q %s %s" % (
        " ".join("-p '%s'" % line for line in lines.splitlines() if line.startswith("IPAddress")),
        PROBE + "%s 8124" % address)).stdout.strip()
    assert outbound == "refused TimeoutError", outbound
