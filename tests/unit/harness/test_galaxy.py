"""The pure parts of `make galaxy` (tests/harness/galaxy.py): the importer's findings, the README's install line
and the script the fresh container runs."""

from __future__ import annotations

import pytest

from harness import galaxy


def test_the_importers_warnings_and_errors_are_findings():
    log = ("Loading role vllm_serve\nWARNING: roles/vllm_serve/meta/main.yml: no galaxy_info\nLinting collection via "
           "ansible-lint 26.10.1...\nERROR: something broke\nImporter processing completed successfully\n")
    assert galaxy.importer_findings(log) == ["WARNING: roles/vllm_serve/meta/main.yml: no galaxy_info", "ERROR: something broke"]
    assert galaxy.importer_findings("Loading role vllm_serve\n...ansible-lint run complete\n") == []


def test_the_readme_installs_the_built_tarball_with_one_line():
    lines = galaxy.readme_install_lines()
    assert galaxy.tarball_install_line(lines, "arm_inference-vllm-0.1.0.tar.gz") == (
        "ansible-galaxy collection install build/arm_inference-vllm-0.1.0.tar.gz")
    with pytest.raises(SystemExit, match="no line"):
        galaxy.tarball_install_line(lines, "arm_inference-vllm-9.9.9.tar.gz")


def test_the_fresh_machine_script_stops_at_the_first_failure_and_installs_first():
    script = galaxy.fresh_machine_script("ansible-galaxy collection install build/a.tar.gz", ["site", "smoke"])
    lines = script.splitlines()
    assert lines[0] == "set -eux -o pipefail"
    assert lines[2] == "ansible-galaxy collection install build/a.tar.gz"
    assert sum("--syntax-check" in line for line in lines) == 2
    assert "arm_inference.vllm.site --syntax-check" in script
