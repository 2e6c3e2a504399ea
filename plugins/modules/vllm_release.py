#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_release
short_description: Inspect, activate, roll back and prune vLLM releases
version_added: 0.1.0
description:
  - A release is a directory C(<root>/releases/<name>) holding a venv with one vLLM build. It is
    complete once its stamp C(release.json) exists; the vllm_build role writes the stamp last, after
    the smoke test, so a half-installed release is never complete.
  - C(<root>/current) is a relative symlink to the active release. It is switched atomically (a new
    link renamed over the old one), so a reader sees either the old or the new release, never neither.
  - Every switch is appended to C(<root>/release-history), which names the rollback target.
options:
  root:
    description: Directory that holds C(releases/), C(current) and C(release-history).
    type: path
    required: true
  action:
    description:
      - V(inspect) reports releases, the current one and free disk space, and changes nothing.
      - V(activate) makes O(release) current, then prunes.
      - V(rollback) makes the previously active release current again, then prunes.
    type: str
    choices: [inspect, activate, rollback]
    default: inspect
  release:
    description: Name of the release to activate (a directory under C(releases/)).
    type: str
  keep:
    description:
      - How many complete releases to keep after a switch, newest first. The current release and the
        rollback target are always kept. Incomplete releases (no stamp) are always removed by a switch.
      - The build directory (C(<root>/builds/<identity>)) of a pruned release goes with it.
      - V(0) prunes nothing.
    type: int
    default: 0
author:
  - Arm Inference maintainers (@arm-inference)
notes:
  - Supports check mode.
"""

EXAMPLES = r"""
- name: Activate the release just installed
  arm_inference.vllm.vllm_release:
    root: /opt/vllm
    action: activate
    release: v0.32.0-3f5c0a9e1b2d4c6f
    keep: 3

- name: Roll back to the release that was active before
  arm_inference.vllm.vllm_release:
    root: /opt/vllm
    action: rollback
"""

RETURN = r"""
current:
  description: Name of the active release after the action, or null when there is none.
  returned: always
  type: str
previous:
  description: Name of the release that was active before the action.
  returned: always
  type: str
rollback_target:
  description: Release a rollback would activate now, or null when there is none.
  returned: always
  type: str
releases:
  description: Stamps of the complete releases, keyed by name.
  returned: always
  type: dict
incomplete:
  description: Release directories without a stamp (left by an interrupted install).
  returned: always
  type: list
  elements: str
pruned:
  description: Releases removed (or that would be removed in check mode).
  returned: always
  type: list
  elements: str
free_bytes:
  description: Free space on the file system that holds O(root) (or its nearest existing parent).
  returned: always
  type: int
"""

import datetime
import json
import os
import shutil

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_build
from ansible_collections.arm_inference.vllm.plugins.module_utils.host_facts import free_bytes

STAMP = vllm_build.RELEASE_STAMP


def _switch(root, name, previous):
    link = os.path.join(root, "current")
    temporary = os.path.join(root, ".current.%d" % os.getpid())
    if os.path.lexists(temporary):
        os.unlink(temporary)
    os.symlink(os.path.join("releases", name), temporary)
    os.replace(temporary, link)
    entry = {"release": name, "previous": previous,
             "activated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    # Never through a link: root appends here (vllm_build makes the root root's; this holds if someone did not).
    descriptor = os.open(os.path.join(root, "release-history"), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW,
                         0o644)
    with os.fdopen(descriptor, "a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry, sort_keys=True) + "\n")


def run(module):
    params = module.params
    root, action, keep = params["root"], params["action"], params["keep"]
    state = vllm_build.release_state(root)
    complete, incomplete, current, history = state["complete"], state["incomplete"], state["current"], state["history"]
    result = {"changed": False, "previous": current, "current": current, "pruned": [],
              "incomplete": incomplete, "free_bytes": free_bytes(root)}

    target = None
    if action == "activate":
        target = params["release"]
        if not target:
            raise vllm_build.BuildError("action=activate needs release.")
        if target not in complete:
            raise vllm_build.BuildError("Release %s is not complete under %s/releases (no %s): it cannot be "
                                        "activated." % (target, root, STAMP))
    elif action == "rollback":
        target = vllm_build.rollback_target(history, current, complete)

    if target and target != current:
        result["changed"] = True
        if not module.check_mode:
            _switch(root, target, current)
            history.append(target)
        result["current"] = target

    if target and keep:
        protected = [result["current"]]
        try:
            protected.append(vllm_build.rollback_target(history, result["current"], complete))
        except vllm_build.BuildError:
            pass
        result["pruned"] = vllm_build.releases_to_prune(complete, keep, protected) + incomplete
        if result["pruned"]:
            result["changed"] = True
            if not module.check_mode:
                for name in result["pruned"]:
                    shutil.rmtree(os.path.join(root, "releases", name))
                    identity = complete.get(name, {}).get("identity")
                    if identity:
                        shutil.rmtree(os.path.join(root, "builds", str(identity)), ignore_errors=True)
        for name in result["pruned"]:
            complete.pop(name, None)

    try:
        result["rollback_target"] = vllm_build.rollback_target(history, result["current"], complete)
    except vllm_build.BuildError:
        result["rollback_target"] = None
    result["releases"] = complete
    return result


def main():
    module = AnsibleModule(
        argument_spec={
            "root": {"type": "path", "required": True},
            "action": {"type": "str", "choices": ["inspect", "activate", "rollback"], "default": "inspect"},
            "release": {"type": "str"},
            "keep": {"type": "int", "default": 0},
        },
        supports_check_mode=True,
    )
    try:
        module.exit_json(**run(module))
    except (vllm_build.BuildError, OSError) as error:
        module.fail_json(msg=str(error))


if __name__ == "__main__":
    main()
