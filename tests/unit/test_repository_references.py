"""What the repository's files name exists, and requirements.yml declares every collection they use.

Docs, comments and configuration name files of this repository (`tests/playbooks/local_target.yml`,
`inventories/example/aws_ec2.yml`, ...); a move that forgets one leaves a newcomer a path to nowhere.
Collections other than ansible-core's and this one, named by FQCN in the playbooks, inventories and
configuration, must be in requirements.yml at the versions the pinned ansible bundle carries.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
TOP_DIRS = ("roles", "playbooks", "tests", "inventories", "docs", "plugins", "molecule", "tools", "benchmarks",
            "meta", "changelogs", ".config")
# A path of this repository: a top-level directory, then at least one more component.
PATH_REFERENCE = re.compile(r"(?<![\w/.$~-])((?:%s)/[\w./-]*\w)" % "|".join(re.escape(top) for top in TOP_DIRS))
# Published samples quote paths of the upstream repositories they come from, not of this one.
FOREIGN_PATHS = ("tests/unit/samples/",)
# Placeholders the docs use for the reader's own copy, and what `make autotune-demo` writes (ignored by git).
PLACEHOLDERS = ("inventories/myfleet", "inventories/local/autotune")


def tracked_text_files():
    listing = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=False)
    if listing.returncode != 0:
        pytest.skip("not a git checkout")
    for name in listing.stdout.decode().split("\0"):
        path = REPO_ROOT / name
        if name and not name.startswith(FOREIGN_PATHS) and path.is_file():
            try:
                yield name, path.read_text()
            except UnicodeDecodeError:
                continue


def _exists(reference, referrer):
    if reference.startswith(PLACEHOLDERS):
        return True
    candidates = [REPO_ROOT / reference, (REPO_ROOT / referrer).parent / reference]
    # Role-relative names (meta/argument_specs.yml) in role and docs prose name a file every role has.
    if reference.startswith("meta/") and reference != "meta/runtime.yml":
        candidates.append(REPO_ROOT / "roles" / "preflight" / reference)
    return any(candidate.exists() for candidate in candidates)


def test_every_repository_path_named_in_a_tracked_file_exists():
    missing = []
    for name, text in tracked_text_files():
        for match in PATH_REFERENCE.finditer(text):
            reference = match.group(1).rstrip(".")
            if not _exists(reference, name):
                missing.append("%s names %s" % (name, reference))
    assert not missing, "paths that do not exist:\n" + "\n".join(sorted(set(missing)))


def test_the_development_helpers_are_not_public_playbooks():
    assert not (REPO_ROOT / "playbooks" / "local_target.yml").exists()
    assert sorted(path.name for path in (REPO_ROOT / "inventories").iterdir() if path.is_dir()) == ["example", "local"]


# Collections every ansible-core has, and this one.
BUILTIN_NAMESPACES = ("ansible.builtin", "ansible.legacy", "arm_inference.vllm")
# namespace.collection.plugin, not part of a host name or URL (download.pytorch.org/...).
FQCN = re.compile(r"(?<![\w/.:-])([a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*)\.[a-z_][a-z0-9_]*(?![\w./-])")
USERS = ["ansible.cfg", ".config/molecule/config.yml", "playbooks", "tests/playbooks", "inventories"]


def _fqcn_collections():
    used = {}
    for entry in USERS:
        root = REPO_ROOT / entry
        files = [root] if root.is_file() else sorted(root.rglob("*.yml"))
        for path in files:
            for line in path.read_text().splitlines():
                code = line.split("#", 1)[0]
                for match in FQCN.finditer(code):
                    collection = match.group(1)
                    namespace = collection.split(".")[0]
                    if collection in BUILTIN_NAMESPACES or namespace in ("ansible_facts", "item", "hostvars"):
                        continue
                    used.setdefault(collection, path.relative_to(REPO_ROOT).as_posix())
    return used


def _requirements():
    declared = yaml.safe_load((REPO_ROOT / "requirements.yml").read_text())["collections"]
    return {entry["name"]: entry["version"] for entry in declared}


def _installed_collections():
    import ansible_collections  # the ansible bundle, where requirements-dev.txt installs it

    found = {}
    for base in ansible_collections.__path__:
        for manifest in Path(base).glob("*/*/MANIFEST.json"):
            info = json.loads(manifest.read_text())["collection_info"]
            found.setdefault("%s.%s" % (info["namespace"], info["name"]), info["version"])
    return found


def test_requirements_lists_every_collection_the_playbooks_inventories_and_config_use():
    used = _fqcn_collections()
    assert {"containers.podman", "amazon.aws", "ansible.posix"} <= set(used), used
    assert set(_requirements()) == set(used), "used (first user): %s" % used


def test_requirements_pins_are_the_versions_ci_runs_with():
    installed = _installed_collections()
    for name, version in _requirements().items():
        assert installed.get(name) == version, "%s: requirements.yml pins %s, the toolchain has %s" % (
            name, version, installed.get(name))
