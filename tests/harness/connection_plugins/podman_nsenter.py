# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test instrumentation, not a stand-in: community.docker's nsenter connection, pointed at a local podman
container by name instead of at PID 1, with the container's own environment (tests/harness/namespaces.py says
why: `podman exec` costs most of a container test's time on these machines). The integration tests and the
molecule scenarios reach their containers through it; fleets use SSH. It never ships in a role.
"""

from __future__ import annotations

import os
import shlex
import sys

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text
from ansible_collections.community.docker.plugins.connection.nsenter import Connection as NsenterConnection

# tests/harness/namespaces.py alone (the harness package would import all of the harness into every task).
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from namespaces import container_process, in_environment  # noqa: E402  pylint: disable=wrong-import-position

DOCUMENTATION = """
    name: podman_nsenter
    short_description: run commands in a local podman container by entering its namespaces
    description:
      - Finds the container's first process with podman inspect (once, then from a cache checked against /proc)
        and runs every command through community.docker.nsenter in its namespaces, with the container's
        environment. Root on this machine is required, as for rootful podman.
    options:
      remote_addr:
        description: The container's name or id (the last of these variables that is set).
        default: inventory_hostname
        vars:
          - name: inventory_hostname
          - name: ansible_host
          - name: ansible_podman_host
"""


class Connection(NsenterConnection):
    """community.docker.nsenter into the podman container named by ansible_host."""

    transport = "podman_nsenter"

    def _connect(self):
        if not self._connected:
            self._nsenter_pid, environment = container_process(self.get_option("remote_addr"))
            self._prefix = in_environment(environment, [])
            self._play_context.remote_user = "root"
            self._connected = True
        return self

    def exec_command(self, cmd, in_data=None, sudoable=True):
        self._connect()
        if isinstance(cmd, (str, bytes)):
            cmd = " ".join(shlex.quote(part) for part in self._prefix) + " " + to_text(cmd)
        else:
            cmd = self._prefix + list(cmd)
        return super().exec_command(cmd, in_data=in_data, sudoable=sudoable)

    def put_file(self, in_path, out_path):
        """The file through a shell's redirection (the base class's `tee` echoes every byte back)."""
        self._connect()
        with open(in_path, "rb") as source:
            data = source.read()
        rc, dummy, err = self.exec_command(["sh", "-c", 'cat > "$1"', "sh", out_path], in_data=data)
        if rc != 0:
            raise AnsibleError("failed to transfer file to %s: %s" % (out_path, to_text(err)))
