# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Start vLLM's OpenAI-compatible server with the API key from the unit's systemd credential.

The key comes from the credential "api_key" (LoadCredential=) or, where systemd credentials do not
work, from the root:<service group> file named by ARM_INFERENCE_API_KEY_FILE.
vLLM reads its key only from --api-key or VLLM_API_KEY. Both would expose it: the command line in
ps and /proc/<pid>/cmdline, the environment in systemctl show and /proc/<pid>/environ of every
child. Appending the key to sys.argv inside this process reaches vLLM's argument parser while the
kernel keeps showing the original command line, and vLLM (>= 0.2x) logs api_key as "***".
Usage (the unit's ExecStart): <venv>/bin/python -I vllm-serve-launch <vllm server arguments>
"""

import os
import runpy
import sys

CREDENTIAL = "api_key"
ENTRY_MODULE = "vllm.entrypoints.openai.api_server"


def main():
    arguments = sys.argv[1:]
    directory = os.environ.get("CREDENTIALS_DIRECTORY", "")
    path = os.path.join(directory, CREDENTIAL) if directory else ""
    if not (path and os.path.exists(path)):
        path = os.environ.get("ARM_INFERENCE_API_KEY_FILE", "")
    key = ""
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            key = handle.read().strip()
    if key:
        arguments += ["--api-key", key]
    elif os.environ.get("ARM_INFERENCE_API_KEY_REQUIRED") == "1":
        # Fail closed: serving without the key the operator configured would expose the /v1 routes.
        sys.exit("vllm-serve-launch: an API key is configured but neither the systemd credential %r "
                 "(CREDENTIALS_DIRECTORY=%r) nor ARM_INFERENCE_API_KEY_FILE holds one; refusing to start "
                 "unauthenticated" % (CREDENTIAL, directory))
    sys.argv = [ENTRY_MODULE] + arguments
    runpy.run_module(ENTRY_MODULE, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
