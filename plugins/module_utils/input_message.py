# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How a message about bad input reads, for every module that raises one.

One line: ``<variable>: <what is wrong> (got <value>); <what to do>``. It lives apart from
input_rules so that vllm_serve, vllm_tuning, vllm_build and vllm_source can use it without importing
input_rules (which imports them).
"""

from __future__ import annotations

import re

SHOWN_LENGTH = 80
_URL_CREDENTIALS = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)[^/@\s]+@")


def redact_urls(text):
    """text with the user:token@ part of every URL in it removed (index URLs in pip.conf may carry one)."""
    return _URL_CREDENTIALS.sub(r"\1", text) if text else text


def shown(value):
    """A value as a message shows it: one line, URL credentials left out, long values cut."""
    if isinstance(value, str):
        text = repr(redact_urls(value))
    else:
        text = redact_urls(repr(value))
    text = text.replace("\n", "\\n")
    return text if len(text) <= SHOWN_LENGTH else text[:SHOWN_LENGTH - 3] + "..."


def input_message(variable, problem, got=None, fix="", show_got=True, got_text=None):
    """The one line for one problem with one variable. show_got=False leaves the value out (a secret);
    got_text replaces the shown value with a description of it (such as its type)."""
    text = "%s: %s" % (variable, problem)
    if got_text is not None:
        text += " (got %s)" % got_text
    elif show_got:
        text += " (got %s)" % shown(got)
    if fix:
        text += "; %s" % fix
    return text
