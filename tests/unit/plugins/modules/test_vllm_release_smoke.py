"""A release's smoke test with a real venv's Python: a stand-in vllm package (what a release venv holds
after `pip install` of the fixture tree's wheel: vllm with its version, its CPU platform code and a
compiled-extension module) loads as vLLM loads itself, its version is checked against the suffix, a failed
step is named. Processes killed by a signal on emulated CPUs: tests/containers/test_cpu_classes.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_build
from ansible_collections.arm_inference.vllm.plugins.modules import vllm_release_smoke
from command_runner import run_command


@pytest.fixture(scope="module")
def release_python(tmp_path_factory):
    venv = tmp_path_factory.mktemp("release") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = venv / "lib" / ("python%d.%d" % sys.version_info[:2]) / "site-packages" / "vllm"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text('__version__ = "0.32.1+cpu"\n')
    # vLLM's CPU platform code, as the fixture tree has it: import_kernels loads _C and only warns when it cannot.
    (site / "platforms").mkdir()
    (site / "platforms" / "__init__.py").write_text("")
    (site / "platforms" / "cpu.py").write_text(
        "class CpuPlatform:\n    @classmethod\n    def import_kernels(cls):\n        try:\n            import vllm._C\n"
        "        except ImportError:\n            pass\n")
    (site / "_C.py").write_text("def isa():\n    return 'generic'\n")
    (site / "broken.py").write_text("raise ImportError('libtorch_cpu.so: cannot open shared object file')\n")
    return str(venv / "bin" / "python")


def run(capsys, **args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            vllm_release_smoke.main()
    return json.loads(capsys.readouterr().out)


def test_the_release_imports_and_says_its_version(capsys, release_python):
    result = run(capsys, python=release_python, modules=["vllm._C"], version_suffix="+cpu")
    assert not result.get("failed") and not result["changed"]
    assert result["version"] == "0.32.1+cpu" and result["torch"] is None


def test_a_version_without_the_suffix_is_refused(capsys, release_python):
    result = run(capsys, python=release_python, modules=["vllm._C"], version_suffix="+cu128")
    assert result["failed"] and result["msg"] == "the installed vLLM 0.32.1+cpu does not end with vllm_build_version_suffix +cu128"


def test_a_module_that_does_not_import_is_named_with_its_error(release_python):
    with pytest.raises(vllm_build.BuildError) as raised:
        vllm_build.smoke_test(release_python, ["vllm._C", "vllm.broken"], "", run_command)
    assert "failed while importing vllm.broken" in str(raised.value)
    assert "libtorch_cpu.so: cannot open shared object file" in str(raised.value)


def test_the_release_is_imported_from_its_own_venv_only(tmp_path, release_python, monkeypatch):
    # A vllm in the working directory or on PYTHONPATH must not stand in for the release's own.
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "__init__.py").write_text('__version__ = "9.9.9+cpu"\n')
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert vllm_build.smoke_test(release_python, [], "+cpu", run_command)["version"] == "0.32.1+cpu"


def test_the_version_is_the_installed_distributions(tmp_path):
    # vLLM built from its own sdist: setuptools-scm writes vllm/_version.py (0.32.0) before setup.py adds the
    # +cpu label to the distribution (0.32.0+cpu), so vllm.__version__ lacks what the wheel is named after.
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = venv / "lib" / ("python%d.%d" % sys.version_info[:2]) / "site-packages"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text('__version__ = "0.32.0"\n')
    info = site / "vllm-0.32.0+cpu.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.32.0+cpu\n")
    (info / "top_level.txt").write_text("vllm\n")
    found = vllm_build.smoke_test(str(venv / "bin" / "python"), [], "+cpu", run_command, kernels=False)
    assert (found["version"], found["runtime_version"]) == ("0.32.0+cpu", "0.32.0")


def test_the_kernels_are_loaded_through_vllms_platform_code(capsys, release_python):
    result = run(capsys, python=release_python, version_suffix="+cpu")
    assert not result.get("failed") and result["kernels"] == []  # a Python module, no kernel library mapped


def test_a_tree_without_vllms_cpu_platform_is_refused_by_name(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = venv / "lib" / ("python%d.%d" % sys.version_info[:2]) / "site-packages" / "vllm"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text('__version__ = "0.32.1+cpu"\n')
    with pytest.raises(vllm_build.BuildError) as raised:
        vllm_build.smoke_test(str(venv / "bin" / "python"), [], "", run_command)
    assert "while loading vLLM's kernels" in str(raised.value)
    assert "this vLLM has no CPU platform" in str(raised.value) and "vllm_build_smoke_kernels" in str(raised.value)


def test_ops_need_torch(release_python):
    # Without torch no op can be registered: refused, not passed as "nothing missing".
    with pytest.raises(vllm_build.BuildError) as raised:
        vllm_build.smoke_test(release_python, [], "", run_command, ops=["_C.rms_norm"])
    assert "torch is not installed in the release" in str(raised.value)


def test_a_python_that_printed_nothing_says_so(release_python):
    # The crash of issue 26 left "could not import vllm and vllm._C:" and nothing after it.
    package = Path(release_python).parents[1] / "lib" / ("python%d.%d" % sys.version_info[:2]) / "site-packages" / "vllm"
    (package / "quiet.py").write_text("import os\nos._exit(3)\n")
    with pytest.raises(vllm_build.BuildError) as raised:
        vllm_build.smoke_test(release_python, ["vllm.quiet"], "", run_command)
    assert "failed while importing vllm.quiet" in str(raised.value)
    assert str(raised.value).endswith("(it printed nothing on stderr)")
