"""Each role's public interface: defaults/main.yml and meta/argument_specs.yml must list the same
variables, every variable must carry the role's prefix, and each spec'd default must equal the
value in defaults/main.yml."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROLES_DIR = Path(__file__).resolve().parents[3] / "roles"
ROLES = sorted(path.name for path in ROLES_DIR.iterdir() if (path / "defaults" / "main.yml").exists())


def _load(role):
    defaults = yaml.safe_load((ROLES_DIR / role / "defaults" / "main.yml").read_text()) or {}
    specs = yaml.safe_load((ROLES_DIR / role / "meta" / "argument_specs.yml").read_text())
    return defaults, specs["argument_specs"]["main"]["options"]


def test_every_role_is_checked():
    assert {"build_deps", "tcmalloc", "python_venv", "vllm_serve"} <= set(ROLES)


@pytest.mark.parametrize("role", ROLES)
def test_defaults_and_argument_specs_list_the_same_variables(role):
    defaults, options = _load(role)
    assert sorted(set(defaults) - set(options)) == [], "in defaults/main.yml but not in argument_specs"
    assert sorted(set(options) - set(defaults)) == [], "in argument_specs but not in defaults/main.yml"


@pytest.mark.parametrize("role", ROLES)
def test_public_variables_carry_the_role_prefix(role):
    defaults = _load(role)[0]
    assert [name for name in defaults if not name.startswith(role + "_")] == []


@pytest.mark.parametrize("role", ROLES)
def test_spec_defaults_match_defaults_file(role):
    defaults, options = _load(role)
    for name, option in options.items():
        assert "default" in option, "%s has no default in argument_specs" % name
        assert option["default"] == defaults[name], name
        assert option.get("description"), "%s has no description" % name


# Roles that install OS packages load <OS>-<major>.yml; a role that loads none needs no such files.
OS_VARS_ROLES = [role for role in ROLES if any(path.name != "main.yml" for path in (ROLES_DIR / role / "vars").glob("*.yml"))]


def test_package_installing_roles_have_os_vars():
    assert {"build_deps", "tcmalloc", "python_venv"} <= set(OS_VARS_ROLES)


@pytest.mark.parametrize("role", OS_VARS_ROLES)
def test_every_platform_vars_file_exists(role):
    from ansible_collections.arm_inference.vllm.plugins.filter.platform import PLATFORMS

    vars_dir = ROLES_DIR / role / "vars"
    missing = [key for key in PLATFORMS if not (vars_dir / ("%s.yml" % key)).exists()]
    assert missing == []
