# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test instrumentation, not a stand-in: containers.podman's own connection plugin, unchanged, with a meter on
what the controller sends through it. Each file put (modules, copied models) and each command's stdin is
counted, per host, into the file named by METERED_CONNECTION_LOG as lines "<host> <bytes>". The vllm_model
tests use it to measure the bytes a model placement pushes through the controller. It never ships in a role.
"""

from __future__ import annotations

import os

from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection

DOCUMENTATION = """
    name: metered_podman
    short_description: containers.podman.podman, counting the bytes the controller sends
    description:
      - Runs commands and copies files into an existing podman container like containers.podman.podman, and
        appends the size of every file put and of every command's input to the file METERED_CONNECTION_LOG names.
    options:
      remote_addr:
        description: The container's name or id.
        default: inventory_hostname
        vars:
          - name: ansible_host
          - name: inventory_hostname
          - name: ansible_podman_host
      remote_user:
        description: User to run commands as inside the container.
        vars:
          - name: ansible_user
      podman_extra_args:
        description: Extra arguments for podman.
        default: ''
        vars:
          - name: ansible_podman_extra_args
      podman_executable:
        description: The podman executable.
        default: podman
        vars:
          - name: ansible_podman_executable
"""


class Connection(PodmanConnection):
    transport = "metered_podman"

    def _meter(self, sent):
        log = os.environ.get("METERED_CONNECTION_LOG")
        if log:
            with open(log, "a", encoding="utf-8") as handle:
                handle.write("%s %d\n" % (self._play_context.remote_addr, sent))

    def put_file(self, in_path, out_path):
        self._meter(os.path.getsize(in_path))
        return super().put_file(in_path, out_path)

    def exec_command(self, cmd, in_data=None, sudoable=False):
        self._meter(len(cmd) + len(in_data or b""))
        return super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
