"""The package rules: which OS packages build_deps, tcmalloc, python_venv and vllm_gateway ask for (from
their own vars/<os>.yml, rendered as the roles render them), under which setting a missing one is
reported, and what the check says when the package manager's answer cannot tell (no lists, a failed
refresh)."""

from __future__ import annotations

import re

import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

import input_rules_doc
from bad_inputs import VALID
from conftest import REPO_ROOT
from ansible_collections.arm_inference.vllm.plugins.action.input_check import package_vars
from ansible_collections.arm_inference.vllm.plugins.filter.platform import platform_support
from ansible_collections.arm_inference.vllm.plugins.module_utils import input_rules

PLATFORMS = sorted(path.stem for path in (REPO_ROOT / "roles" / "tcmalloc" / "vars").glob("*-*.yml"))
ROLE_DEFAULTS = {role: {name: entry["default"] for name, entry in spec.items() if "default" in entry}
                 for role, spec in input_rules_doc.specs(input_rules.PACKAGE_ROLES).items()}


def host_of(platform_key):
    """What the action knows of a host of this platform: its key and default Python."""
    distribution, version = platform_key.split("-")
    facts = {"system": "Linux", "architecture": "aarch64", "distribution": distribution,
             "distribution_major_version": version, "distribution_version": version,
             "os_family": "RedHat" if distribution in ("RedHat", "Amazon") else "Debian"}
    support = platform_support(facts)
    assert support["supported"] and support["key"] == platform_key, support
    return {"platform_key": platform_key, "default_python": support["default_python"]}


def requests(role, platform_key, **settings):
    host = host_of(platform_key)
    variables = dict(ROLE_DEFAULTS[role], **settings)
    written, rendered = package_vars(role, platform_key, input_rules.template_values(role, variables, host),
                                     Templar(loader=DataLoader()))
    return input_rules.role_packages(role, variables, host, written, rendered)


def test_every_platform_has_a_vars_file_per_package_role():
    assert len(PLATFORMS) == 6
    for role in input_rules.PACKAGE_ROLES:
        assert sorted(path.stem for path in (REPO_ROOT / "roles" / role / "vars").glob("*-*.yml")) == PLATFORMS


@pytest.mark.parametrize("platform_key", PLATFORMS)
@pytest.mark.parametrize("role", sorted(input_rules.PACKAGE_ROLES))
def test_every_name_renders_to_a_plain_package_name(role, platform_key):
    """Each template in the vars files reads only what the check renders it with."""
    asked = requests(role, platform_key, build_deps_rust_enabled=True)
    assert asked
    for name, setting in asked:
        assert input_rules.PACKAGE_NAME.match(name) and "{" not in name, name
        assert setting in (None, "build_deps_rust_enabled", "tcmalloc_variant", "vllm_gateway_enabled")


@pytest.mark.parametrize("platform_key,python", [("Debian-12", "3.11"), ("Debian-13", "3.13"), ("Ubuntu-22", "3.10"),
                                                 ("Ubuntu-24", "3.12"), ("RedHat-9", "3.11"), ("Amazon-2023", "3.11")])
def test_the_default_python_is_the_oses_and_a_chosen_one_is_the_settings(platform_key, python):
    suffix = "-devel" if platform_key in ("RedHat-9", "Amazon-2023") else "-dev"
    assert ("python%s%s" % (python, suffix), None) in requests("build_deps", platform_key)
    assert ("python3.12%s" % suffix, "build_deps_python_version") in requests(
        "build_deps", platform_key, build_deps_python_version="3.12")
    assert ("python%s" % python, None) in requests("python_venv", platform_key)
    chosen = requests("python_venv", platform_key, python_venv_python_version="3.12")
    assert ("python3.12", "python_venv_python_version") in chosen
    # acl is the role's own on every platform, whatever the Python.
    assert ("acl", None) in chosen


def test_build_deps_asks_for_its_lists_in_order_the_rust_ones_only_when_enabled_and_the_extras():
    asked = requests("build_deps", "Debian-12")
    names = [name for name, dummy in asked]
    assert names[:3] == ["build-essential", "ca-certificates", "ccache"]
    assert names[-3:] == ["gcc-12", "g++-12", "python3.11-dev"]
    assert "protobuf-compiler" not in names
    rust = requests("build_deps", "Debian-13", build_deps_rust_enabled=True)
    assert [entry for entry in rust if entry[1] == "build_deps_rust_enabled"] == [
        ("protobuf-compiler", "build_deps_rust_enabled"), ("libssl-dev", "build_deps_rust_enabled"),
        ("rustup", "build_deps_rust_enabled")]
    extra = requests("build_deps", "Debian-12", build_deps_extra_packages=["gdb", "-o=x", "git"])
    # git is the role's own already (asked once); an option is never asked (its own rule refuses it).
    assert extra[-1] == ("gdb", "build_deps_extra_packages")
    assert [name for name, dummy in extra].count("git") == 1
    assert "-o=x" not in [name for name, dummy in extra]


def test_a_malformed_python_asks_for_nothing_of_it():
    for version in ("3.9", "three", "3"):
        names = [name for name, dummy in requests("python_venv", "Debian-12", python_venv_python_version=version)]
        assert names == ["acl"]


@pytest.mark.parametrize("platform_key,variant,package", [
    ("Debian-12", "minimal", "libtcmalloc-minimal4"), ("Debian-13", "full", "libgoogle-perftools4t64"),
    ("Ubuntu-24", "minimal", "libtcmalloc-minimal4t64"), ("RedHat-9", "full", "gperftools-libs")])
def test_tcmalloc_asks_for_its_variants_package(platform_key, variant, package):
    assert requests("tcmalloc", platform_key, tcmalloc_variant=variant) == [(package, "tcmalloc_variant")]


@pytest.mark.parametrize("platform_key", PLATFORMS)
def test_the_gateway_asks_for_its_packages_under_its_enabling_setting(platform_key):
    # /bin/kill, which haproxy.service reloads with: procps on Debian and Ubuntu, util-linux (always there) on EL.
    kill = ("procps",) if platform_key.startswith(("Debian", "Ubuntu")) else ()
    expected = [(name, "vllm_gateway_enabled") for name in ("haproxy", "openssl") + kill]
    assert requests("vllm_gateway", platform_key) == expected


def test_a_disabled_gateway_installs_nothing_and_is_not_asked_for():
    roles = ["build_deps", "vllm_serve", "vllm_gateway"]
    assert input_rules.installing_roles(roles, {"vllm_gateway_enabled": True}) == ["build_deps", "vllm_gateway"]
    assert input_rules.installing_roles(roles, {"vllm_gateway_enabled": False}) == ["build_deps"]
    assert input_rules.installing_roles(["vllm_serve", "vllm_gateway"], {"vllm_gateway_enabled": False}) == []


def test_the_lists_are_refreshed_as_the_first_role_that_refreshes_would():
    variables = {"build_deps_apt_cache_valid_time": 3600, "tcmalloc_apt_cache_valid_time": 60,
                 "python_venv_apt_cache_valid_time": 0}
    assert input_rules.package_lists_refresh(["build_deps", "tcmalloc", "python_venv"], variables) == (
        "tcmalloc", "tcmalloc_apt_cache_valid_time", 60)
    assert input_rules.package_lists_refresh(["python_venv", "vllm_serve"], variables) == (
        "python_venv", "python_venv_apt_cache_valid_time", 0)
    # The gateway's own setting counts like the others' (serve.yml's preflight: tcmalloc and the gateway).
    assert input_rules.package_lists_refresh(["tcmalloc", "vllm_gateway"], dict(
        variables, vllm_gateway_apt_cache_valid_time=30)) == ("vllm_gateway", "vllm_gateway_apt_cache_valid_time", 30)


# ---------------------------------------------------------------------------------------------
# What the rules say, on a Debian 12 host whose package sources answer as the sample's did.

@pytest.fixture(scope="module")
def debian12():
    return input_rules_doc.debian12_altra()


def problems(inventory, host, roles=input_rules_doc.SITE_ROLES):
    return [message for dummy, message in input_rules_doc.problems(dict(VALID, **inventory), host, roles)]


def test_the_defaults_are_installable_on_debian12(debian12):
    assert problems({}, debian12, ["build_deps", "tcmalloc", "python_venv", "vllm_gateway"]) == []


def test_a_gateway_package_the_sources_lack_is_its_enabling_setting(debian12):
    sources = {name: entry for name, entry in debian12["package_sources"].items() if name != "haproxy"}
    host = dict(debian12, package_sources=sources)
    assert problems({}, host, ["vllm_serve", "vllm_gateway"]) == [
        "vllm_gateway_enabled: needs haproxy, which no package source of this host has (got True); enable the "
        "package sources the distribution ships with (HAProxy is in every supported OS's own), or set it to false: "
        "the instances then have no front door"]
    # Disabled, the gateway installs nothing, so nothing of it is asked for.
    assert problems({"vllm_gateway_enabled": False}, host, ["vllm_serve", "vllm_gateway"]) == []


def test_what_debian12_does_not_have_is_refused_under_its_setting(debian12):
    lines = problems({"python_venv_python_version": "3.13", "build_deps_python_version": "3.13",
                      "tcmalloc_variant": "full"}, debian12)
    assert lines == [
        "build_deps_python_version: Python 3.13 is not installable here: no package source of this host has "
        "python3.13-dev (got '3.13'); leave it empty for the Python Debian-12 provides (3.11), or add a package "
        "source that carries Python 3.13",
        "python_venv_python_version: Python 3.13 is not installable here: no package source of this host has "
        "python3.13, python3.13-venv (got '3.13'); leave it empty for the Python Debian-12 provides (3.11), or add a "
        "package source that carries Python 3.13"]


def test_a_package_the_os_lists_but_the_sources_lack_names_the_role(debian12):
    sources = dict(debian12["package_sources"])
    del sources["ninja-build"]
    sources["acl"] = {"installed": None, "candidate": None}
    lines = problems({}, dict(debian12, package_sources=sources))
    assert lines == [
        "build_deps: no package source of this host has what the role installs on Debian-12 (got ['ninja-build']); "
        "enable the package sources the distribution ships with (apt sources, dnf repolist) and run again",
        "python_venv: no package source of this host has what the role installs on Debian-12 (got ['acl']); "
        "enable the package sources the distribution ships with (apt sources, dnf repolist) and run again"]


def test_rust_packages_the_sources_lack_are_the_rust_settings(debian12):
    sources = {name: entry for name, entry in debian12["package_sources"].items() if name != "protobuf-compiler"}
    lines = problems({"build_deps_rust_enabled": True}, dict(debian12, package_sources=sources, rustup_packaged=True))
    assert lines == ["build_deps_rust_enabled: needs protobuf-compiler, which no package source of this host has "
                     "(got True); add the package source that carries them, or leave it false: vLLM then builds "
                     "without its optional Rust extensions"]


def with_answer(host, roles, variables, **answer):
    """host["packages"] as the action builds it, with the package manager's answer replaced."""
    asked = input_rules_doc.ask_packages(roles, variables, host, host["package_sources"])
    asked["answer"] = dict(asked["answer"], **answer)
    return dict(host, packages=asked)


def rule_lines(host, roles, variables):
    return [str(error) for role in roles for rule, dummy, dummy in input_rules.RULES[role]
            if rule.__name__.endswith("_packages") for error in rule(variables, host)]


@pytest.fixture()
def defaults():
    return dict(ROLE_DEFAULTS["build_deps"], **dict(ROLE_DEFAULTS["tcmalloc"], **ROLE_DEFAULTS["python_venv"]))


def test_a_host_without_package_lists_and_no_refresh_says_so_once(debian12, defaults):
    roles = ["build_deps", "tcmalloc", "python_venv"]
    variables = dict(defaults, build_deps_apt_cache_valid_time=0, tcmalloc_apt_cache_valid_time=0,
                     python_venv_apt_cache_valid_time=0)
    everything = ["build-essential", "acl"]
    host = with_answer(debian12, roles, variables, lists_age=None, missing=everything)
    assert rule_lines(host, roles, variables) == [
        "build_deps_apt_cache_valid_time: is 0, so nothing refreshes apt's package lists, and this host has none yet "
        "(apt-get update never ran here): apt can install nothing it lacks (got 0); set it above 0 (apt-get update "
        "then runs before the check and the install) or run apt-get update on the host"]
    # A refresh that still leaves no lists: the host has no apt sources.
    host = with_answer(debian12, roles, defaults, lists_age=None, cache_updated=True, missing=everything)
    [line] = rule_lines(host, roles, defaults)
    assert line.startswith("build_deps_apt_cache_valid_time: apt-get update left this host without package lists")


def test_a_failed_refresh_is_the_lists_setting_and_another_failure_the_roles(debian12, defaults):
    roles = ["tcmalloc", "python_venv"]
    failed = {"failed": True, "msg": "apt-get update failed: E: Failed to fetch\n http://deb.debian.org/ ..."}
    [line] = rule_lines(with_answer(debian12, roles, defaults, **failed), roles, defaults)
    assert line == ("tcmalloc_apt_cache_valid_time: could not refresh the apt package lists: apt-get update failed: "
                    "E: Failed to fetch http://deb.debian.org/ ... (got 3600); fix the host's apt sources or its "
                    "network, or set tcmalloc_apt_cache_valid_time to 0 to judge on the lists the host has")
    failed = {"failed": True, "msg": "dnf repoquery failed: Cannot download repomd.xml"}
    [line] = rule_lines(with_answer(debian12, roles, defaults, **failed), roles, defaults)
    assert line == ("tcmalloc: could not ask the host's package manager what it can install: dnf repoquery failed: "
                    "Cannot download repomd.xml; fix the host's package manager or its sources")


def test_every_package_message_is_one_line_in_the_form(debian12, defaults):
    form = re.compile(r"^[a-z_]+(\[[0-9]+\])?: .+ \(got .+\); .+$")
    lines = problems({"python_venv_python_version": "3.12", "build_deps_extra_packages": ["nope", "-x"],
                      "tcmalloc_variant": "full"}, dict(debian12, package_sources={}))
    # the option, build_deps's own and extra packages, tcmalloc's, python_venv's Python and its acl, the gateway's,
    # and build_deps' headers (the OS's 3.11) that are not the build venv's Python (3.12)
    assert len(lines) == 8, lines
    assert sum(line.startswith("build_deps_python_version: installs the headers of Python 3.11") for line in lines) == 1
    for line in lines:
        assert "\n" not in line and form.match(line), line
