from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.arm_inference.vllm.plugins.filter.platform import FilterModule, ansible_core_support, platform_support


def facts(distribution, major, architecture="aarch64", version=None):
    return {
        "distribution": distribution,
        "distribution_major_version": major,
        "distribution_version": version or major,
        "architecture": architecture,
    }


@pytest.mark.parametrize(
    "distribution,major,key,python",
    [
        ("Debian", "12", "Debian-12", "3.11"),
        ("Debian", "13", "Debian-13", "3.13"),
        ("Ubuntu", "22", "Ubuntu-22", "3.10"),
        ("Ubuntu", "24", "Ubuntu-24", "3.12"),
        ("Amazon", "2023", "Amazon-2023", "3.11"),
        ("RedHat", "9", "RedHat-9", "3.11"),
        ("Rocky", "9", "RedHat-9", "3.11"),
        ("AlmaLinux", "9", "RedHat-9", "3.11"),
    ],
)
def test_supported_platforms(distribution, major, key, python):
    result = platform_support(facts(distribution, major))
    assert result["supported"] is True
    assert result["key"] == key
    assert result["default_python"] == python
    assert result["message"] == ""


def test_unsupported_os_names_what_is_supported():
    result = platform_support(facts("Fedora", "41"))
    assert result["supported"] is False and result["architecture_supported"] is True
    assert "Fedora 41 is not supported" in result["message"]
    assert "Debian 12" in result["message"] and "Amazon Linux 2023" in result["message"]
    assert result["default_python"] is None


def test_unsupported_release_of_supported_distribution():
    assert platform_support(facts("Debian", "11", version="11.11"))["message"].startswith(
        "operating system Debian 11.11 is not supported"
    )
    assert platform_support(facts("Ubuntu", "20"))["supported"] is False


def test_unsupported_architecture_is_reported_with_os_problem():
    result = platform_support(facts("Alpine", "3", architecture="riscv64"))
    assert result["os_supported"] is False and result["architecture_supported"] is False
    assert "architecture riscv64 is not supported (supported: aarch64, x86_64)" in result["message"]


def test_x86_64_is_a_supported_secondary_architecture():
    assert platform_support(facts("Debian", "12", architecture="x86_64"))["supported"] is True


@pytest.mark.parametrize("bad", [None, {}, {"distribution": "Debian"}, "Debian"])
def test_missing_facts_raise_a_clear_filter_error(bad):
    with pytest.raises(AnsibleFilterError, match="gather facts first"):
        platform_support(bad)


def test_filter_is_registered():
    assert FilterModule().filters()["platform_support"] is platform_support


CORE = FilterModule().filters()["ansible_core_support"]


@pytest.mark.parametrize("version", ["2.14.18", "2.16.3", "2.18.19", "2.19.0rc1"])
def test_a_core_below_the_floor_is_refused_with_one_line(version):
    result = CORE(version)
    assert result["supported"] is False
    assert result["floor"] == "2.19.0"
    assert result["message"] == (
        "ansible-core %s is older than this collection's floor 2.19.0; install ansible-core 2.19.0 or newer "
        "(pip install --upgrade 'ansible-core>=2.19.0') and run again" % version)


@pytest.mark.parametrize("version", ["2.19.0", "2.19.14", "2.20.10", "2.21.5"])
def test_cores_from_the_floor_on_are_supported(version):
    result = CORE(version)
    assert result["supported"] is True
    assert result["message"] == ""


def test_the_floor_is_read_from_the_runtime_file(tmp_path):
    runtime = tmp_path / "runtime.yml"
    runtime.write_text('---\nrequires_ansible: ">=2.20.0,<2.22"\n')
    assert ansible_core_support("2.19.14", runtime_file=runtime)["message"].startswith(
        "ansible-core 2.19.14 is older than this collection's floor 2.20.0;")
    above = ansible_core_support("2.22.0", runtime_file=runtime)
    assert above["supported"] is False
    assert above["message"].startswith("ansible-core 2.22.0 is outside this collection's supported range >=2.20.0,<2.22 ")
    assert ansible_core_support("2.22.0b1", runtime_file=runtime)["supported"] is False
    assert ansible_core_support("2.21.5", runtime_file=runtime)["supported"] is True
    assert ansible_core_support("2.20.0.dev0", runtime_file=runtime)["supported"] is False


@pytest.mark.parametrize("declared", ["'~=2.19'", "'>=2.19.*'", "'2.19'", "''"])
def test_a_requires_ansible_it_cannot_read_is_named(tmp_path, declared):
    runtime = tmp_path / "runtime.yml"
    runtime.write_text("---\nrequires_ansible: %s\n" % declared)
    with pytest.raises(AnsibleFilterError, match="requires_ansible in .*runtime.yml: cannot read"):
        ansible_core_support("2.19.14", runtime_file=runtime)


def test_the_collection_declares_a_floor_that_this_core_meets():
    from ansible.release import __version__
    assert CORE(__version__)["supported"] is True


@pytest.mark.parametrize("value", ["", "latest", None])
def test_a_value_that_is_no_version_is_named(value):
    with pytest.raises(AnsibleFilterError, match="not an ansible-core version"):
        CORE(value)


def test_every_role_platform_check_stops_on_an_old_core(monkeypatch):
    import ansible_collections.arm_inference.vllm.plugins.filter.platform as platform_filters
    monkeypatch.setattr(platform_filters, "ANSIBLE_CORE_VERSION", "2.17.4")
    result = platform_support(facts("Debian", "12"))
    assert result["supported"] is False
    assert result["os_supported"] and result["architecture_supported"]
    assert result["message"].startswith("ansible-core 2.17.4 is older than this collection's floor 2.19.0;")
