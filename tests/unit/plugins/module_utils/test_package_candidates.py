from __future__ import annotations

import os

from ansible_collections.arm_inference.vllm.plugins.module_utils.package_candidates import (
    apt_lists_age,
    not_installed,
    parse_apt_policy,
    parse_dpkg_installed,
    parse_rpm_query,
    summarize,
)

# Captured from `LANG=C apt-cache policy python3.11-dev python3.99-dev libtcmalloc-minimal4
# python3-venv mail-transport-agent` on a Debian 12 amd64 host (2026-11-22). python3.99-dev is
# unknown to apt and prints nothing; mail-transport-agent is a virtual package without candidate.
APT_POLICY = """\
python3.11-dev:
  Installed: 3.11.2-6+deb12u6
  Candidate: 3.11.2-6+deb12u9
  Version table:
     3.11.2-6+deb12u9 500
        500 http://deb.debian.org/debian-security bookworm-security/main amd64 Packages
 *** 3.11.2-6+deb12u6 100
        100 /var/lib/dpkg/status
libtcmalloc-minimal4:
  Installed: (none)
  Candidate: 2.10-1
  Version table:
     2.10-1 500
        500 http://deb.debian.org/debian bookworm/main amd64 Packages
python3-venv:
  Installed: 3.11.2-1+b1
  Candidate: 3.11.2-1+b1
  Version table:
 *** 3.11.2-1+b1 500
        500 http://deb.debian.org/debian bookworm/main amd64 Packages
        100 /var/lib/dpkg/status
mail-transport-agent:
  Installed: (none)
  Candidate: (none)
  Version table:
"""


def test_apt_policy_reads_installed_and_candidate():
    policy = parse_apt_policy(APT_POLICY)
    assert policy["python3.11-dev"] == {"installed": "3.11.2-6+deb12u6", "candidate": "3.11.2-6+deb12u9"}
    assert policy["libtcmalloc-minimal4"] == {"installed": None, "candidate": "2.10-1"}
    assert policy["mail-transport-agent"] == {"installed": None, "candidate": None}
    assert "python3.99-dev" not in policy


def test_apt_policy_strips_architecture_qualifier():
    policy = parse_apt_policy("libc6:i386:\n  Installed: (none)\n  Candidate: 2.36-9\n")
    assert policy == {"libc6": {"installed": None, "candidate": "2.36-9"}}


def test_apt_policy_of_empty_output_is_empty():
    assert parse_apt_policy("") == {}


def test_summarize_reports_unknown_and_virtual_packages_missing():
    policy = parse_apt_policy(APT_POLICY)
    requested = ["python3.11-dev", "python3.99-dev", "mail-transport-agent", "libtcmalloc-minimal4"]
    packages, missing = summarize(
        requested,
        {name: info["candidate"] for name, info in policy.items()},
        {name: info["installed"] for name, info in policy.items()},
    )
    assert missing == ["python3.99-dev", "mail-transport-agent"]
    assert packages["libtcmalloc-minimal4"]["available"] is True
    assert packages["python3.99-dev"] == {"available": False, "candidate": None, "installed": None}


def test_rpm_query_keeps_first_line_per_name_and_ignores_noise():
    text = "gperftools-libs\t2.9.1-3.el9\npython3.11-devel\t3.11.9-7.el9\npackage python3.99-devel is not installed\n"
    assert parse_rpm_query(text) == {"gperftools-libs": "2.9.1-3.el9", "python3.11-devel": "3.11.9-7.el9"}


def test_installed_but_no_longer_in_repositories_counts_as_available():
    packages, missing = summarize(["gcc-12"], {}, {"gcc-12": "12.2.0-14"})
    assert missing == []
    assert packages["gcc-12"]["available"] is True


def test_apt_lists_age_is_when_apt_last_wrote_a_list_not_the_servers_date(tmp_path):
    """apt dates a fetched list by the server's Last-Modified (weeks back for a stable release's
    index); the age counts from when the host wrote it (its ctime), and files other than lists
    (the lock apt-get touches on every run) do not count."""
    lists = tmp_path / "lists"
    lists.mkdir()
    packages = lists / "deb.debian.org_debian_dists_bookworm_main_binary-arm64_Packages"
    release = lists / "deb.debian.org_debian_dists_bookworm_InRelease"
    for path in (packages, release):
        path.write_text("")
        os.utime(path, (1000.0, 1000.0))
    written = max(os.stat(path).st_ctime for path in (packages, release))
    (lists / "lock").write_text("")
    assert apt_lists_age(str(lists), now=written + 600.0) == 600.0
    assert apt_lists_age(str(lists), now=written - 5.0) == 0.0


def test_apt_lists_age_is_none_without_lists(tmp_path):
    (tmp_path / "partial").mkdir()
    assert apt_lists_age(str(tmp_path), now=1.0) is None
    assert apt_lists_age(str(tmp_path / "missing"), now=1.0) is None


# dpkg-query -W -f '${Package}\t${Version}\t${db:Status-Status}\n' on a Debian 12 arm64 host where
# libgoogle-perftools4 was removed with its configuration kept and python3.11-dev is unknown (stderr).
DPKG_QUERY = (
    "build-essential\t12.9\tinstalled\n"
    "libgoogle-perftools4\t2.10-1\tconfig-files\n"
    "libc6:arm64\t2.36-9+deb12u10\tinstalled\n"
    "cmake\t3.25.1-1\thalf-configured\n"
)


def test_dpkg_query_counts_only_installed_packages():
    assert parse_dpkg_installed(DPKG_QUERY) == {
        "build-essential": "12.9",
        "libc6": "2.36-9+deb12u10",
    }


def test_only_packages_the_database_lacks_go_to_the_repositories():
    installed = parse_dpkg_installed(DPKG_QUERY)
    requested = ["build-essential", "cmake", "libgoogle-perftools4", "python3.11-dev"]
    assert not_installed(requested, installed) == ["cmake", "libgoogle-perftools4", "python3.11-dev"]
    packages, missing = summarize(requested, {"cmake": "3.25.1-1", "libgoogle-perftools4": "2.10-1"}, installed)
    assert missing == ["python3.11-dev"]
    assert packages["build-essential"] == {"available": True, "candidate": None, "installed": "12.9"}
