"""vllm_model's tools venv locks: the parser, the rule that a client version needs a shipped lock, and the shipped
locks themselves (complete against the clients' real metadata, consistent with each other and with TOOL_LOCKS)."""

from __future__ import annotations

import re
from importlib import metadata
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_store as rules

REPO_ROOT = Path(__file__).resolve().parents[4]
LOCKS = REPO_ROOT / "roles" / "vllm_model" / "files" / "tools"
PLATFORMS = (REPO_ROOT / "plugins" / "filter" / "platform.py").read_text()
# Every Python the supported platforms run, on both architectures, as the marker environments a host presents.
ENVIRONMENTS = [{"python_version": version, "python_full_version": version + ".0", "platform_machine": machine,
                 "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
                 "platform_python_implementation": "CPython", "implementation_name": "cpython", "extra": ""}
                for version in sorted(set(re.findall(r'"python": "(3\.[0-9]+)"', PLATFORMS)))
                for machine in ("x86_64", "aarch64")]
A = "a" * 64
B = "b" * 64


def test_a_lock_is_read_entry_by_entry_with_markers_and_hashes():
    text = ("# header\nclick==8.5.1 \\\n    --hash=sha256:%s \\\n    --hash=sha256:%s\n    # via huggingface-hub\n"
            "tomli==2.5.0 ; python_full_version < '3.11' \\\n    --hash=sha256:%s\n" % (A, B, A))
    assert rules.lock_requirements(text) == [
        {"requirement": "click==8.5.1", "name": "click", "version": "8.5.1", "hashes": [A, B]},
        {"requirement": "tomli==2.5.0 ; python_full_version < '3.11'", "name": "tomli", "version": "2.5.0",
         "hashes": [A]}]


@pytest.mark.parametrize("text", [
    "click==8.5.1\n",  # no hash: pip would refuse the whole lock under --require-hashes
    "click>=8 \\\n    --hash=sha256:%s\n" % A,  # not pinned
    "click==8.5.1 \\\n    --hash=md5:%s\n" % A[:32],
    "click==8.5.1 \\\n    --hash=sha256:%s\n" % A[:63],
    "--index-url http://evil.example/simple\nclick==8.5.1 \\\n    --hash=sha256:%s\n" % A,  # an option
])
def test_a_lock_entry_without_a_pin_or_a_sha256_is_refused(text):
    with pytest.raises(ValueError, match="not a hash-pinned requirement"):
        rules.lock_requirements(text)


@pytest.mark.parametrize("variable, client", [("vllm_model_huggingface_hub_version", "huggingface_hub"),
                                              ("vllm_model_boto3_version", "boto3")])
def test_a_client_version_without_a_shipped_lock_is_refused_naming_the_variable_and_the_locks(variable, client):
    with pytest.raises(rules.ModelInputError) as error:
        rules.check_vllm_model_variables({"vllm_model_models": [], variable: "1.0.0"})
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith("%s: has no hash-pinned lock in the role (locks for %s: %s)" % (
        variable, client, ", ".join(rules.TOOL_LOCKS[client])))
    assert "(got 1.0.0)" in message and "make tools-lock" in message
    rules.check_vllm_model_variables({"vllm_model_models": [], variable: rules.TOOL_LOCKS[client][0]})


def test_the_shipped_locks_are_those_tool_locks_names_and_say_how_they_were_made():
    shipped = sorted(path.name for path in LOCKS.glob("*.txt"))
    assert shipped == sorted(rules.tool_lock_files({client: version})[0]
                             for client, versions in rules.TOOL_LOCKS.items() for version in versions)
    for path in LOCKS.glob("*.txt"):
        head = path.read_text().split("\n\n")[0] if "\n\n" in path.read_text() else path.read_text()[:1500]
        assert "make tools-lock" in head and "tools/tools_lock.py" in head, path.name
        assert "--require-hashes" in head, path.name


def lock(client, version):
    entries = rules.lock_requirements((LOCKS / rules.tool_lock_files({client: version})[0]).read_text())
    assert all(len(entry["hashes"]) >= 1 for entry in entries)
    return entries


def applicable(entries, environment):
    """{canonical name: version} of the entries a host in `environment` installs; one version per name."""
    chosen = {}
    for entry in entries:
        requirement = Requirement(entry["requirement"])
        if requirement.marker is None or requirement.marker.evaluate(environment):
            name = canonicalize_name(requirement.name)
            assert name not in chosen, "%s is locked twice for %s" % (name, environment)
            chosen[name] = entry["version"]
    return chosen


def installed(name, version):
    """The requirements of the installed distribution (this venv's), when it is that version; else None."""
    try:
        distribution = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        return None
    return distribution.requires or [] if distribution.version == version else None


@pytest.mark.parametrize("client, version", [(client, version) for client, versions in rules.TOOL_LOCKS.items()
                                             for version in versions])
def test_every_dependency_of_a_locked_client_has_a_pinned_line_on_every_supported_host(client, version):
    """Walks each client's dependencies from the real installed metadata (this venv holds the clients at the
    versions the role pins), for every supported Python on both architectures: every requirement a host would
    need has exactly one locked line whose version satisfies it."""
    entries = lock(client, version)
    read = set()
    for environment in ENVIRONMENTS:
        chosen = applicable(entries, environment)
        assert chosen.get(canonicalize_name(client)) == version, environment
        pending, seen = [canonicalize_name(client)], set()
        while pending:
            name = pending.pop()
            if name in seen:
                continue
            seen.add(name)
            requires = installed(name, chosen[name])
            if requires is None:
                continue
            read.add(name)
            for text in requires:
                requirement = Requirement(text)
                if requirement.marker is not None and not requirement.marker.evaluate(environment):
                    continue
                needed = canonicalize_name(requirement.name)
                assert needed in chosen, "%s %s needs %s, which the lock does not pin for %s" % (
                    name, chosen[name], text, environment)
                assert requirement.specifier.contains(chosen[needed], prereleases=True), (text, chosen[needed])
                pending.append(needed)
    assert canonicalize_name(client) in read, "the test read no metadata of %s %s" % (client, version)


def test_locks_installed_together_agree_on_every_package_they_share():
    entries = {}
    for client, versions in rules.TOOL_LOCKS.items():
        for version in versions:
            for entry in lock(client, version):
                entries.setdefault(canonicalize_name(entry["name"]), set()).add(
                    (entry["requirement"], tuple(sorted(entry["hashes"]))))
    for environment in ENVIRONMENTS:
        for name, lines in entries.items():
            versions = {line for line, _hashes in lines
                        if " ; " not in line or Marker(line.split(" ; ", 1)[1]).evaluate(environment)}
            assert len(versions) <= 1, (name, versions, environment)


def _tasks(tasks):
    for task in tasks:
        yield task
        yield from _tasks(task.get("block") or [])


def test_the_role_installs_the_locks_by_their_hashes_alone():
    """The locks pin nothing unless pip is told to check them: every file's sha256 (--require-hashes), no dependency
    the lock does not list (--no-deps), no build (--only-binary=:all:: a build would fetch its build tools unhashed),
    and every lock given as a requirements file; no other pip call in the role."""
    import yaml

    tasks = list(_tasks(yaml.safe_load((REPO_ROOT / "roles" / "vllm_model" / "tasks" / "tools.yml").read_text())))
    pips = [task for task in tasks if "/bin/pip" in str(task.get("ansible.builtin.command", ""))]
    assert len(pips) == 1, pips
    argv = pips[0]["ansible.builtin.command"]["argv"]
    for flag in ("'install'", "'--require-hashes'", "'--no-deps'", "'--only-binary=:all:'", "'--requirement='"):
        assert flag in argv, (flag, argv)
    assert not [task for task in tasks if "ansible.builtin.pip" in task or "pip" in task]
