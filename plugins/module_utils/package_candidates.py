# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parse package-manager answers about which packages a host's repositories can install.

Roles use this in preflight so that a package name built from user input (for example a Python
version) is rejected with the variable's name before anything is installed.
"""

from __future__ import annotations

import os
import re

_APT_HEADER = re.compile(r"^(?P<name>[A-Za-z0-9.+:~_-]+):$")
_APT_FIELD = re.compile(r"^\s+(?P<key>Installed|Candidate):\s*(?P<value>\S+)\s*$")


def parse_apt_policy(text):
    """Return {package: {"installed": str|None, "candidate": str|None}} from `apt-cache policy` output.

    Packages apt does not know at all are absent from the result; virtual packages without a
    provider have candidate None.
    """
    result = {}
    current = None
    for line in text.splitlines():
        header = _APT_HEADER.match(line)
        if header:
            current = header.group("name").split(":")[0]
            result[current] = {"installed": None, "candidate": None}
            continue
        field = _APT_FIELD.match(line)
        if field and current is not None:
            value = field.group("value")
            result[current][field.group("key").lower()] = None if value == "(none)" else value
    return result


def parse_rpm_query(text):
    """Return {package: version} from lines of `<name>\\t<evr>` (dnf repoquery / rpm -q --qf output)."""
    result = {}
    for line in text.splitlines():
        parts = line.strip().split("\t")
        if len(parts) == 2 and parts[0] and parts[1]:
            result.setdefault(parts[0], parts[1])
    return result


def parse_dpkg_installed(text):
    """Return {package: version} of installed packages from lines of `<name>\t<version>\t<db:Status-Status>`.

    dpkg-query also lists packages that were removed but left configuration behind
    (config-files) or failed half-way; only status "installed" counts.
    """
    result = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) == 3 and parts[0] and parts[1] and parts[2].strip() == "installed":
            result.setdefault(parts[0].split(":")[0], parts[1])
    return result


def not_installed(requested, installed):
    """Names of `requested` that the local package database does not show installed, in order."""
    return [name for name in requested if name not in installed]


def apt_lists_age(lists_dir, now):
    """Seconds since apt last wrote a package list in `lists_dir`; None when there is none.

    The time is the lists' inode change time: apt sets a fetched list's modification time to the
    server's Last-Modified, which for a stable release's index can be weeks old right after an
    `apt-get update`, while writing (or re-dating) the file changes its ctime to when it happened.
    """
    newest = None
    try:
        entries = os.listdir(lists_dir)
    except OSError:
        return None
    for entry in entries:
        if "_Packages" in entry or entry.endswith("Release"):
            changed = os.stat(os.path.join(lists_dir, entry)).st_ctime
            newest = changed if newest is None else max(newest, changed)
    return None if newest is None else max(0.0, now - newest)


def summarize(requested, candidates, installed):
    """Combine candidate and installed maps into the module's per-package answer."""
    packages = {}
    for name in requested:
        candidate = candidates.get(name)
        have = installed.get(name)
        packages[name] = {
            "available": bool(candidate or have),
            "candidate": candidate,
            "installed": have,
        }
    missing = [name for name in requested if not packages[name]["available"]]
    return packages, missing
