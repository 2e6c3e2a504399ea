# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Wait for an async vLLM build and print its progress on the controller while it runs.

Ansible's own async_status with until/retries shows nothing but "retrying" for an hour; this polls
the job and the build log together and prints the ninja step whenever it moves.
"""

from __future__ import annotations

import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

display = Display()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("jid", "log", "poll", "timeout"))

    def _async_status(self, jid, task_vars):
        async_dir = self._remote_expand_user(self.get_shell_option("async_dir", default="~/.ansible_async"))
        return self._execute_module(module_name="ansible.legacy.async_status", task_vars=task_vars,
                                    module_args={"jid": jid, "mode": "status", "_async_dir": async_dir})

    def _log(self, path, task_vars):
        return self._execute_module(module_name="arm_inference.vllm.vllm_build_log", task_vars=task_vars,
                                    module_args={"path": path, "lines": 40})

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        dummy, args = self.validate_argument_spec(argument_spec={
            "jid": {"type": "str", "required": True},
            "log": {"type": "path", "required": True},
            "poll": {"type": "int", "default": 30},
            "timeout": {"type": "int", "default": 10800},
        })
        host = task_vars.get("inventory_hostname", "?")
        started = time.monotonic()
        shown = None
        while True:
            status = self._async_status(args["jid"], task_vars)
            log = self._log(args["log"], task_vars)
            elapsed = int(time.monotonic() - started)
            step = (log.get("progress") or {}).get("line") or log.get("last_line") or "(no output yet)"
            if step != shown:
                display.display("%s: vLLM build %dm%02ds  %s" % (host, elapsed // 60, elapsed % 60, step[:160]))
                shown = step
            if status.get("finished"):
                break
            if status.get("failed") and not status.get("started"):
                raise AnsibleActionFail("Lost the build job %s: %s" % (args["jid"], status.get("msg", "")))
            if elapsed > args["timeout"]:
                raise AnsibleActionFail("The vLLM build did not finish within %d s; it may still run on the host. "
                                        "Full log: %s" % (args["timeout"], args["log"]))
            time.sleep(args["poll"])
        for key in ("wheel", "torch", "seconds", "stopped_earlier_build", "adopted_earlier_build", "msg", "rc"):
            if key in status:
                result[key] = status[key]
        result["log_tail"] = status.get("log_tail") or log.get("tail", [])
        result["progress"] = log.get("progress")
        if status.get("failed"):
            result["failed"] = True
            result["msg"] = "%s\n%s" % (status.get("msg", "The vLLM build failed."), "\n".join(result["log_tail"]))
        result["changed"] = bool(status.get("changed"))
        return result
