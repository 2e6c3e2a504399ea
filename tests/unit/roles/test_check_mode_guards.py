"""Check mode on a host that is not prepared yet is decided once per role (docs/architecture.md, "Check mode").

A role whose check run can meet a host without what earlier roles, or its own install, would have put
there computes one internal `__<role>_unprepared` and its guards read that. These tests fail when a
guard repeats `ansible_check_mode and <what the host lacks>` instead, outside the exceptions named below.
vllm_build is left out: its build plan decides this for it.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROLES_DIR = Path(__file__).resolve().parents[3] / "roles"
ROLES = sorted(path.name for path in ROLES_DIR.iterdir() if (path / "tasks").is_dir() and path.name != "vllm_build")

# `ansible_check_mode` combined with something else, either way round.
COMPOUND = re.compile(r"\bansible_check_mode\s+(?:and|or)\b|\b(?:and|or)\s+(?:not\s+)?ansible_check_mode\b")
# Compounds that stay, each about a file this very run would write a few tasks earlier, not about the host.
ALLOWED = {
    ("os_packages", "tasks/main.yml"): 2,     # install, or in check mode report, what is pending
    ("vllm_gateway", "tasks/tls.yml"): 1,     # a self-signed pair this run would make (again)
    ("vllm_gateway", "tasks/configure.yml"): 1,   # the endpoints file vllm_serve's check run did not write
    ("vllm_serve", "tasks/service.yml"): 2,   # a unit this run would write; /health of what it started
}


def role_yaml(role):
    return [path for part in ("tasks", "vars") for path in sorted((ROLES_DIR / role / part).glob("*.yml"))]


def unprepared_definitions(text, role):
    """Lines that define `__<role>_unprepared` (a set_fact key or a vars entry), with their continuation."""
    pattern = r"^([ \t]*)__%s_unprepared:.*(?:\n\1[ \t]+\S.*)*" % re.escape(role)
    return [match.group(0) for match in re.finditer(pattern, text, re.MULTILINE)]


def compounds(text, role):
    """Check-mode compounds outside the role's own predicate."""
    for definition in unprepared_definitions(text, role):
        text = text.replace(definition, "")
    return COMPOUND.findall(text)


FILES = [(role, path) for role in ROLES for path in role_yaml(role)]


@pytest.mark.parametrize("role,path", FILES, ids=[str(path.relative_to(ROLES_DIR)) for dummy, path in FILES])
def test_a_guard_for_an_unprepared_host_reads_the_roles_predicate(role, path):
    allowed = ALLOWED.get((role, str(path.relative_to(ROLES_DIR / role))), 0)
    found = compounds(path.read_text(), role)
    assert len(found) <= allowed, "compute __%s_unprepared once and guard with it: %s" % (role, found)


@pytest.mark.parametrize("role", ROLES)
def test_each_role_defines_its_predicate_once_and_uses_it(role):
    texts = [path.read_text() for path in role_yaml(role)]
    definitions = [found for text in texts for found in unprepared_definitions(text, role)]
    uses = sum(len(re.findall(r"\b__%s_unprepared\b" % re.escape(role), text)) for text in texts) - len(definitions)
    assert len(definitions) <= 1
    if definitions:
        assert "ansible_check_mode" in definitions[0] and uses > 0


def test_the_scan_finds_the_guards_this_collection_once_had():
    # python_venv's, tcmalloc's and vllm_serve's guards before the predicates.
    assert compounds("  when: not (ansible_check_mode and __python_venv_user_result is changed)", "python_venv")
    assert compounds("  when: not (ansible_check_mode and __tcmalloc_pending | length > 0)", "tcmalloc")
    assert compounds("    - not (ansible_check_mode and __vllm_serve_version.rc != 0)", "vllm_serve")
    assert compounds("  when: ansible_check_mode and vllm_serve_preload_tcmalloc", "vllm_serve")
    assert compounds("  when: __vllm_gateway_endpoints | length > 0 and not ansible_check_mode", "vllm_gateway")
    # The predicate itself, and a plain skip of what check mode never does, are not repeats.
    definition = '    __tcmalloc_unprepared: "{{ ansible_check_mode and __tcmalloc_pending | length > 0 }}"'
    assert not compounds(definition, "tcmalloc")
    assert not compounds("  when: not ansible_check_mode", "vllm_benchmark")
    folded = "    __vllm_serve_unprepared: >-\n      {{ ansible_check_mode\n         and (rc != 0) }}\n"
    assert not compounds(folded, "vllm_serve")
    # A guard right after the predicate is still a guard.
    assert compounds(folded + "\n- name: Next\n  when: ansible_check_mode and x\n", "vllm_serve")
