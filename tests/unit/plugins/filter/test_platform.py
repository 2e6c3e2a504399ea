from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.arm_inference.vllm.plugins.filter.platform import FilterModule, platform_support


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
