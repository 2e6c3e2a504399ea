# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a Python venv says of itself in files, read without running anything in it (a venv is its owner's: its
Python, and any .pth file in its site-packages, would run that owner's code): the Python version its pyvenv.cfg
names, and distribution names as pip compares them."""

from __future__ import annotations

import os
import re
import stat

# venv writes "version = 3.11.2", virtualenv "version_info = 3.11.2.final.0".
PYVENV_VERSION = re.compile(r"^\s*version(?:_info)?\s*=\s*(\d+\.\d+)", re.MULTILINE)


def canonical_name(name):
    """A distribution name as pip compares it (PEP 503): case, -, _ and . alike."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pyvenv_version(venv):
    """major.minor of the venv's Python as its pyvenv.cfg names it, or None (no file, no version in it, or not a
    regular file: the venv's owner could make it a link to another file, which is not followed, or a FIFO, on which
    a root reader would wait forever)."""
    try:
        descriptor = os.open(os.path.join(venv, "pyvenv.cfg"), os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        found = PYVENV_VERSION.search(handle.read(64 * 1024).decode("utf-8", "replace"))
    return found.group(1) if found else None
