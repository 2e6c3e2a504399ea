"""Contract with vLLM's real source distributions on PyPI: the role's source discovery and identity
run against vllm-0.32.0 and vllm-0.33.0 as published, without compiling anything.

Each sdist is looked up on PyPI's simple index and downloaded by the vllm_source_archive module's own
code (the sha256 the index link carries is checked against the pins below), then unpacked with the
module's install_tree. Both are kept under <checkout>/.cache/upstream-sdists/ (gitignored), so a
machine downloads once and later runs only read the index page and hash the cached files. The index
is read on every run: PyPI unreachable fails this test loudly; it is never skipped.

It lives in the unit stage (`make unit`): it needs the network but no container, it runs before
the slow stages and in seconds once cached, and the host's own CA bundle and proxy settings apply.
Deselect it offline with `-m "not upstream"`.
"""

from __future__ import annotations

import fcntl
import re
import shutil
import types

import pytest

from ansible_collections.arm_inference.vllm.plugins.module_utils import input_rules, vllm_build, vllm_source, vllm_tuning
from ansible_collections.arm_inference.vllm.plugins.modules import vllm_source_archive

from conftest import REPO_ROOT

pytestmark = pytest.mark.upstream

PYPI = "https://pypi.org/simple/"
CACHE = REPO_ROOT / ".cache" / "upstream-sdists"
# What PyPI publishes and what each release's requirement files pin (../shared notes, checked by hand).
SDISTS = {
    "0.32.0": {"sha256": "d2c957d5eee3d0985012151315ddc62cbe0cd368fc96a5fc3510438d9dddf2ad", "torch": "2.13.0+cpu"},
    "0.33.0": {"sha256": "f4c33c2503d52bb411146afa9618a4f48bed68912f617e6803ac8d76e4c74112", "torch": "2.14.0+cpu"},
}


def module_call(**params):
    """The arguments vllm_source_archive.run() reads from its AnsibleModule, as the role passes them."""
    defaults = {"src": None, "sha256": None, "sdist_name": None, "sdist_version": None, "index_url": None,
                "pip_config": None, "download_dir": None, "dest": None, "timeout": 120}
    return types.SimpleNamespace(params=dict(defaults, **params), check_mode=False)


@pytest.fixture(scope="module")
def fetched():
    """Each pinned sdist, looked up, downloaded (once per machine) and unpacked as the role does it. The unit stage
    runs on two xdist workers, each with this fixture of its own: one at a time (a lock file), so the second finds
    the first one's download and tree instead of unpacking into it at the same time."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return dict((version, vllm_source_archive.run(module_call(
            sdist_name="vllm", sdist_version=version, sha256=SDISTS[version]["sha256"], index_url=PYPI,
            download_dir=str(CACHE), dest=str(CACHE / ("vllm-%s" % version))))) for version in sorted(SDISTS))


@pytest.fixture(params=sorted(SDISTS))
def sdist(request, fetched):
    return request.param, fetched[request.param]


def test_the_sdist_comes_from_pypi_with_its_published_sha256(sdist):
    version, result = sdist
    assert result["sha256"] == SDISTS[version]["sha256"]
    assert result["label"] == "vllm-%s" % version and result["pkg_info"] is True
    assert re.match(r"^https://files\.pythonhosted\.org/.+/vllm-%s\.tar\.gz$" % re.escape(version), result["url"]), result["url"]
    assert vllm_source.file_sha256(result["archive"]) == SDISTS[version]["sha256"]
    assert vllm_source.read_marker(str(CACHE / ("vllm-%s" % version)))["sha256"] == SDISTS[version]["sha256"]


def test_requirement_files_rust_and_version_are_found_in_the_real_tree(sdist):
    version, result = sdist
    described = vllm_build.describe_source(str(CACHE / ("vllm-%s" % version)), "aarch64", "3.11")
    assert (described["build_requirements"], described["runtime_requirements"], described["rust_requirements"]) == (
        "requirements/build/cpu.txt", "requirements/cpu.txt", "requirements/build/rust.txt")
    assert described["requirement_files"] == [
        "requirements/build/cpu.txt", "requirements/cpu.txt", "requirements/common.txt", "requirements/build/rust.txt"]
    assert sorted(described["requirements_sha256"]) == ["build", "runtime", "rust"]
    # The Rust extensions: a pinned toolchain, and setuptools-rust among their build requirements.
    assert described["rust_toolchain"] == "1.95"
    rust = vllm_build.requirement_entries(str(CACHE / ("vllm-%s" % version)), described["rust_requirements"])
    assert "setuptools-rust" in [name for dummy, name, dummy, dummy in rust]
    assert described["version"] == version
    assert described["requires_python"] is not None and described["python_supported"] is True
    tree = str(CACHE / ("vllm-%s" % version))
    assert [vllm_build.describe_source(tree, "aarch64", python)["python_supported"] for python in ("3.10", "3.14", "3.15")] == [
        False, True, False]


def test_overrides_change_what_the_build_venv_installs_not_the_tree(sdist, tmp_path):
    version, result = sdist
    tree = tmp_path / "tree"
    shutil.copytree(CACHE / ("vllm-%s" % version) / "requirements", tree / "requirements")
    before = {path: path.read_bytes() for path in tree.rglob("*") if path.is_file()}
    overrides = {"triton": "", "torch": "torch==" + SDISTS[version]["torch"].split("+")[0]}
    copy = vllm_build.override_requirement_files(str(tree), "requirements/cpu.txt", overrides)
    assert copy == "requirements/cpu.arm-inference.txt"
    assert all(path.read_bytes() == data for path, data in before.items())
    names = [input_rules.requirement_name(line) for line in (tree / copy).read_text().splitlines()]
    # x86_64 pins triton-cpu by a GitHub URL: left out; the two torch lines (by markers) become one.
    assert "triton" in [input_rules.requirement_name(line) for line in (tree / "requirements/cpu.txt").read_text().splitlines()]
    assert "triton" not in names and names.count("torch") == 1
    assert overrides["torch"] in (tree / copy).read_text().splitlines()
    assert "-r common.arm-inference.txt" in (tree / copy).read_text().splitlines()
    assert (tree / "requirements/common.arm-inference.txt").read_text() == (tree / "requirements/common.txt").read_text()


@pytest.mark.parametrize("machine, local", [("aarch64", True), ("x86_64", True), ("ppc64le", False)])
def test_the_torch_pin_and_the_index_it_needs(sdist, machine, local):
    version, result = sdist
    torch = vllm_build.describe_source(str(CACHE / ("vllm-%s" % version)), machine)["torch"]
    pinned = SDISTS[version]["torch"] if local else SDISTS[version]["torch"].split("+")[0]
    assert torch["requirement"] == "torch==" + pinned and torch["version"] == pinned
    # A +cpu build is published only on PyTorch's CPU index; the plain version is on PyPI.
    assert torch["index"] == ("https://download.pytorch.org/whl/cpu" if local else None)
    assert torch["files"] == ["requirements/build/cpu.txt", "requirements/cpu.txt"]


def test_the_two_releases_have_different_identities_and_each_a_stable_one(fetched):
    identities = {}
    for version in sorted(fetched):
        tree = str(CACHE / ("vllm-%s" % version))
        digests = [vllm_build.describe_source(tree, "aarch64")["requirements_sha256"] for dummy in range(2)]
        assert digests[0] == digests[1]
        identities[version] = vllm_build.build_identity({"method": "sdist", "sha256": SDISTS[version]["sha256"],
                                                         "requirements": digests[0]})
    assert identities["0.32.0"] != identities["0.33.0"]


def test_a_tampered_copy_is_refused(sdist, tmp_path):
    version, result = sdist
    tampered = tmp_path / ("vllm-%s.tar.gz" % version)
    shutil.copyfile(result["archive"], tampered)
    with open(tampered, "r+b") as handle:
        handle.seek(1 << 20)
        byte = handle.read(1)
        handle.seek(1 << 20)
        handle.write(bytes([byte[0] ^ 0xFF]))
    # As vllm_build_method=archive hands a file to the module: refused before anything is unpacked.
    with pytest.raises(vllm_source.SourceError, match="has sha256 [0-9a-f]{64}, but %s was expected; it was not used"
                       % SDISTS[version]["sha256"]):
        vllm_source_archive.run(module_call(src=str(tampered), sha256=SDISTS[version]["sha256"],
                                            dest=str(tmp_path / "tree")))
    assert not (tmp_path / "tree").exists()
    # As a download: the partial file is removed and nothing is kept under the archive's name.
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    with pytest.raises(vllm_source.SourceError, match="but %s was expected" % SDISTS[version]["sha256"]):
        vllm_source_archive.download(tampered.as_uri(), SDISTS[version]["sha256"], str(downloads), None, 60)
    assert list(downloads.iterdir()) == []


def test_the_real_cmake_compiles_the_aarch64_features_the_build_class_names(sdist):
    version, result = sdist
    cmake = (CACHE / ("vllm-%s" % version) / "cmake" / "cpu_extension.cmake").read_text()
    # -march=armv8.2-a+... in the ASIMD branch, and the features appended to it afterwards.
    arm = cmake[cmake.index("elseif (ASIMD_FOUND)"):]
    arm = arm[:arm.index("list(APPEND CXX_COMPILE_FLAGS ${MARCH_FLAGS})")]
    features = set()
    for march in re.findall(r'"-march=armv8\.2-a((?:\+\w+)+)"', arm):
        features.update(march.strip("+").split("+"))
    features.update(re.findall(r'string\(APPEND MARCH_FLAGS "\+(\w+)"\)', arm))
    assert features == {"dotprod", "fp16"} | set(vllm_tuning.AARCH64_OPTIONAL_FEATURES), features
    # Each optional feature comes from the build host's /proc/cpuinfo (find_isa), not from a runtime check.
    for feature in vllm_tuning.AARCH64_OPTIONAL_FEATURES:
        assert re.search(r'find_isa\(\$\{CPUINFO\} "%s" ARM_%s_FOUND\)' % (feature, feature.upper()), cmake), feature


def test_the_real_cmake_builds_acl_with_nproc_jobs_not_max_jobs(sdist):
    """vllm_tuning.acl_build_jobs relies on this: the Arm Compute Library is built with -j$(nproc), which
    MAX_JOBS does not reach and OMP_NUM_THREADS does (ProcessorCount runs nproc on Linux)."""
    version, result = sdist
    cmake = (CACHE / ("vllm-%s" % version) / "cmake" / "cpu_extension.cmake").read_text()
    acl = cmake[cmake.index("if(ASIMD_FOUND)\n        # Set number of parallel build processes"):]
    acl = acl[:acl.index("add_compile_definitions(VLLM_USE_ACL)")]
    assert "ProcessorCount(NPROC)" in acl
    assert re.search(r"--build build -- -j\$\{NPROC\}", acl)
    assert "MAX_JOBS" not in acl
