"""Harness helpers: the Debian mirror from apt sources (one-line or deb822), and collection copies that would shadow the checkout."""

from __future__ import annotations

import os

import pytest

from harness import images, machine, namespaces, prepared

# /etc/apt/sources.list.d/debian.sources of our CI machines (deb822), with a node repository first.
DEB822 = """\
Types: deb
URIs: https://deb.nodesource.com/node_20.x
Suites: nodistro
Components: main

Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
"""

ONE_LINE = """\
# deb cdrom:[Debian GNU/Linux 12]/ bookworm main
deb http://security.debian.org/debian-security bookworm-security main
deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://ftp.de.debian.org/debian/ bookworm main contrib
"""


def test_deb822_picks_the_uri_serving_the_codename():
    assert machine.mirror_from_sources(DEB822, "bookworm") == "http://deb.debian.org/debian"


def test_one_line_format_with_options_skips_security():
    assert machine.mirror_from_sources(ONE_LINE, "bookworm") == "http://ftp.de.debian.org/debian/"


def test_no_match_returns_none():
    assert machine.mirror_from_sources(DEB822, "trixie") is None
    assert machine.mirror_from_sources("", "bookworm") is None


def test_recipes_hash_differently_and_stably():
    digests = {name: images.recipe_digest(name) for name in images.IMAGES}
    assert len(set(digests.values())) == len(digests)
    assert digests == {name: images.recipe_digest(name) for name in images.IMAGES}


def test_an_installed_copy_of_the_collection_is_reported_as_shadowing(tmp_path):
    installed = tmp_path / "user" / "ansible_collections" / "arm_inference" / "vllm"
    installed.mkdir(parents=True)
    (tmp_path / "system").mkdir()
    assert machine.shadowing_copies([tmp_path / "user", tmp_path / "system"]) == [installed]


def test_the_tools_cache_is_under_ansible_home(monkeypatch, tmp_path):
    monkeypatch.setenv("ANSIBLE_HOME", str(tmp_path))
    copy = tmp_path / "collections" / "ansible_collections" / "arm_inference" / "vllm"
    copy.mkdir(parents=True)
    assert machine.shadowing_copies() == [copy]


def test_a_link_to_this_checkout_is_not_shadowing(tmp_path):
    namespace = tmp_path / "ansible_collections" / "arm_inference"
    namespace.mkdir(parents=True)
    (namespace / "vllm").symlink_to(machine.REPO_ROOT)
    assert not machine.shadowing_copies([tmp_path])


def _prepared_inputs_tree(tmp_path, monkeypatch):
    (tmp_path / "roles" / "r" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "r" / "tasks" / "main.yml").write_text("---\n- name: one\n")
    (tmp_path / "playbooks").mkdir()
    (tmp_path / "playbooks" / "prepare.yml").write_text("---\n")
    (tmp_path / "ca.pem").write_text("ca\n")
    monkeypatch.setattr(prepared, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(prepared, "PREPARED_INPUTS", ["roles", "playbooks/prepare.yml"])
    monkeypatch.setattr(prepared, "HOST_CA_BUNDLE", str(tmp_path / "ca.pem"))


def test_prepared_image_digest_follows_its_inputs_and_nothing_else(tmp_path, monkeypatch):
    _prepared_inputs_tree(tmp_path, monkeypatch)
    first = prepared.prepared_inputs_digest("sha256:base1")
    assert prepared.prepared_inputs_digest("sha256:base1") == first
    (tmp_path / "README.md").write_text("not an input\n")
    (tmp_path / "roles" / "r" / "tasks" / "__pycache__").mkdir()
    (tmp_path / "roles" / "r" / "tasks" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    assert prepared.prepared_inputs_digest("sha256:base1") == first
    assert prepared.prepared_inputs_digest("sha256:base2") != first
    (tmp_path / "roles" / "r" / "tasks" / "main.yml").write_text("---\n- name: two\n")
    assert prepared.prepared_inputs_digest("sha256:base1") != first


def test_prepared_image_digest_sees_a_renamed_input(tmp_path, monkeypatch):
    _prepared_inputs_tree(tmp_path, monkeypatch)
    first = prepared.prepared_inputs_digest("sha256:base1")
    (tmp_path / "roles" / "r" / "tasks" / "main.yml").rename(tmp_path / "roles" / "r" / "tasks" / "other.yml")
    assert prepared.prepared_inputs_digest("sha256:base1") != first


def test_prepared_image_is_tagged_per_architecture(monkeypatch):
    monkeypatch.setattr(prepared, "native_arch", lambda: "amd64")
    assert prepared.prepared_image_tag() == "%s/debian12-amd64-prepared:latest" % images.IMAGE_PREFIX
    assert prepared.prepared_image_tag("arm64") == "%s/debian12-arm64-prepared:latest" % images.IMAGE_PREFIX


def test_prepared_image_of_an_unknown_architecture_is_refused_before_podman_runs(monkeypatch):
    def no_podman(*args, **kwargs):
        raise AssertionError("podman ran: %r" % (args,))

    monkeypatch.setattr(prepared.subprocess, "run", no_podman)
    with pytest.raises(SystemExit, match=r"architecture 'riscv64' \(known: amd64, arm64\)"):
        prepared.build_prepared_image("riscv64")


def test_a_cached_container_pid_holds_only_while_it_is_the_same_process(tmp_path, monkeypatch):
    """The namespaces cache names a process by PID and start time: a container recreated under the same name
    (its old first process gone, the PID perhaps reused) is looked up again."""
    monkeypatch.setattr(namespaces, "_CACHE", str(tmp_path))
    me = os.getpid()
    (tmp_path / "alive").write_text("%d %s\n" % (me, namespaces._started(me)))
    assert namespaces._cached("alive") == me
    (tmp_path / "reused").write_text("%d 1\n" % me)
    assert namespaces._cached("reused") is None
    (tmp_path / "garbled").write_text("not a pid\n")
    assert namespaces._cached("garbled") is None
    assert namespaces._cached("absent") is None


def test_a_command_enters_the_container_with_its_own_environment_only(monkeypatch):
    monkeypatch.setattr(namespaces, "container_process", lambda name: (4242, ["PATH=/usr/bin:/bin", "container=podman"]))
    command = namespaces.enter_command("box", ["sh", "-c", "true"])
    assert command[:3] == ["nsenter", "--target", "4242"]
    assert command[command.index("--") + 1:] == ["env", "-i", "PATH=/usr/bin:/bin", "container=podman", "sh", "-c", "true"]
    assert {"--mount", "--uts", "--ipc", "--net", "--pid"} <= set(command)
