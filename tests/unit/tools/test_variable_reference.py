"""tools/variable_reference.py: docs/variables.md generated from the roles' argument specs."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[3]
SCRIPT = REPO_ROOT / "tools" / "variable_reference.py"
DOCS = REPO_ROOT / "docs" / "variables.md"


def _import_script():
    spec = importlib.util.spec_from_file_location("variable_reference", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


variable_reference = _import_script()

ALPHA_SPECS = """\
---
argument_specs:
  main:
    short_description: The I(alpha) role
    description:
      - Sets up C(alpha) with B(care).
      - See L(the docs,https://example.org/alpha) or U(https://example.org).
    options:
      alpha_mode:
        description:
          - How it runs; V(fast) skips O(alpha_checks).
          - Uses M(ns.col.thing) and reads C(a|b).
        type: str
        choices: [fast, slow]
        default: slow
      alpha_checks:
        description: Checks to run.
        type: list
        elements: str
        default: [disk, "cpu: all"]
      alpha_name:
        description: Name of the thing.
        type: str
        required: true
      alpha_from_defaults:
        description: Default only in defaults/main.yml.
        type: int
      alpha_path:
        description: Jinja default with a pipe.
        type: str
        default: "{{ other_var | default('') }}"
      alpha_version:
        description: Looks like a float.
        type: str
        default: "1.10"
      alpha_server:
        description: Server settings.
        type: dict
        default: {}
        options:
          host:
            description: Host name.
            type: str
            required: true
          port:
            description: Port.
            type: int
            default: 80
      alpha_users:
        description: Users.
        type: list
        elements: dict
        default: []
        options:
          name:
            description: User name.
            type: str
            required: true
          shell:
            description: Login shell.
            type: str
            choices: [/bin/bash, /bin/sh]
            default: /bin/bash
      alpha_long:
        description: A long default.
        type: list
        elements: str
        default: [first-long-element, second-long-element, third-long-element, fourth]
      alpha_script:
        description: A multi-line default.
        type: str
        default: |
          line one
          line two
      alpha_untyped:
        description: No type given.
  extra:
    short_description: Only the extra part
    options:
      alpha_extra_flag:
        description: A flag for the extra entry point.
        type: bool
"""

ALPHA_DEFAULTS = """\
---
alpha_mode: slow
alpha_from_defaults: 42
alpha_extra_flag: true
"""

ZETA_SPECS = """\
---
argument_specs:
  main:
    short_description: The zeta role
    options:
      zeta_enabled:
        type: bool
        default: false
"""


@pytest.fixture(name="roles_dir")
def fixture_roles_dir(tmp_path):
    roles = tmp_path / "roles"
    for role, specs, defaults in (("zeta", ZETA_SPECS, "zeta_enabled: false\n"), ("alpha", ALPHA_SPECS, ALPHA_DEFAULTS)):
        (roles / role / "meta").mkdir(parents=True)
        (roles / role / "defaults").mkdir()
        (roles / role / "meta" / "argument_specs.yml").write_text(specs)
        (roles / role / "defaults" / "main.yml").write_text(defaults)
    (roles / "nospec" / "tasks").mkdir(parents=True)
    return roles


def _row(text, name):
    """The table row of the option called name."""
    rows = [line for line in text.splitlines() if line.startswith("| `%s`" % name)]
    assert len(rows) == 1, "%s: %r" % (name, rows)
    return rows[0]


def _cells(row):
    """The cells of a table row, split at unescaped pipes."""
    cells = []
    current = ""
    index = 1
    while index < len(row):
        if row[index] == "\\" and index + 1 < len(row):
            current += row[index:index + 2]
            index += 2
            continue
        if row[index] == "|":
            cells.append(current.strip())
            current = ""
        else:
            current += row[index]
        index += 1
    return cells


def test_header_sections_and_contents(roles_dir):
    text = variable_reference.generate(roles_dir)
    assert text.startswith("# Role variables\n")
    assert "make docs" in text.split("## Contents")[0]
    assert "\n## alpha\n" in text and "\n## zeta\n" in text and "\n## nospec\n" in text
    assert text.index("## alpha") < text.index("## nospec") < text.index("## zeta")
    assert "- [alpha](#alpha): The *alpha* role" in text
    assert "- [zeta](#zeta): The zeta role" in text
    assert "  - [entry point `extra`](#alpha-entry-point-extra)" in text
    assert "### alpha, entry point `extra`" in text
    assert variable_reference.github_anchor("alpha, entry point `extra`") == "alpha-entry-point-extra"
    assert "This role has no `meta/argument_specs.yml`" in text
    assert text.endswith("|\n") and "\n\n\n" not in text
    assert not [line for line in text.splitlines() if line != line.rstrip()]


def test_role_description_markup(roles_dir):
    text = variable_reference.generate(roles_dir)
    assert "\nSets up `alpha` with **care**.\n" in text
    assert "\nSee [the docs](https://example.org/alpha) or https://example.org.\n" in text
    assert "\nOnly the extra part\n" in text


def test_option_columns_and_markup(roles_dir):
    text = variable_reference.generate(roles_dir)
    cells = _cells(_row(text, "alpha_mode"))
    assert cells == [
        "`alpha_mode`", "str", "`slow`", "`fast`, `slow`",
        "How it runs; `fast` skips `alpha_checks`. Uses `ns.col.thing` and reads `a\\|b`.",
    ]
    assert _cells(_row(text, "alpha_checks"))[1:3] == ["list of str", '`[disk, "cpu: all"]`']


def test_pipes_are_escaped_in_cells(roles_dir):
    row = _row(variable_reference.generate(roles_dir), "alpha_path")
    assert "`{{ other_var \\| default('') }}`" in row
    assert len(_cells(row)) == 5


def test_required_and_defaults(roles_dir):
    text = variable_reference.generate(roles_dir)
    assert _cells(_row(text, "alpha_name"))[:3] == ["`alpha_name` **required**", "str", ""]
    assert _cells(_row(text, "alpha_from_defaults"))[2] == "`42`", "default from defaults/main.yml"
    assert _cells(_row(text, "alpha_version"))[2] == '`"1.10"`', "a string YAML would read as a float is quoted"
    assert _cells(_row(text, "alpha_untyped"))[1] == "str"
    assert _cells(_row(text, "zeta_enabled"))[2:] == ["`false`", "", ""]
    # Other entry points fall back to defaults/main.yml too.
    assert _cells(_row(text, "alpha_extra_flag"))[2] == "`true`"


def test_suboptions_are_listed_with_dotted_names(roles_dir):
    text = variable_reference.generate(roles_dir)
    assert _cells(_row(text, "alpha_server.host"))[:2] == ["`alpha_server.host` **required**", "str"]
    assert _cells(_row(text, "alpha_server.port"))[2] == "`80`"
    assert _cells(_row(text, "alpha_users"))[1] == "list of dict"
    assert _cells(_row(text, "alpha_users.shell"))[2:4] == ["`/bin/bash`", "`/bin/bash`, `/bin/sh`"]
    order = [line.split("`")[1] for line in text.splitlines() if line.startswith("| `alpha_")]
    assert order.index("alpha_server") + 1 == order.index("alpha_server.host")
    assert order.index("alpha_users") + 1 == order.index("alpha_users.name")


def test_long_and_multiline_defaults_go_below_the_table(roles_dir):
    text = variable_reference.generate(roles_dir)
    assert _cells(_row(text, "alpha_long"))[2] == "see below"
    assert _cells(_row(text, "alpha_script"))[2] == "see below"
    assert "```yaml\nalpha_script: |\n  line one\n  line two\n```" in text
    block = text.split("`alpha_long`\n\n```yaml\n", 1)[1].split("```", 1)[0]
    assert block.startswith("alpha_long:\n  - first-long-element\n")
    assert yaml.safe_load(block) == {"alpha_long": ["first-long-element", "second-long-element", "third-long-element", "fourth"]}


def test_render_value():
    render = variable_reference.render_value
    assert render("") == '""'
    assert render("12.3") == '"12.3"'
    assert render("yes") == '"yes"'
    assert render("0.32.0") == "0.32.0"
    assert render(None) == "null"
    assert render([{"name": "main"}]) == "[{name: main}]"
    assert render({"a, b": [1, True]}) == '{"a, b": [1, true]}'
    assert render("{{ x | default('') }}") == "{{ x | default('') }}"
    assert render(["{{ x }}"]) == '["{{ x }}"]'


def test_convert_markup():
    convert = variable_reference.convert_markup
    assert convert("C(x) I(y) B(z) U(http://u) L(text, http://l) V(v) O(o=1) M(a.b.c)") == \
        "`x` *y* **z** http://u [text](http://l) `v` `o=1` `a.b.c`"
    assert convert(r"V(a\)b) E(PATH) RV(rc) P(a.b.c#filter)") == "`a)b` `PATH` `rc` `a.b.c` filter plugin"
    assert convert("C(`tick`)") == "`` `tick` ``"
    assert convert("a <b> *c* [d] _e_ f_g") == "a \\<b> \\*c\\* \\[d\\] \\_e\\_ f_g"
    assert convert("unclosed C(x") == "unclosed C(x"
    assert convert("ABC(x) SPEC(y)") == "ABC(x) SPEC(y)"


def test_output_is_deterministic(roles_dir):
    assert variable_reference.generate(roles_dir) == variable_reference.generate(roles_dir)


def test_write_then_check(roles_dir, tmp_path, capsys):
    output = tmp_path / "out" / "variables.md"
    assert variable_reference.main(["--roles-dir", str(roles_dir), "--output", str(output)]) == 0
    assert output.read_text() == variable_reference.generate(roles_dir)
    assert variable_reference.main(["--roles-dir", str(roles_dir), "--output", str(output), "--check"]) == 0
    assert "is up to date" in capsys.readouterr().out


def test_check_passes_on_the_committed_docs(capsys):
    assert variable_reference.main(["--check"]) == 0, "docs/variables.md is out of date: run make docs"
    assert "docs/variables.md is up to date" in capsys.readouterr().out


def test_check_fails_on_a_modified_copy(tmp_path, capsys):
    copy = tmp_path / "variables.md"
    copy.write_text(DOCS.read_text().replace("| `tcmalloc_variant` |", "| `tcmalloc_flavour` |"))
    assert variable_reference.main(["--check", "--output", str(copy)]) == 1
    captured = capsys.readouterr()
    assert "%s is out of date; run make docs" % copy in captured.err
    assert "-| `tcmalloc_flavour` |" in captured.out
    assert "+| `tcmalloc_variant` |" in captured.out
    assert captured.out.startswith("--- a/")


def test_check_fails_on_a_missing_file(tmp_path, capsys):
    assert variable_reference.main(["--check", "--output", str(tmp_path / "missing.md")]) == 1
    assert "is out of date; run make docs" in capsys.readouterr().err


def test_command_line_check_exit_status(tmp_path):
    copy = tmp_path / "variables.md"
    copy.write_text(DOCS.read_text() + "edited by hand\n")
    result = subprocess.run([sys.executable, str(SCRIPT), "--check", "--output", str(copy)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 1
    assert "is out of date; run make docs" in result.stderr
    assert "-edited by hand" in result.stdout


def test_a_broken_spec_is_an_error(roles_dir, capsys):
    (roles_dir / "zeta" / "meta" / "argument_specs.yml").write_text("argument_specs: [not, a, mapping]\n")
    assert variable_reference.main(["--roles-dir", str(roles_dir), "--check"]) == 2
    assert "no argument_specs mapping" in capsys.readouterr().err


def _real_options():
    for role, specs, dummy_dir in variable_reference.read_roles(variable_reference.ROLES_DIR):
        for entry_point, spec in (specs or {}).items():
            for dotted, dummy_option in variable_reference.iter_options((spec or {}).get("options")):
                yield role, entry_point, dotted


def test_every_real_option_is_documented():
    text = variable_reference.generate()
    options = list(_real_options())
    assert len(options) > 50
    missing = [option for option in options if "| `%s`" % option[2] not in text]
    assert missing == []
    roles = {role for role, dummy_entry_point, dummy_name in options}
    assert {"build_deps", "python_venv", "tcmalloc", "vllm_build", "vllm_serve"} <= roles
    for role in roles:
        assert "\n## %s\n" % role in text and "- [%s](#%s)" % (role, role) in text


def test_spec_problems_reports_what_readers_would_miss(roles_dir):
    specs = yaml.safe_load((roles_dir / "zeta" / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    assert variable_reference.spec_problems("zeta", specs) == ["zeta (entry point main): zeta_enabled has no description"]
    specs = yaml.safe_load(textwrap.dedent(ALPHA_SPECS))["argument_specs"]
    assert variable_reference.spec_problems("alpha", specs) == ["alpha (entry point main): alpha_untyped has no type (validated as str)"]
