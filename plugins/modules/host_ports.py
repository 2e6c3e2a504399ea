#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: host_ports
short_description: Read what the host says about the TCP listeners a service could open
version_added: 0.1.0
description:
  - Reads the lowest port an unprivileged process may bind (C(net.ipv4.ip_unprivileged_port_start)), every
    listening TCP socket (C(/proc/net/tcp), C(/proc/net/tcp6)) with the process and systemd service that hold it,
    and whether each given address can be bound on the host (a bind to port 0, closed at once).
  - Also reads how many open files the service manager (PID 1) can give a service's C(LimitNOFILE=), which is PID 1's
    hard limit (C(/proc/1/limits)), or C(fs.nr_open) when PID 1 has C(CAP_SYS_RESOURCE). systemd lowers a larger
    C(LimitNOFILE=) to that without an error, so a service that needs more fails only when it starts.
  - The preflight (action C(input_check)) runs it for vllm_serve and vllm_gateway, whose rules then refuse a port or
    address the service could not listen on, and a gateway that needs more descriptors than the host can give.
options:
  addresses:
    description: IP addresses to try binding; anything that is not an IP address is left out.
    type: list
    elements: str
    default: []
author:
  - Arm Inference maintainers (@arm-inference)
notes:
  - Read-only; supports check mode. Run it as root to see the processes of other users' sockets.
"""

EXAMPLES = r"""
- name: Read the host's listeners
  arm_inference.vllm.host_ports:
    addresses: [127.0.0.1]
  register: __ports
"""

RETURN = r"""
unprivileged_port_start:
  description: The lowest port a process without C(CAP_NET_BIND_SERVICE) may bind.
  returned: always
  type: int
  sample: 1024
listening:
  description: Listening TCP sockets, with C(pid), C(process) and C(unit) where the holder was found.
  returned: always
  type: list
  elements: dict
  sample: [{address: 0.0.0.0, port: 22, uid: 0, pid: 412, process: sshd, unit: ssh.service}]
addresses:
  description: Each given address that cannot be bound, with the reason (addresses that can are absent).
  returned: always
  type: dict
  sample: {10.9.9.9: Cannot assign requested address}
service_open_files:
  description:
    - The most open files a systemd service can get on this host (its C(LimitNOFILE=) is lowered to this),
      or null when C(/proc/1/limits) cannot be read.
  returned: always
  type: int
  sample: 1048576
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.arm_inference.vllm.plugins.module_utils.host_survey import ports


def main():
    module = AnsibleModule(argument_spec={"addresses": {"type": "list", "elements": "str", "default": []}},
                           supports_check_mode=True)
    module.exit_json(changed=False, **ports(module.params["addresses"]))


if __name__ == "__main__":
    main()
