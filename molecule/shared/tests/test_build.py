"""Verify build.yml on the aarch64 container: the fixture vLLM tree (tests/fixtures/vllm_source/README.md
says what it stands in for) compiled with NEON through CMake/ninja, installed as a release that is
`current`, cached on the controller, and served by vllm_serve from its real path."""

from __future__ import annotations

import json
import os
import re

import test_site
from serve_checks import only_in_scenario

testinfra_hosts = test_site.testinfra_hosts

pytestmark = only_in_scenario("site", "only the site scenario builds the fixture vLLM")

ROOT = "/opt/vllm"


def _release(host):
    name = host.check_output("readlink %s/current" % ROOT)
    return name, json.loads(host.check_output("cat %s/%s/release.json" % (ROOT, name)))


def test_current_release_is_the_neon_build_of_the_pinned_tag(host):
    name, stamp = _release(host)
    assert re.fullmatch(r"releases/v0\.32\.0-[0-9a-f]{16}", name), name
    assert stamp["version"] == "0.32.0+cpu" and stamp["build_class"].startswith("aarch64-")
    probe = "import vllm._C as c; print(c.isa(), c.add([1, 2, 3, 4, 5], [1, 1, 1, 1, 1]), c.dot([1, 2], [3, 4]))"
    isa, rest = host.check_output("%s/current/venv/bin/python -I -c '%s'" % (ROOT, probe)).split(" ", 1)
    assert isa in ("neon", "neon-bf16", "neon-i8mm", "neon-bf16-i8mm") and rest == "[2.0, 3.0, 4.0, 5.0, 6.0] 11.0"
    assert isa == "-".join(["neon"] + [name for name in ("bf16", "i8mm") if name in stamp["build_class"].split("-")])


def test_build_log_shows_the_host_sized_compile(host):
    dummy, stamp = _release(host)
    log = host.check_output("cat %s/builds/%s/build.log" % (ROOT, stamp["identity"]))
    assert "fixture: VLLM_TARGET_DEVICE=cpu" in log and "compiler launcher=ccache" in log
    jobs = int(re.search(r"fixture: MAX_JOBS=(\d+)", log).group(1))
    assert 1 <= jobs <= int(host.check_output("nproc"))
    assert re.search(r"\[\d+/\d+\] Building CXX object CMakeFiles/_C\.dir/csrc/cpu/add\.cpp\.o", log)
    # The built tree is gone once the release is complete; the log and the wheel stay.
    assert not host.file("%s/builds/%s/src" % (ROOT, stamp["identity"])).exists
    assert host.file("%s/builds/%s/dist/%s" % (ROOT, stamp["identity"], stamp["wheel"])).exists


def test_wheel_is_cached_on_the_controller_under_its_class(host):
    dummy, stamp = _release(host)
    cache = os.path.join(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"], "vllm-wheels", stamp["build_class"], stamp["os"],
                         stamp["python"], stamp["identity"])
    with open(os.path.join(cache, "wheel.json"), encoding="utf-8") as handle:
        cached = json.load(handle)
    assert cached["wheel"] == stamp["wheel"] and cached["build_class"] == stamp["build_class"]
    assert os.path.getsize(os.path.join(cache, stamp["wheel"])) > 0


def test_the_unit_runs_the_release_not_the_symlink(host):
    name, dummy = _release(host)
    exec_start = host.check_output("systemctl show -P ExecStart vllm-serve-main.service")
    assert "%s/%s/venv/bin/python" % (ROOT, name) in exec_start, exec_start
