"""Fixtures the module tests share."""

from __future__ import annotations

import os
import stat

import pytest


@pytest.fixture
def fdopen_modes(monkeypatch):
    """The mode of every file descriptor os.fdopen is given, in order: a module that writes a secret must have made
    its temporary file private before the first byte goes in."""
    modes = []
    real_fdopen = os.fdopen

    def watching(handle, *args, **kwargs):
        modes.append(stat.S_IMODE(os.fstat(handle).st_mode))
        return real_fdopen(handle, *args, **kwargs)

    monkeypatch.setattr(os, "fdopen", watching)
    return modes
