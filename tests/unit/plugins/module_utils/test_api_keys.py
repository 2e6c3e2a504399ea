"""plugins/module_utils/api_keys.py: the digest the gateway's hosts store instead of a key, and the
preflight's estimate that refuses a guessable key (vllm_gateway_api_keys, vllm_serve_api_key)."""

from __future__ import annotations

import hashlib
import secrets
import subprocess

import pytest

from ansible_collections.arm_inference.vllm.plugins.module_utils import api_keys


def test_the_digest_is_sha256_in_lowercase_hex_as_sha256sum_prints_it():
    key = "6c7c6b5e209c56001c0f83c2c0bd64ab-é"
    printed = subprocess.run(["sha256sum"], input=key.encode("utf-8"), capture_output=True, check=True).stdout
    assert api_keys.key_digest(key) == printed.split()[0].decode()
    assert api_keys.key_digest(key) == hashlib.sha256(key.encode()).hexdigest() and len(api_keys.key_digest(key)) == 64
    # Keys that share a prefix share nothing in their digests.
    assert api_keys.key_digest(key[:-1])[:8] != api_keys.key_digest(key)[:8]


@pytest.mark.parametrize("key", [
    "a" * 64,                              # one character repeated
    "ab" * 32,                             # a two-letter alphabet
    "0110100110010110" * 4,                # binary digits, however long
    "abcdefgh" * 4,                        # a repeated word of 8 different characters
    "changeme-changeme-changeme",          # a repeated word with a tail
    "password1234",                        # too short for any alphabet
    "Password12345678",                    # 16 characters, 62 estimated bits
    "molecule-only-key",                   # a phrase: few different characters for its length
    "941eeb2bdf0cb3dc",                    # `openssl rand -hex 8`: below 64 estimated bits unless all 16 differ
])
def test_guessable_keys_are_weak(key):
    assert api_keys.weak_key(key), (key, api_keys.estimated_bits(key))


@pytest.mark.parametrize("key", [
    "molecule-only-key-7d1f0c2a9b",        # the keys the test inventories use
    "local-target-only-key-3b9e61f0",
    "molecule-only-gateway-key-51c0d9e2",
    "integration-only-key-5e0c",
    "0123456789abcdef",                    # 16 different characters: exactly 64 estimated bits
])
def test_keys_with_enough_different_characters_pass(key):
    assert not api_keys.weak_key(key), (key, api_keys.estimated_bits(key))


def test_what_the_message_recommends_always_passes():
    # `openssl rand -hex 32` and a 32-character hex key: 2000 draws each, none refused.
    assert not any(api_keys.weak_key(secrets.token_hex(32)) for dummy in range(2000))
    assert not any(api_keys.weak_key(secrets.token_hex(16)) for dummy in range(2000))
    assert "openssl rand -hex 32" in api_keys.WEAK_KEY_FIX


def test_a_repeated_unit_counts_once():
    assert api_keys.estimated_bits("abc" * 20) == pytest.approx(api_keys.estimated_bits("abc"))
    assert api_keys.estimated_bits("") == 0.0
    assert api_keys.estimated_bits("0123456789abcdef") == pytest.approx(64.0)
