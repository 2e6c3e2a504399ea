#!/bin/sh
# The vault password of this scenario's host_vars/debian12-amd64-engine/vault.yml, for molecule only
# (molecule.yml points ANSIBLE_VAULT_PASSWORD_FILE here). It guards a throwaway sudo password of a test
# container that only this machine can reach; a fleet keeps its vault password out of the repository
# (a password manager, AWX's vault credential).
echo molecule-engine-vault-only
