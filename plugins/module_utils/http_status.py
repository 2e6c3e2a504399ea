# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The HTTP status a local listener answers with, for the roles' probes of what they just started (vLLM instances,
the gateway). They probe the host's own loopback listeners, whose certificates do not name the address asked: the
certificate is not checked."""

from __future__ import annotations

import http.client
import urllib.error

from ansible.module_utils.urls import open_url


def status(url, headers=None, timeout=10):
    """The HTTP status `url` answers a GET with (with `headers`); None when nothing answers."""
    try:
        return open_url(url, headers=headers, timeout=timeout, validate_certs=False).status
    except urllib.error.HTTPError as error:
        return error.code
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError):
        return None
