"""vllm_build's sdist and archive sources on a native systemd container: the fixture vLLM tree
(tests/fixtures/vllm_source, its README says what it stands in for) packed by
make_vllm_source_repo.py --archives as an sdist on a simple index and as a git-less tarball, served
over HTTP from inside the container. Builds, re-runs, and the refusals that come before a build."""

from __future__ import annotations

import hashlib
import re
import subprocess

import pytest

from build_checks import build, current, stamp, ROOT
from harness import REPO_ROOT, podman, prepared_host

PORT = 8099
SERVED = "/srv/vllm-sources"


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    directory = tmp_path_factory.mktemp("archives")
    subprocess.run(["python3", str(REPO_ROOT / "tests" / "fixtures" / "make_vllm_source_repo.py"), "--archives",
                    str(directory / "served"), str(directory / "repo.git")], check=True, capture_output=True, text=True)
    return directory / "served"


@pytest.fixture(scope="module")
def host(prepared_image, archives):
    container = prepared_host(prepared_image)
    try:
        podman("cp", str(archives), "%s:%s" % (container.name, SERVED))
        # An HTTP index and file server inside the host, as a mirror would be.
        served = container.exec("systemd-run --unit fixture-index python3 -m http.server %d --bind 127.0.0.1 --directory %s"
                                % (PORT, SERVED))
        assert served.returncode == 0, served.stderr
        yield container
    finally:
        container.remove()


def served_version(host):
    return host.exec("%s/current/venv/bin/python -I -c 'import vllm, vllm._C; print(vllm.__version__)'" % ROOT).stdout.strip()


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_an_sdist_from_the_index_builds_and_a_rerun_is_idle(host, archives, tmp_path):
    sdist = {"vllm_build_method": "sdist", "vllm_build_sdist": "vllm==0.32.1",
             "vllm_build_sdist_index_url": "http://127.0.0.1:%d/simple" % PORT}
    result, output = build(host, tmp_path, **sdist)
    assert result.returncode == 0, output[-3000:]
    release = current(host)
    assert re.fullmatch(r"releases/vllm-0\.32\.1-[0-9a-f]{16}", release), release
    assert served_version(host) == "0.32.1+cpu"
    source = stamp(host, release)["source"]
    assert source["method"] == "sdist" and source["sha256"] == sha256(archives / "vllm-0.32.1.tar.gz"), source
    log = host.exec("cat %s/builds/%s/build.log" % (ROOT, stamp(host, release)["identity"])).stdout
    assert "fixture: MAX_JOBS=" in log and "SETUPTOOLS_SCM_PRETEND_VERSION" not in log
    # The tree pins a Rust toolchain and Debian 12 packages no rustup: the build says what it lacks.
    assert "WITHOUT its optional Rust extensions" in output and "pins nightly-2026-03-01" in output, output[-3000:]
    assert stamp(host, release)["rust"] == ""

    result, output = build(host, tmp_path, **sdist)
    assert result.returncode == 0 and re.search(r"changed=0\s", output), output[-3000:]
    assert current(host) == release


def test_required_rust_extensions_without_rustup_are_refused_before_the_build(host, tmp_path):
    before = current(host)
    result, output = build(host, tmp_path, vllm_build_method="sdist", vllm_build_sdist="vllm==0.32.1", vllm_build_rust="required",
                           vllm_build_sdist_index_url="http://127.0.0.1:%d/simple" % PORT)
    assert result.returncode != 0
    assert ("has Rust extensions (rust-toolchain.toml pins nightly-2026-03-01) and vllm_build_rust=required, but the host has "
            "no rustup") in output, output[-3000:]
    assert "Start the build" not in output and current(host) == before


def test_an_sdist_the_index_lacks_is_named_with_what_it_has(host, tmp_path):
    before = current(host)
    result, output = build(host, tmp_path, vllm_build_method="sdist", vllm_build_sdist="vllm==0.99.0",
                           vllm_build_sdist_index_url="file://%s/simple" % SERVED)
    assert result.returncode != 0
    assert ("vllm_build_sdist: no source distribution of vllm==0.99.0 at file://%s/simple/vllm/ (sdists there: 0.32.1) "
            "(got 'vllm==0.99.0'); pick a version the index has" % SERVED in output), output[-3000:]
    assert current(host) == before


def test_an_sdist_whose_index_publishes_no_sha256_needs_a_pin(host, tmp_path):
    # A copy of the index page without the #sha256= fragments, as a plain mirror or find-links page is.
    made = host.exec("mkdir -p /srv/nohash/vllm && sed 's/#sha256=[0-9a-f]*//; s|\\.\\./\\.\\./|%s/|' %s/simple/vllm/index.html "
                     "> /srv/nohash/vllm/index.html" % (SERVED, SERVED))
    assert made.returncode == 0, made.stderr
    before = current(host)
    result, output = build(host, tmp_path, vllm_build_method="sdist", vllm_build_sdist="vllm==0.32.1",
                           vllm_build_sdist_index_url="file:///srv/nohash")
    assert result.returncode != 0
    assert ("vllm-0.32.1.tar.gz comes with no sha256 from its index (got ''); set vllm_build_archive_sha256 to the "
            "sdist's sha256" in output), output[-3000:]
    assert "Start the build" not in output and current(host) == before


def test_a_tarball_without_a_version_is_refused_before_the_build(host, archives, tmp_path):
    before = current(host)
    result, output = build(host, tmp_path, vllm_build_method="archive", vllm_build_archive=str(archives / "vllm-src-v0.32.1.tar.gz"))
    assert result.returncode != 0
    assert "has neither PKG-INFO (an sdist) nor git metadata" in output and "vllm_build_archive_version" in output, output[-3000:]
    assert "Start the build" not in output and current(host) == before


def test_an_archive_file_with_another_sha256_is_refused(host, archives, tmp_path):
    before = current(host)
    result, output = build(host, tmp_path, vllm_build_method="archive", vllm_build_archive=str(archives / "vllm-0.32.1.tar.gz"),
                           vllm_build_archive_sha256="0" * 64)
    assert result.returncode != 0
    assert "has sha256 %s, but vllm_build_archive_sha256 is %s" % (sha256(archives / "vllm-0.32.1.tar.gz"), "0" * 64) in output, output[-3000:]
    assert current(host) == before


def test_a_tarball_url_with_its_version_builds_a_release_of_its_own(host, archives, tmp_path):
    tarball = {"vllm_build_method": "archive", "vllm_build_archive": "http://127.0.0.1:%d/vllm-src-v0.32.1.tar.gz" % PORT,
               "vllm_build_archive_sha256": sha256(archives / "vllm-src-v0.32.1.tar.gz"), "vllm_build_archive_version": "0.32.1"}
    wrong = {**tarball, "vllm_build_archive_sha256": "f" * 64}
    before = current(host)
    result, output = build(host, tmp_path, **wrong)
    assert result.returncode != 0 and "but %s was expected; it was not used" % ("f" * 64) in output, output[-3000:]
    assert current(host) == before

    result, output = build(host, tmp_path, **tarball)
    assert result.returncode == 0, output[-3000:]
    release = current(host)
    assert re.fullmatch(r"releases/vllm-src-v0\.32\.1-[0-9a-f]{16}", release) and release != before, release
    assert served_version(host) == "0.32.1+cpu"
    log = host.exec("cat %s/builds/%s/build.log" % (ROOT, stamp(host, release)["identity"])).stdout
    assert "fixture: version 0.32.1 from SETUPTOOLS_SCM_PRETEND_VERSION" in log
    # The earlier sdist release is still there to roll back to.
    assert host.exec("ls %s/releases" % ROOT).stdout.count("vllm-0.32.1-") == 1
