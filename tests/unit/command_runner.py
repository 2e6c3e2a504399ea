"""The `run` the vllm_build probes take (AnsibleModule.run_command in the modules), for tests that call
module_utils directly: argv and cwd in, (rc, stdout, stderr) out."""

from __future__ import annotations

import subprocess


def run_command(argv, cwd=None):
    result = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, check=False)
    return result.returncode, result.stdout, result.stderr
