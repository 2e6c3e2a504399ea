# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filter for the vllm_rollout role: what its restore put back, in words (documented in vllm_rollout_put_back.yml)."""

from __future__ import annotations

import posixpath

from ansible.errors import AnsibleFilterError


def vllm_rollout_put_back(links):
    """What a restore made current again, one phrase each: the release (when the failed run had switched
    `current`) and each model whose `current` the run had moved to another revision. links: {before, after:
    the release link's targets before the run and after it failed ("" for none), placed: vllm_model_placed}."""
    if not isinstance(links, dict):
        raise AnsibleFilterError("vllm_rollout_put_back expects {before, after, placed}, got %s" % type(links).__name__)
    before, after = links.get("before") or "", links.get("after") or ""
    words = []
    if before and before != after:
        words.append("the release %s (this run had made %s current)"
                     % (posixpath.basename(before), posixpath.basename(after) if after else "none"))
    placed = links.get("placed") or {}
    if not isinstance(placed, dict):
        raise AnsibleFilterError("vllm_rollout_put_back: placed must be vllm_model_placed, a dict, got %s"
                                 % type(placed).__name__)
    for name in sorted(placed):
        entry = placed[name] if isinstance(placed[name], dict) else {}
        previous, revision = entry.get("previous_revision"), entry.get("revision")
        if previous and previous != revision:
            words.append("model %s at revision %s (this run had made %s current)" % (name, previous, revision))
    return words


class FilterModule(object):
    def filters(self):
        return {"vllm_rollout_put_back": vllm_rollout_put_back}
