# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""API keys: the digest a host stores in place of a key, and the estimate that refuses a guessable one.

The gateway's hosts hold only key_digest() of each client key (HAProxy computes the same digest of the
key a client presents, with its sha2(256) and hex converters, and looks that up). weak_key() is the
preflight's rule for every key the collection is given (vllm_gateway_api_keys, vllm_serve_api_key); it
never returns anything derived from the key beyond yes or no, so no message can show it.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter

# What a key must carry at least, as estimated below: a random key of 24 or more hex characters
# (`openssl rand -hex 12`) passes it in practice, `openssl rand -hex 32` always does.
MIN_KEY_BITS = 64
# A key written from fewer different characters is a pattern, not random output.
MIN_DISTINCT_CHARACTERS = 8
# weak_key() in words, for every variable that holds a key.
WEAK_KEY_PROBLEM = ("has too little entropy to be a random key (a repeated pattern, too few different characters, "
                    "or too short for its alphabet)")
WEAK_KEY_FIX = "use a random key of 32 or more characters, e.g. from `openssl rand -hex 32`"


def key_digest(key):
    """The lowercase hex SHA-256 of the key's UTF-8 bytes: what HAProxy's `sha2(256),hex,lower` makes of it."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _repeating_unit(key):
    """The shortest text whose repetition makes the key ("abcabcab" -> "abc"); the key itself when none."""
    for period in range(1, len(key)):
        if all(key[index] == key[index - period] for index in range(period, len(key))):
            return key[:period]
    return key


def estimated_bits(key):
    """A deliberately low estimate of the key's entropy: its shortest repeating unit's length times the
    Shannon entropy per character of that unit's character counts. It cannot see a dictionary word, only
    repetition and a small or lopsided alphabet."""
    unit = _repeating_unit(key)
    if not unit:
        return 0.0
    counts = Counter(unit).values()
    per_character = -sum(count / len(unit) * math.log2(count / len(unit)) for count in counts)
    return len(unit) * per_character


def weak_key(key):
    """True when the key is too guessable: fewer than MIN_DISTINCT_CHARACTERS different characters, or
    below MIN_KEY_BITS by estimated_bits()."""
    return len(set(key)) < MIN_DISTINCT_CHARACTERS or estimated_bits(key) < MIN_KEY_BITS
