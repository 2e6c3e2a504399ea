#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_model_fetch
short_description: Place verified model weights in the model store
version_added: 0.1.0
description:
  - Keeps each model as C(<store>/<name>/<revision>) with a C(current) symlink per model and a record
    (C(.state.json)) of every file's sha256 and size, the commit a hub branch or tag resolved to, and the
    revision that was current before.
  - A re-run at a placed, intact revision decides from that record alone and creates no network client.
  - New revisions are written into C(<store>/<name>/.staging-<revision>) on the same file system, every file is
    verified, and the directory is renamed into place; C(current) is switched by renaming a new link over it.
    A failure removes the staging directory and leaves the previous revision current.
  - Free disk is checked against the bytes the source announces before the first byte is written.
  - An HTTP(S) archive (a URL ending in C(.tar), C(.tar.gz), C(.tgz), C(.tar.xz), C(.txz), C(.tar.bz2), C(.tbz2) or
    C(.zip)) is streamed into C(<store>/<name>/.staging-<revision>/.archive/), a name the store reserves in the
    staging directory, and verified against its sha256; its members are checked (regular files and directories only,
    relative names without C(..), none under C(.archive)) and weighed, then extracted one by one into the staging
    directory (one common top-level directory stripped), and the archive is removed before every extracted file is
    verified and recorded like any other source's. A transfer that stops early leaves the partial archive there and
    the next run for the revision goes on from its last byte, as for a file list; a refusal removes it with staging.
  - Hub sources need C(huggingface_hub), S3 sources C(boto3), in the interpreter that runs the module (the role's
    tools venv).
options:
  action:
    description:
      - V(place) places O(source) (for a controller source, from O(staged)).
      - V(plan) reports whether a controller source's revision still has to be copied, checks free disk and
        creates the staging directory the copy goes to.
      - V(manifest) (run on the controller) computes a directory's manifest and verifies it against O(sha256) or
        O(sha256sums) when given.
      - V(status) (a model with O(mirror)) reports, read-only, whether this host holds the revision its source leads to.
      - V(seed) (a model with O(mirror)) makes the mirror hold that revision, from this host's store, or else from
        the origin (placing it on this host too); for a controller source it runs on the controller and publishes
        the directory.
      - V(activate) makes O(revision), a revision the store already holds intact, current again, without fetching or
        pruning anything (the rolling update's rollback, to the revision its restored units name). Needs O(store),
        O(name) and O(revision); O(source) is not used.
      - V(resolve) (run on the controller, once per run) returns the commit a hub source's branch or tag leads to now
        (RV(resolved)), from the hub's API, so that every host places that commit (O(resolved)); null, with
        RV(unresolved) saying why, when the hub cannot be reached from the controller.
      - V(reach) (the preflight's question, read-only whatever the check mode) tells whether this host can place
        O(source) before any host changes. Nothing is asked of the source when the host holds the revision it leads
        to; else the source must answer as placing it would begin (V(place) in check mode, with the fit and disk
        checks), a hub source without the hub client through the hub's API, an S3 source without boto3 by its
        endpoint answering (RV(reached) says which).
    type: str
    choices: [place, plan, manifest, status, seed, activate, resolve, reach]
    default: place
  resolved:
    description:
      - For a hub source whose O(revision) is a branch or tag, the commit V(resolve) found it leads to in this run. The
        host places that commit (asking the hub for it, not for the branch) and records that the branch leads there.
    type: str
  store:
    description: Root of the model store.
    type: path
  name:
    description: The model's name (its directory in the store).
    type: str
  source:
    description:
      - Source URI, C(hf://org/name), C(s3://bucket/prefix) or C(https://host/dir/) (the files named by O(sha256) or
        O(sha256sums) under that prefix or URL), C(https://host/dir/model.tar.gz) (an archive of the model directory,
        its own checksum in O(sha256) or O(sha256sums)), C(file:///dir/on/host) or C(controller:///dir/on/controller).
      - Required by every action but V(activate).
    type: str
  revision:
    description: Hub commit, tag or branch; for other sources a label (default, derived from the checksums).
    type: str
  token:
    description: Hub token for gated or private models. Never logged.
    type: str
  include:
    description: Glob patterns of the hub files to take (all when empty).
    type: list
    elements: str
  exclude:
    description: Glob patterns of hub files to leave out.
    type: list
    elements: str
  endpoint:
    description: Hub endpoint (a mirror); default the client's.
    type: str
  region:
    description: For s3 sources, the bucket's region (default boto3's, from the host's configuration).
    type: str
  endpoint_url:
    description: For s3 sources, the endpoint of an S3-compatible store (default AWS's for the region).
    type: str
  access_key_id:
    description:
      - For s3 sources, an access key id with O(secret_access_key); without them boto3's own credential chain is used
        (the instance profile on EC2). Never logged.
    type: str
  secret_access_key:
    description: For s3 sources, the secret of O(access_key_id). Never logged.
    type: str
  headers:
    description:
      - For https and http sources (file lists and archives), HTTP headers sent with every request to the source's own
        origin (scheme, host and port), such as C(Authorization) or C(X-Api-Key); never along a redirect, never to a
        O(sha256sums) URL on another origin. Not C(Range), C(Host), C(Content-Length), C(Transfer-Encoding),
        C(Connection) or C(Accept-Encoding). Never logged, never stored in the state file.
    type: dict
  sha256:
    description: File name to sha256 for https, file and controller sources; for an archive, its own file name only.
    type: dict
  sha256sums:
    description:
      - A SHA256SUMS file, relative to the source directory (or URL; for an archive, the archive's directory) or
        absolute. For an archive it must list the archive's file name.
    type: str
  manifest:
    description: For controller sources, the manifest V(manifest) computed on the controller.
    type: dict
  staged:
    description: For controller sources, the staging directory the files were copied to.
    type: path
  group:
    description: Group that may read the store (the serving group).
    type: str
  keep:
    description: Revisions to keep per model; current and the one current before this run are never pruned.
    type: int
    default: 2
  min_free_disk_gib:
    description: Free space to leave on the store's file system after the download.
    type: float
    default: 1
  workers:
    description: Files of a hub, HTTP(S) file list or S3 source downloaded at once.
    type: int
    default: 4
  ca_bundle:
    description:
      - A PEM bundle on the host that hub, HTTPS and S3 downloads trust instead of the clients' own CA store (a
        TLS-intercepting proxy's CA). Default the clients' own. For the hub it reaches the hub client's HTTP client
        and hf_xet, which fetches Xet-backed files (through C(SSL_CERT_FILE), the one CA setting hf_xet reads).
    type: path
  ca_bundle_pem:
    description:
      - For V(reach), the PEM text of the bundle O(ca_bundle) will be once the role installs it (the preflight runs
        before it is on the host). It is written to the module's temporary directory and trusted for this question
        only.
    type: str
  mirror:
    description:
      - C(s3://bucket/prefix) the fleet fetches this model from once. O(region), O(endpoint_url), O(access_key_id)
        and O(secret_access_key) are the mirror's then.
    type: str
  mirror_revision:
    description: With V(place), place this revision from O(mirror) (the one V(seed) published).
    type: str
  mirror_manifest:
    description: With O(mirror_revision), each file's sha256 as the seeder verified it (V(seed)'s RV(manifest)).
    type: dict
  mirror_writer:
    description:
      - With V(seed), the inventory host that writes O(mirror) when it is not this one (C(vllm_model_mirror_writer)).
        This host then only reads the mirror - it never uploads, and never rewrites the mirror's C(refs.json) - and
        refuses, before anything changes, a revision the mirror does not hold yet. Empty, this host may write it.
    type: str
    default: ""
  summary:
    description:
      - For controller sources with V(plan), what action V(manifest) read of the directory on the controller
        (RV(summary)); the fit check runs vllm_serve's rules on it before anything is copied.
    type: dict
  verify:
    description:
      - How a re-run checks a placed revision before it decides from the record. V(quick) compares the file set and
        each file's size, mtime and inode with the record (stat only). V(full) also reads every file and compares
        its sha256 (for a scheduled run). A revision that differs is placed again from its source, with a warning
        saying what changed.
    type: str
    choices: [quick, full]
    default: quick
  fit:
    description:
      - What the fit check weighs a new revision against, before its first byte is downloaded (or, for a
        controller source, copied). C(facts) is C(ansible_facts.arm_inference_host) (the host_facts module);
        C(instances) and C(serve_model) are vllm_serve's instances and default model as its contract publishes
        them (every instance that names this model is checked in its layout, or the single-instance layout when
        none does); C(kv_cache_min_gib) and C(memory_headroom_gib) are vllm_serve's floor and headroom.
      - Before any weight byte moves, a hub, HTTP file list, S3 or mirror source's small files (C(config.json),
        C(model.safetensors.index.json), a legacy quantization file; size-capped, strict JSON, checked against the
        source's pins) are read and vllm_serve's own rules run on them per layout (C(model_serving) in
        module_utils/vllm_tuning.py; a quantization its CPU backend does not serve on this host is refused, and the
        weights are weighed at the dtype the instance serves them in, float32 on a CPU without bf16). The same rules
        run on the verified files (with their safetensors headers) in staging, before the revision becomes current,
        for every source.
      - A revision already placed is not checked again (a re-run reads no metadata). Without C(facts) nothing is
        checked.
    type: dict
author:
  - Arm Inference maintainers (@arm-inference)
notes:
  - Supports check mode; in check mode a hub source's metadata may be read, nothing is written.
"""

EXAMPLES = r"""
- name: Place a hub model at a pinned commit
  arm_inference.vllm.vllm_model_fetch:
    store: /var/lib/vllm-models
    name: tiny
    source: hf://org/tiny
    revision: 0123456789abcdef0123456789abcdef01234567
    group: vllm-serve
"""

RETURN = r"""
revision:
  description: The revision placed (a hub commit, or the label of another source).
  returned: always
  type: str
weight_bytes:
  description:
    - Bytes of the weight files the source announces (or the record holds), before any download; for a revision this
      run placed, what the verified files hold. An archive announces only its own size, which stands for its weights
      until its members are read.
  returned: always
  type: int
total_bytes:
  description: Bytes of every file of the model (for an archive not read yet, the archive's own size).
  returned: always
  type: int
fit:
  description:
    - For a revision not placed yet, the fit check's numbers per layout checked (C(variable), C(per_rank_gib),
      C(node), C(node_share_gib), C(kv_budget_gib), C(checked)); for an archive, those of the check with its members'
      exact sizes.
  returned: when a new revision was weighed
  type: list
  elements: dict
free_bytes:
  description: Free bytes on the store's file system before the placement.
  returned: action place and plan
  type: int
needed:
  description:
    - For V(plan), whether the revision still has to be copied (and where, in RV(staging)); for V(status), whether
      this host lacks the revision its source leads to.
  returned: action plan and status
  type: bool
staging:
  description: For V(plan), the staging directory a controller source is copied to.
  returned: action plan
  type: str
manifest:
  description: For V(manifest), each file's sha256 and size; for V(seed), each file's sha256 in the mirror.
  returned: action manifest and seed
  type: dict
summary:
  description:
    - With V(manifest), what vllm_serve will read of the directory (C(read_model_dir) of module_utils/vllm_model_info.py,
      with the architectures, checkpoint dtype, quantization, weight bytes and safetensors tensor bytes), for O(summary)
      of V(plan).
  returned: with V(manifest)
  type: dict
seeded_from:
  description: For V(seed), where the mirror's revision came from (V(store), V(origin), V(mirror), V(controller)).
  returned: action seed
  type: str
uploaded_bytes:
  description: For V(seed), the bytes uploaded to the mirror (boto3's count).
  returned: when V(seed) published a revision
  type: int
reached:
  description:
    - For V(reach), how the source was asked (V(placed) when nothing needed asking; V(source), V(hub API),
      V(endpoint), V(directory), or V(on the controller) for a controller source).
  returned: action reach
  type: str
mirror:
  description:
    - For V(reach) of a model with a fleet mirror that this host does not hold, how the mirror was asked (V(refs read)
      with boto3, V(endpoint) without).
  returned: action reach, when the model has a mirror
  type: str
resolved:
  description: For V(resolve), the commit the branch or tag leads to (the commit itself for a commit); null when unresolved.
  returned: action resolve
  type: str
unresolved:
  description: For V(resolve), why the hub gave no answer (it cannot be reached from the controller).
  returned: when V(resolve) could not reach the hub
  type: str
pruned:
  description: Revisions removed (or that would be in check mode).
  returned: action place
  type: list
  elements: str
placed:
  description:
    - The C(vllm_model_placed) entry of this model, its stable path C(<store>/<name>/current) among them, and
      C(previous_revision), the revision current before (null on the first placement).
  returned: action place and activate
  type: dict
"""

import functools
import grp
import hashlib
import json
import os
import re
import select
import shutil
import signal

from ansible.module_utils.basic import AnsibleModule, _load_params
from ansible.module_utils.six.moves import http_client
from ansible.module_utils.six.moves.urllib.parse import quote, urljoin, urlsplit
from ansible.module_utils.urls import Request, make_context, open_url
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_archive
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_info
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_s3 as s3
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_store as store_rules
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_tuning
from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_model_store import ModelStoreError


def _model_from_params(params):
    model = dict((key, params[key]) for key in store_rules.MODEL_KEYS if params.get(key) is not None)
    model = store_rules.normalize_model(model, 0)
    if params.get("resolved"):
        # The commit the controller resolved a hub branch or tag to for the whole run (action resolve): it names a
        # directory of the store, so it is checked like any answer from outside.
        if model["kind"] != "hf":
            raise ModelStoreError("%s: resolved applies to hub sources only" % model["name"])
        store_rules.check_revision(params["resolved"], "hf", "vllm_model_models (%s).revision: the controller "
                                   "resolved %s" % (model["name"], model["revision"]), "resolve it again")
    model["resolved"] = params.get("resolved") or None
    return model


def _operator_manifest(model, root):
    """{name: sha256} the operator gave, from sha256 or a SHA256SUMS file."""
    if model.get("sha256"):
        return dict((name, digest.lower()) for name, digest in model["sha256"].items())
    if model.get("sha256sums"):
        path = model["sha256sums"] if model["sha256sums"].startswith("/") else os.path.join(root, model["sha256sums"])
        try:
            with open(path, encoding="utf-8") as handle:
                return store_rules.parse_sha256sums(handle.read(), path)
        except OSError as error:
            raise ModelStoreError("sha256sums: cannot read %s (%s); name an existing SHA256SUMS file" % (path, error))
    return None


def _sums_file_name(model, root):
    """The SHA256SUMS file itself when it lies inside the directory: it is not part of the model."""
    sums = model.get("sha256sums")
    if not sums:
        return None
    path = sums if sums.startswith("/") else os.path.join(root, sums)
    relative = os.path.relpath(path, root)
    return None if relative.startswith("..") else relative


def directory_manifest(model, root):
    """Verify a directory against the operator's checksums (or hash it when none are given)."""
    if not os.path.isdir(root):
        raise ModelStoreError("%s: %s is not a directory (got %s); point source at the model's directory"
                              % (model["name"], root, store_rules.shown(model["source"])))
    expected = _operator_manifest(model, root)
    skip = _sums_file_name(model, root)
    if expected is None:
        expected = dict((name, {}) for name in store_rules.list_files(root) if name != skip)
    else:
        expected = dict((name, {"sha256": digest}) for name, digest in expected.items())
        if skip and skip not in expected:
            expected[skip] = {}
    manifest = store_rules.verify_files(root, expected)
    if skip:
        manifest.pop(skip, None)
    return manifest


class Store:
    def __init__(self, module):
        params = module.params
        self.module = module
        self.root = params["store"]
        self.keep = params["keep"]
        self.reserve = int(params["min_free_disk_gib"] * (1 << 30))
        self.group = params["group"]
        self.gid = grp.getgrnam(self.group).gr_gid if self.group and not module.check_mode else 0
        # activate names a placed revision only: no source to normalize.
        self.model = _model_from_params(params) if params["action"] != "activate" else None
        self.name = self.model["name"] if self.model else store_rules.check_model_name(params["name"], "name")
        self.dir = os.path.join(self.root, self.name)
        if os.path.lexists(self.dir):  # a model directory that is a link out of the store is refused
            store_rules.check_inside(self.root, self.dir)
        # A run that finds no state file removes no revision it did not place (a lost file must not delete what is
        # serving).
        self.recorded = os.path.exists(os.path.join(self.dir, store_rules.STATE_FILE))
        self.state = store_rules.read_state(self.dir)
        self.current = store_rules.current_revision(self.dir) if os.path.isdir(self.dir) else None
        self.cap = None  # the TransferCap of a placement's downloads (fetch)
        # {file: sha256} of what a download wrote, hashed by the download itself (as the bytes arrived, or right
        # after, beside the other transfers): fetch's verification then reads that file no second time.
        self.hashed = {}

    # Ownership: root, readable by the serving group only.
    def _own(self, path, directory):
        if os.path.islink(path):
            return
        os.chown(path, 0, self.gid)
        os.chmod(path, 0o750 if directory else 0o640)

    def _own_tree(self, root):
        self._own(root, True)
        for directory, subdirectories, files in os.walk(root):
            for name in subdirectories:
                self._own(os.path.join(directory, name), True)
            for name in files:
                self._own(os.path.join(directory, name), False)

    def ensure_dirs(self):
        for path in (self.root, self.dir):
            if not os.path.isdir(path):
                os.makedirs(path, 0o750)
            self._own(path, True)

    def revision_path(self, revision, kind=None):
        """<store>/<name>/<revision>, the revision checked (a hub commit for kind hf, else a label) and the path
        proven to stay inside the model's directory."""
        store_rules.check_revision(revision, kind, "%s: revision" % self.name,
                                   "it came from a source that must be checked; nothing was written")
        return store_rules.entry_path(self.dir, revision)

    def staging(self, revision):
        self.revision_path(revision)
        return store_rules.entry_path(self.dir, store_rules.STAGING_PREFIX + revision)

    def placed(self, revision):
        """The record of revision when the store holds it as recorded (store_rules.changes: the file set, each file's
        size, mtime and inode, and with verify full every sha256), else None: it is placed again from its source,
        and a warning says what changed."""
        record = self.state["revisions"].get(revision)
        if not record:
            return None
        found = store_rules.changes(self.dir, revision, record, full=self.module.params["verify"] == "full")
        if not found:
            return record
        if os.path.isdir(os.path.join(self.dir, revision)):
            self.module.warn("%s: the placed files changed since they were verified (%s); the revision is placed "
                             "again from its source" % (os.path.join(self.dir, revision), ", ".join(found[:5])))
        return None

    def check_fit(self, revision, weight_bytes, consequence=None, summary=None):
        """Refuse a revision that cannot fit the host's memory per NUMA node, before any byte is written (or, for an
        archive, before any is extracted: consequence then says so, and the caller's cleanup what stays current).
        With summary (vllm_model_info's, from the revision's small files or its verified directory) each layout
        runs vllm_serve's own rules first (vllm_tuning.model_serving: a quantization its CPU backend does not serve
        here is refused) and weighs the weights at the dtype that instance serves them in (bfloat16 weights take
        twice their bytes as float32 on a CPU without bf16); without, the bytes as given."""
        fit = self.module.params["fit"] or {}
        if not fit.get("facts"):
            return None
        results = []
        for layout in store_rules.serving_layouts(self.name, fit.get("instances"), fit.get("serve_model") or ""):
            try:
                if summary is not None:
                    dummy, weights_gib = vllm_tuning.model_serving(
                        fit["facts"], summary, {"dtype": layout["dtype"], "model_label": "%s at %s" % (
                            self.name, revision)}, layout["variable"])
                    weight_bytes = int(weights_gib * vllm_model_info.GIB)
                checked = vllm_model_info.check_fit(
                    fit["facts"], weight_bytes, tensor_parallel_size=layout["tensor_parallel_size"],
                    instances=layout["instances"], kv_cache_min_gib=fit.get("kv_cache_min_gib", 1),
                    memory_headroom_gib=fit.get("memory_headroom_gib"), model="%s at %s" % (self.name, revision),
                    variable=layout["variable"])
            except vllm_tuning.TuningError as error:
                raise FitRefused("%s%s %s" % (error, "" if str(error).endswith(".") else ".", consequence or (
                    "Nothing was fetched; the previous revision (%s) stays current." % (self.current or "none"))))
            results.append(dict(checked, variable=layout["variable"]))
        return results

    def serving_summary(self, revision, record, expected, read):
        """The revision as vllm_serve will read it (vllm_model_info.listing_summary), from the sizes the source
        listed (record), its small files and the headers of its safetensors files alone, read through read(name,
        limit) -> the first limit + 1 bytes before any weight byte moves, each small file checked against the
        source's pins (expected) where it has them (a header, part of a weight file, is checked by the format's
        rules here and by the file's checksum once it is downloaded). None without fit facts or a reader (an
        archive: its files are known once it is downloaded; check_staged weighs them then)."""
        if read is None or not (self.module.params["fit"] or {}).get("facts"):
            return None

        def pinned(name, limit):
            data = read(name, limit)
            store_rules.verify_bytes(name, data[:limit + 1], (expected or {}).get(name) or {})
            return data

        sizes = dict((name, entry.get("size") or 0) for name, entry in record["files"].items())
        try:
            return vllm_model_info.listing_summary(
                sizes, pinned, "%s at %s" % (self.name, revision), head=read,
                check=lambda summary: self.check_fit(revision, summary["weight_bytes"], summary=summary))
        except FitRefused:
            raise
        except (vllm_model_info.ModelInfoError, ModelStoreError) as error:
            # A reader's own refusal names its variable already (.source, or .mirror for a mirror's copy).
            named = str(error).startswith("vllm_model_models (%s)." % self.name)
            raise ModelStoreError("%s%s; nothing but its small files was fetched, the previous revision (%s) stays "
                                  "current" % ("" if named else "vllm_model_models (%s).source: " % self.name, error,
                                               self.current or "none"))

    def check_staged(self, revision, root, consequence):
        """vllm_serve's rules (check_fit with summary) on the revision as it lies verified in root (staging, a host
        directory), its config, index and safetensors headers read there, before it becomes current."""
        if not (self.module.params["fit"] or {}).get("facts"):
            return None
        try:
            summary = vllm_model_info.read_model_dir(root)
        except vllm_model_info.ModelInfoError as error:
            raise ModelStoreError("vllm_model_models (%s).source: %s" % (self.name, " ".join(str(error).split())))
        return self.check_fit(revision, summary["weight_bytes"], consequence=consequence, summary=summary)

    def check_disk(self, revision, needed):
        free = store_rules.free_bytes(self.root)
        store_rules.check_free_disk(self.name, revision, needed, free, self.reserve, self.root)
        return free

    def commit(self, revision, record, staged=None, link_target=None):
        """Move a verified revision into place, record it, switch current, prune."""
        target = self.revision_path(revision, record["kind"])
        store_rules.check_file_names(record["files"], "%s: revision %s" % (self.name, revision),
                                     "it came from a source that must be checked; nothing was written")
        # Complete as vLLM reads it (config.json, every shard an index names), before anything of the store changes.
        store_rules.check_complete(staged or link_target, revision)
        if os.path.lexists(target):
            store_rules.remove_entry(self.dir, revision)
        if staged:
            self._own_tree(staged)
            # Durable before it is recorded: the bytes and names of the revision, then its name in the store
            # (write_state syncs the model's directory after the state file).
            store_rules.sync_tree(staged)
            os.rename(staged, target)
            store_rules.record_stats(target, record["files"])  # what a re-run compares (renaming keeps both)
        else:
            os.symlink(link_target, target)
        self.state["revisions"][revision] = record
        self.state["refs"][record["requested"]] = revision
        store_rules.write_state(self.dir, self.state)

    def reuse(self, revision, record, result, ref=None):
        """A revision placed and intact: nothing is fetched. ref (a branch, a checksums URL) now leads to it."""
        _announced(result, record)
        result["_record"] = record
        if ref is not None and self.state["refs"].get(ref) != revision:
            self.state["refs"][ref] = revision
            if not self.module.check_mode:
                store_rules.write_state(self.dir, self.state)
        return self.finish(revision, result)

    def fetch(self, revision, record, expected, download, result, disk_bytes=None, read=None, keep_in_staging=()):
        """Place a revision not held yet. Before the first byte: weigh it against the host's memory and check free
        disk (disk_bytes, default the record's total_bytes), from the sizes the source announced (record). Then
        download(staging) writes the files into a staging directory on the store's file system, each is verified
        against expected ({name: {sha256 or git_sha1, size}}; None when only the download knows the files, as for an
        archive: download returns them then), and the directory is renamed into place. With read (the source's
        reader of one small file, see serving_summary) vllm_serve's rules run on the revision's small files before
        the fit and disk checks; they run again on the verified files in staging before the switch. A failure leaves the
        previous revision current and removes the staging directory, unless a transfer was interrupted
        (TransferInterrupted): what arrived then stays in staging, and the next run for this revision goes on from
        there (an HTTP file from its last byte, a file already complete is not fetched again) and verifies every
        byte as usual (keep_in_staging: directories of a client's own partial files it goes on from). Every transfer
        is capped (self.cap): at the size its source announced, and all together at what the disk check allowed;
        weights larger than announced are weighed again before the switch."""
        _announced(result, record)
        announced = record["weight_bytes"]
        result["fit"] = self.check_fit(revision, announced, summary=self.serving_summary(revision, record, expected,
                                                                                         read))
        staging = self.staging(revision)
        kept = store_rules.staged_bytes(staging)  # what an interrupted run left to go on from
        # What interrupted runs left for other revisions (a branch that moved since) goes now: it is counted as free.
        stale = [entry for entry in store_rules.staging_entries(self.dir) if entry != os.path.basename(staging)]
        reclaimed = sum(store_rules.staged_bytes(os.path.join(self.dir, entry)) for entry in stale)
        result["free_bytes"] = self.check_disk(revision, max(0, (record["total_bytes"] if disk_bytes is None
                                                                 else disk_bytes) - kept - reclaimed))
        result["changed"] = True
        result["_record"] = record
        if self.module.check_mode:
            return self.finish(revision, result)
        for entry in stale:
            store_rules.remove_entry(self.dir, entry)
        self.cap = store_rules.TransferCap(result["free_bytes"] + reclaimed - self.reserve, self.name)
        self.ensure_dirs()
        try:
            if os.path.lexists(staging) and (os.path.islink(staging) or not os.path.isdir(staging)):
                store_rules.remove_entry(self.dir, os.path.basename(staging))
            if not os.path.isdir(staging):
                os.mkdir(staging, 0o700)
            elif kept:
                # Only the files this source lists go on (what another source's client left there does not).
                store_rules.remove_unlisted(staging, set(expected or {}), tuple(keep_in_staging) + (
                    store_rules.PARTS_DIR,))
                result["resumed_bytes"] = store_rules.staged_bytes(staging)
            self.hashed = {}
            listed = download(staging)
            # Every file arrived whole: the parts records (none left by a complete download) are not the model's.
            shutil.rmtree(os.path.join(staging, store_rules.PARTS_DIR), ignore_errors=True)
            files = store_rules.verify_files(staging, listed if expected is None else expected, self.hashed)
            record.update(files=files, weight_bytes=store_rules.weight_bytes(
                dict((name, entry["size"]) for name, entry in files.items())),
                total_bytes=sum(entry["size"] for entry in files.values()))
            _announced(result, record)  # what the verified files hold
            # vllm_serve's rules again, on what was verified (a source that announced less, or no size, or whose
            # headers say more than its config): before the switch.
            result["fit"] = self.check_staged(revision, staging, "Read from the verified files in staging: it was "
                                              "not made current.") or result["fit"]
            self.commit(revision, record, staged=staging)
        except (ModelStoreError, OSError) as error:
            _fail_cleanly(self, staging, error)
        return self.finish(revision, result)

    def finish(self, revision, result, prune=True):
        """Switch current to revision (when it is not already) and prune; fills result."""
        previous = self.current
        if previous != revision:
            result["changed"] = True
            if not self.module.check_mode:
                store_rules.switch_current(self.dir, revision)
                self.state["history"].append({"revision": revision, "previous": previous, "at": store_rules.now()})
                self.state["history"] = self.state["history"][-20:]
        protected = [revision] + ([previous] if previous else [])
        pruned = store_rules.revisions_to_prune(self.state, self.keep, protected) if prune else []
        junk = store_rules.leftovers(self.dir, self.state, self.recorded) if prune else []
        result["pruned"] = pruned
        if pruned or junk:
            result["changed"] = True
        if not self.module.check_mode:
            for name in pruned + junk:
                store_rules.remove_entry(self.dir, name)
            for name in pruned:
                self.state["revisions"].pop(name, None)
                self.state["refs"] = dict((ref, commit) for ref, commit in self.state["refs"].items() if commit != name)
            if result["changed"]:
                store_rules.write_state(self.dir, self.state)
        record = self.state["revisions"].get(revision) or result.get("_record")
        result.pop("_record", None)
        result["revision"] = revision
        result["placed"] = store_rules.placed_fact(self.root, self.name, record, previous)
        if self.module.check_mode and not os.path.isdir(os.path.join(self.dir, revision)):
            # Check mode placed nothing: vllm_serve must not read (or refuse) a directory a real run would have.
            result["placed"]["pending"] = True
        return result


def _record(model, revision, requested, files, extra=None):
    sizes = dict((name, entry["size"]) for name, entry in files.items())
    # The state file is readable by the serving group: a presigned URL's query is not kept.
    record = {"revision": revision, "requested": requested, "kind": model["kind"],
              "source": store_rules.redact_url(model["source"]),
              "files": files, "weight_bytes": store_rules.weight_bytes(sizes),
              "total_bytes": sum(sizes.values()), "placed": store_rules.now()}
    record.update(extra or {})
    return record


def _announced(result, record):
    result["weight_bytes"] = record["weight_bytes"]
    result["total_bytes"] = record["total_bytes"]


class FitRefused(ModelStoreError):
    """vllm_serve's rules or the host's memory refuse the revision (Store.check_fit): the message is complete."""


class SourceUnreachable(ModelStoreError):
    """The source gave no answer at all (the network, DNS, TLS, a timeout), as opposed to an answer that refuses.
    reason: the client's own error as "<type>: <its first line>", for a caller that words its own line from it."""

    def __init__(self, message, reason=None):
        super().__init__(message)
        self.reason = reason


# A transfer that stopped before its end: what arrived stays in staging (module_utils, beside TransferRefused).
TransferInterrupted = store_rules.TransferInterrupted


def _fail_cleanly(store, staging, error):
    kept = ""
    if isinstance(error, TransferInterrupted) and staging and os.path.isdir(staging):
        kept = "; the %d bytes that arrived stay in %s and the next run goes on from there" % (
            store_rules.staged_bytes(staging), staging)
    elif staging and os.path.isdir(staging):
        shutil.rmtree(staging, ignore_errors=True)
    raise ModelStoreError("%s: %s; the previous revision (%s) stays current%s" % (
        store.name, error, store.current or "none", kept))


def hub_environment(store_root, ca_bundle):
    """The environment the hub client and hf_xet (which the client uses for Xet-backed files, in this process) run
    in, as {name: value, or None to remove it}. Both read it when they start, so it is set before the import.
    hf_xet's HTTP client (reqwest with rustls) takes no CA setting of its own: it trusts the certificates in
    SSL_CERT_FILE (and SSL_CERT_DIR) in place of the system's, so with ca_bundle SSL_CERT_FILE names it and
    SSL_CERT_DIR is removed: hf_xet trusts the bundle alone, as the hub client's own HTTP client does."""
    environment = {"HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1",
                   "HF_HOME": os.path.join(store_root, ".hf-home"),
                   # hf_xet's chunk cache (10 GB by default in some builds, under HF_HOME) would grow outside staging,
                   # past the cap's watch: the store keeps each revision once, so the cache holds nothing it needs.
                   "HF_XET_CHUNK_CACHE_SIZE_BYTES": "0"}
    if ca_bundle:
        environment.update(SSL_CERT_FILE=ca_bundle, SSL_CERT_DIR=None)
    return environment


def _hub_client(store, module):
    """The hub client (imported only now: a placed revision never needs it), its HfApi and the token."""
    model = store.model
    for name, value in hub_environment(store.root, module.params["ca_bundle"]).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    try:
        import huggingface_hub
    except ImportError as error:
        raise ModelStoreError("%s: huggingface_hub is not importable by %s (%s); run the role, which installs it into "
                              "vllm_model_tools_venv" % (model["name"], module._name, error))
    _hub_session(huggingface_hub, module.params["ca_bundle"])
    token = model["token"] or False
    return huggingface_hub, huggingface_hub.HfApi(endpoint=model["endpoint"], token=token), token


def _hub_refusal(model, endpoint, requested, code):
    """The one-line error for the hub's refusals (its X-Error-Code, or the hub client's error of that kind)."""
    variable = "vllm_model_models (%s)" % model["name"]
    if code == "RevisionNotFound":
        return ModelStoreError("%s.revision: %s has no revision %s (got %s); pin a commit, tag or branch that exists"
                               % (variable, model["location"], requested, requested))
    if code == "GatedRepo":
        return ModelStoreError("%s.token: %s is gated and %s (got %s); accept its terms on the hub and set a token "
                               "with read access" % (variable, model["location"],
                                                     "the token was refused" if model["token"] else "no token is set",
                                                     "a token" if model["token"] else "no token"))
    return ModelStoreError("%s.source: no repository %s on %s, or it is private (got %s); check the id, or set a "
                           "token" % (variable, model["location"], endpoint, model["source"]))


def _hub_unreachable(model, endpoint, error, where=""):
    return SourceUnreachable(
        "vllm_model_models (%s).endpoint: the hub at %s cannot be reached%s (got %s: %s); check the endpoint, proxy and "
        "CA settings, or pin a revision already placed" % (model["name"], endpoint, where, type(error).__name__,
                                                           " ".join(str(error).split())[:300]),
        reason="%s: %s" % (type(error).__name__, str(error).splitlines()[0] if str(error) else ""))


def _hub_pins(model, api, requested):
    """The commit the hub resolves requested to and {file: {sha256 (LFS) or git_sha1, size}} of the files the model
    takes there: what the hub itself publishes, so what every byte is checked against, wherever it comes from."""
    from huggingface_hub import errors as hub_errors

    variable = "vllm_model_models (%s)" % model["name"]
    try:
        info = api.model_info(model["location"], revision=requested, files_metadata=True)
    except hub_errors.RevisionNotFoundError:
        raise _hub_refusal(model, api.endpoint, requested, "RevisionNotFound")
    except hub_errors.GatedRepoError:
        raise _hub_refusal(model, api.endpoint, requested, "GatedRepo")
    except hub_errors.RepositoryNotFoundError:
        raise _hub_refusal(model, api.endpoint, requested, "RepoNotFound")
    except Exception as error:  # connection refused, DNS, TLS, timeouts: the client's many exception types
        raise _hub_unreachable(model, api.endpoint, error)
    # The hub's answer becomes a directory of the store: a commit and nothing else.
    revision = store_rules.check_revision(info.sha, "hf", "%s.endpoint: the hub at %s answered for %s" % (
        variable, api.endpoint, requested), HUB_HOSTILE)
    siblings = dict((sibling.rfilename, {
        "size": sibling.size, "blob_id": sibling.blob_id, "lfs": sibling.lfs is not None,
        "lfs_sha256": sibling.lfs.sha256 if sibling.lfs else None, "lfs_size": sibling.lfs.size if sibling.lfs else None})
        for sibling in info.siblings or [])
    return revision, _hub_expected(model, api.endpoint, revision, siblings)


HUB_HOSTILE = "the hub or a proxy in between is not answering as the hub does; nothing was written"


def _hub_expected(model, endpoint, revision, siblings):
    """{file: {sha256 (LFS) or git_sha1, size}} of the files the model takes from the hub's listing at revision
    (siblings: {name: {size, blob_id, lfs, lfs_sha256, lfs_size}}, from the hub client or the hub's JSON): each name
    checked as a path, each file pinned by a checksum the hub publishes, or the listing refused."""
    variable = "vllm_model_models (%s)" % model["name"]
    names = store_rules.select_files(sorted(siblings), model["include"], model["exclude"])
    if not names:
        raise ModelStoreError("%s.include: no file of %s at %s matches (got include %s, exclude %s); adjust the "
                              "patterns" % (variable, model["location"], revision, model["include"], model["exclude"]))
    store_rules.check_file_names(names, "%s.endpoint: the hub at %s lists a file of %s" % (
        variable, endpoint, revision), HUB_HOSTILE)
    expected = {}
    for name in names:
        sibling = siblings[name]
        if sibling["lfs"] and store_rules.is_sha256(sibling["lfs_sha256"]):
            expected[name] = {"sha256": sibling["lfs_sha256"].lower(), "size": sibling["lfs_size"]}
        elif not sibling["lfs"] and re.match(r"^[0-9a-f]{40}$", sibling["blob_id"] or ""):
            expected[name] = {"git_sha1": sibling["blob_id"], "size": sibling["size"]}
        else:  # fail closed: a file nothing can be checked against is never placed
            raise ModelStoreError("%s.endpoint: the hub at %s lists %s of %s at %s without a checksum (got LFS sha256 "
                                  "%s, blob id %s); leave it out with exclude, or ask the hub's operator"
                                  % (variable, endpoint, store_rules.shown(name), model["location"], revision,
                                     store_rules.shown(sibling["lfs_sha256"] or "none"),
                                     store_rules.shown(sibling["blob_id"] or "none")))
        size = expected[name]["size"]
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
            raise ModelStoreError("%s.endpoint: the hub at %s lists %s of %s at %s with size %s, not a byte count; %s"
                                  % (variable, endpoint, store_rules.shown(name), model["location"], revision,
                                     store_rules.shown(size), HUB_HOSTILE))
    return expected


def place_hub(store, module):
    model, result = store.model, {"changed": False}
    requested = model["revision"]
    revision = _known_revision(store, model)
    record = store.placed(revision) if revision else None
    if record:  # with the controller's resolution, the branch now leads here on this host too
        return store.reuse(revision, record, result, ref=requested if model["resolved"] else None)
    huggingface_hub, api, token = _hub_client(store, module)
    # The commit the controller resolved the branch to for every host, not the branch again: it may have moved.
    revision, expected = _hub_pins(model, api, model["resolved"] or requested)
    if model["resolved"] and revision != model["resolved"]:
        raise ModelStoreError("vllm_model_models (%s).endpoint: the hub at %s answers commit %s for %s, which the "
                              "controller resolved %s to (got %s); check that the hosts and the controller reach the "
                              "same hub" % (model["name"], api.endpoint, revision, model["resolved"], requested,
                                            revision))
    names = sorted(expected)
    existing = store.placed(revision)
    if existing:  # a branch now pointing at a commit placed earlier under another name
        return store.reuse(revision, existing, result, ref=requested)
    record = _record(model, revision, requested, dict(
        (name, {"size": entry["size"] or 0, "sha256": entry.get("sha256")}) for name, entry in expected.items()))

    def download(staging):
        def one(name):
            _hub_file(huggingface_hub, model, revision, token, staging, name, expected[name]["size"] or 0)

        def all_of_them():
            # Each response is held to the largest file the hub listed, all of them to what the disk check allowed.
            _hub_session(huggingface_hub, module.params["ca_bundle"], store.cap, largest)
            # The client writes a body in blocks of this size and loses the block in transit when a connection breaks:
            # its 10 MiB default re-sends up to 10 MiB per break. Set in this child only.
            huggingface_hub.constants.DOWNLOAD_CHUNK_SIZE = HUB_BLOCK
            try:
                store_rules.in_parallel(one, names, module.params["workers"])
            except ModelStoreError:
                raise
            except Exception as error:  # the client's download errors
                capped = _capped(error)
                if capped is not None:
                    raise capped
                raise TransferInterrupted("the download from %s failed (%s: %s)"
                                          % (api.endpoint, type(error).__name__, error))

        largest = max([entry["size"] or 0 for entry in expected.values()] or [0])
        # hf_xet writes Xet-backed files past that hook: the client runs in a child, staging watched from here.
        _in_child(all_of_them, _staging_watch(store, staging, largest, api.endpoint),
                  "the download from %s" % api.endpoint)
        # The client's own bookkeeping inside local_dir is not part of the model.
        shutil.rmtree(os.path.join(staging, ".cache"), ignore_errors=True)

    def read(name, limit):
        """The first limit + 1 bytes of a file (a small file, a header) through the hub client's own HTTP client (its
        headers, its redirects), asked for with a Range."""
        url = huggingface_hub.hf_hub_url(model["location"], name, revision=revision, endpoint=model["endpoint"])
        try:
            headers = dict(huggingface_hub.utils.build_hf_headers(token=token), Range="bytes=0-%d" % limit)
            with huggingface_hub.get_session().stream("GET", url, headers=headers) as response:
                huggingface_hub.utils.hf_raise_for_status(response)
                data = b""
                for chunk in response.iter_bytes():
                    data += chunk
                    if len(data) > limit:
                        break
                return data
        except Exception as error:  # the client's HTTP errors
            raise ModelStoreError("%s cannot be read from %s (%s: %s)" % (
                name, api.endpoint, type(error).__name__, " ".join(str(error).split())[:200]))

    return store.fetch(revision, record, expected, download, result, read=read, keep_in_staging=(".cache",))


# Where a hub file's partial download lies in staging, under the .cache directory the store keeps after an interruption.
HUB_PARTIALS = os.path.join(".cache", "partial")
# The block the hub client's http_get writes a body in, in the download child (see place_hub).
HUB_BLOCK = 1 << 20


def _hub_file(huggingface_hub, model, revision, token, staging, name, size):
    """One hub file into staging (size: what the hub listed). huggingface_hub 2.4 goes on from what it holds only
    within one call (its http_get asks for the rest with a Range after a connection breaks) and removes its partial file
    when the call fails, so a later run would start from zero: a file served over HTTP goes to a partial file of ours
    (HUB_PARTIALS, kept with staging after an interruption) that the client's own http_get goes on from, and is renamed
    into place when complete. A Xet-backed file goes through hf_hub_download (hf_xet fetches it). A file already in
    staging is complete (it is renamed there only then) and is verified with the others."""
    from huggingface_hub import file_download

    target = os.path.join(staging, name)
    if os.path.isfile(target):
        return
    url = huggingface_hub.hf_hub_url(model["location"], name, revision=revision, endpoint=model["endpoint"])
    if huggingface_hub.get_hf_file_metadata(url, token=token).xet_file_data is not None:
        huggingface_hub.hf_hub_download(model["location"], name, revision=revision, local_dir=staging,
                                        endpoint=model["endpoint"], token=token)
        return
    partial = os.path.join(staging, HUB_PARTIALS, name)
    os.makedirs(os.path.dirname(partial), exist_ok=True)
    with open(partial, "ab") as handle:
        if size and handle.tell() > size:  # more than the file holds: not a part of it
            handle.truncate(0)
        # The resolve URL itself: the client's HTTP client follows the hub's redirects and drops the token off its host.
        file_download.http_get(url, handle, resume_size=handle.tell(), expected_size=size or None,
                               headers=huggingface_hub.utils.build_hf_headers(token=token))
    os.makedirs(os.path.dirname(target), exist_ok=True)
    os.replace(partial, target)


def _hub_session(huggingface_hub, ca_bundle, cap=None, largest=0):
    """The hub client's HTTP client, through its documented hook, set_client_factory: the client it builds by default
    (the same request hook, redirects, no timeout), trusting ca_bundle when given; with cap (a TransferCap), every
    response body is counted as the client decodes it, and one larger than `largest` (the largest file the hub
    listed) or all of them beyond the cap's allowance is stopped: a hub that streams without a length is cut off."""
    import ssl
    import httpx2
    from huggingface_hub.utils import _http

    hooks = {"request": [_http.hf_request_event_hook]}
    if cap is not None:
        def capped(response):
            count = cap.counter(store_rules.redact_url(str(response.request.url)), largest)
            iter_bytes = response.iter_bytes

            def counted(*args, **kwargs):
                for chunk in iter_bytes(*args, **kwargs):
                    count(len(chunk))
                    yield chunk
            response.iter_bytes = counted

        hooks["response"] = [capped]
    verify = ssl.create_default_context(cafile=ca_bundle) if ca_bundle else True
    huggingface_hub.set_client_factory(lambda: httpx2.Client(event_hooks=hooks, follow_redirects=True, timeout=None,
                                                             verify=verify))


# How often the parent looks at staging while a child downloads (seconds).
WATCH_INTERVAL = 0.1
# The errors a download child reports to its parent, by the name of their class (never a pickled object).
_CHILD_ERRORS = dict((kind.__name__, kind) for kind in (ModelStoreError, store_rules.TransferRefused,
                                                        TransferInterrupted, SourceUnreachable))


def _in_child(work, watch, what):
    """work() in a forked child process while this one calls watch() every WATCH_INTERVAL seconds and once more when
    the child has ended. The hub client hands Xet-backed files to hf_xet, which fetches and writes them with its own
    HTTP client (threads of the process that calls it), past the cap's response hook: when watch() raises (staging
    grew past what the cap allows), the child and every thread of it is killed (SIGKILL) and the error raised here.
    The child reports its outcome through a pipe as the name of its error's class (one of _CHILD_ERRORS; any other
    error is an interruption) and its message, which is raised here as that class. A child ended by a signal this
    process did not send, or without a report, is an interruption of `what`."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: reports, and never returns (nothing of the module's exit runs twice)
        try:
            os.close(reader)
            report = {}
            try:
                work()
            except BaseException as error:  # everything reaches the parent, as a name and a message
                kind = next((kind.__name__ for kind in type(error).__mro__ if kind.__name__ in _CHILD_ERRORS), None)
                stopped = "%s stopped (%s: %s)" % (what, type(error).__name__, error)
                report = {"kind": kind or "TransferInterrupted", "message": str(error) if kind else stopped}
            with os.fdopen(writer, "w", encoding="utf-8") as pipe:
                json.dump(report, pipe)
        finally:
            os._exit(0)
    os.close(writer)
    answer = b""
    try:
        while True:
            if select.select([reader], [], [], WATCH_INTERVAL)[0]:
                chunk = os.read(reader, 65536)
                if not chunk:  # the child has ended
                    break
                answer += chunk
            watch()
        watch()  # what it wrote last
    except BaseException:
        os.kill(pid, signal.SIGKILL)
        raise
    finally:
        os.close(reader)
        status = os.waitpid(pid, 0)[1]
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        name = signal.Signals(number).name if number in set(signal.Signals) else "number %d" % number
        raise TransferInterrupted("%s stopped: its process (%d) was killed by signal %s, which this module did not "
                                  "send" % (what, pid, name))
    try:
        report = json.loads(answer.decode("utf-8"))
    except ValueError:
        raise TransferInterrupted("%s stopped: its process (%d) ended with exit status %d and no report"
                                  % (what, pid, os.WEXITSTATUS(status)))
    if report:
        raise _CHILD_ERRORS.get(report.get("kind"), ModelStoreError)(str(report.get("message")))


def _staging_watch(store, staging, largest, endpoint):
    """A look at staging for what passes no hook (hf_xet's writes): all of it may grow to what it held when the
    download began (what an interrupted run left) plus what the cap allows, no file past largest (the largest file
    the hub listed; 0: no such limit). A file renamed while it is looked at is counted once (by its inode)."""
    ceiling = store_rules.staged_bytes(staging) + store.cap.allowed
    variable = "vllm_model_models (%s).source" % store.name

    def watch():
        seen, total = set(), 0
        for directory, dummy, files in os.walk(staging):
            for name in files:
                try:
                    status = os.lstat(os.path.join(directory, name))
                except FileNotFoundError:  # renamed or removed by the client meanwhile
                    continue
                if (status.st_dev, status.st_ino) in seen:
                    continue
                seen.add((status.st_dev, status.st_ino))
                if largest and status.st_size > largest:
                    raise store_rules.TransferRefused(
                        "%s: the hub client wrote %d bytes to %s, more than the %d bytes of the largest file the hub "
                        "at %s listed; the transfer was stopped: check that hub and what is between it and this host"
                        % (variable, status.st_size, os.path.relpath(os.path.join(directory, name), staging), largest,
                           endpoint))
                total += status.st_size
        if total > ceiling:
            raise store_rules.TransferRefused(
                "%s: the hub client wrote %d bytes to staging from the hub at %s, past the %d bytes the disk check "
                "allowed (free space less vllm_model_min_free_disk_gib) on top of the %d bytes staged before; the "
                "transfer was stopped: check that hub, or free disk space if the model needs more"
                % (variable, total, endpoint, store.cap.allowed, ceiling - store.cap.allowed))
    return watch


def _capped(error):
    """The TransferCap refusal behind a client's error (the hub client may wrap what a hook raised), or None."""
    seen = 0
    while error is not None and seen < 5:
        if isinstance(error, ModelStoreError):
            return error
        error, seen = error.__cause__ or error.__context__, seen + 1
    return None


def place_host(store, module):
    model, result = store.model, {"changed": False}
    root = model["location"]
    requested = model["revision"]
    revision = requested or store.state["refs"].get(store_rules.manifest_revision(dict(
        (name, {"sha256": digest}) for name, digest in (_operator_manifest(model, root) or {}).items())))
    record = store.placed(revision) if revision else None
    if record:
        return store.reuse(revision, record, result)
    files = store_rules.record_stats(root, directory_manifest(model, root))
    derived = store_rules.manifest_revision(files)
    revision = requested or derived
    skip = _sums_file_name(model, root)
    record = _record(model, revision, revision, files, extra={"ignored": [skip]} if skip else None)
    record["requested"] = derived  # the ref a re-run without a label looks up
    _announced(result, record)
    try:
        store_rules.check_complete(root, revision)
        result["fit"] = store.check_staged(revision, root, "Read from %s: it was not linked." % root)
    except ModelStoreError as error:
        raise ModelStoreError("%s: %s; the previous revision (%s) stays current"
                              % (store.name, error, store.current or "none"))
    result["changed"] = True
    result["_record"] = record
    if not module.check_mode:
        store.ensure_dirs()
        store.commit(revision, record, link_target=root)
    return store.finish(revision, result)


def _http_base(model):
    """The URL the checksums' file names are relative to: a file list's own URL, an archive's directory."""
    if model["kind"] == "archive":
        return urljoin(model["source"], ".")
    return model["source"] if model["source"].endswith("/") else model["source"] + "/"


@functools.lru_cache(maxsize=4)
def _tls_context(ca_bundle):
    """One TLS context per CA setting for all of a run's requests (ansible's own make_context, as open_url builds for
    each request otherwise: reading the CA store took ~40 ms a request here)."""
    return make_context(cafile=ca_bundle)


def _http_open(model, url, method="GET", timeout=60, ca_bundle=None, offset=0, end=None, headers=None,
               unredirected=None):
    """One request (safe redirects followed), with headers; those named in unredirected (a token) go to url's host only,
    never along a redirect, and so do the model's own headers (_own_headers). With offset or end (the last byte
    wanted), a Range request (an origin may answer with the whole file: the caller reads what it needs). A refusal
    raises ModelStoreError, no answer SourceUnreachable."""
    ranged = offset or end is not None
    own = _own_headers(model, url)
    headers = dict(own, **(headers or {}))
    if ranged:
        headers["Range"] = "bytes=%d-%s" % (offset, "" if end is None else end)
    unredirected = list(unredirected or []) + list(own) or None
    try:
        return Request().open(method, url, timeout=timeout, follow_redirects="safe", context=_tls_context(ca_bundle),
                              headers=headers or None, unredirected_headers=unredirected)
    except Exception as error:  # HTTPError, URLError, TLS and socket errors
        # Neither the URL's query (a presigned signature) nor the error's copy of it is printed. An HTTP status is an
        # answer; anything else is no answer at all.
        kind = ModelStoreError if getattr(error, "code", None) is not None else SourceUnreachable
        raise kind("vllm_model_models (%s).source: %s cannot be fetched (got %s: %s); check the URL, proxy and CA "
                   "settings" % (model["name"], store_rules.redact_url(url), type(error).__name__,
                                 str(error).replace(url, store_rules.redact_url(url))))


def _origin(url):
    """(scheme, host, port) of a URL, the port its scheme's default when it names none."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:  # not a port number: no origin that matches another
        return None
    return parts.scheme.lower(), (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(
        parts.scheme.lower())


def _own_headers(model, url):
    """The operator's headers for an http(s) source (vllm_model_models[].headers: credentials), for a request to the
    source's own origin only (scheme, host and port): a SHA256SUMS URL on another host gets none of them, and
    _http_open sends them unredirected, so a redirect to anywhere gets none either."""
    headers = model.get("headers") or {}
    origin = _origin(url)
    return dict(headers) if headers and origin is not None and origin == _origin(model["source"]) else {}


def _http_read(model, url, limit, ca_bundle, headers=None, unredirected=None):
    """The first limit + 1 bytes of url (a small file, a header) into memory, asked for with a Range (_http_open's
    arguments)."""
    response = _http_open(model, url, ca_bundle=ca_bundle, end=limit, headers=headers, unredirected=unredirected)
    try:
        return response.read(limit + 1)
    finally:
        response.close()


def _http_key(model):
    """What a re-run without a revision label looks up: the checksums given, or the sums file's URL (with the
    archive's name for an archive: one SHA256SUMS file often lists several archives, the name picks the line)."""
    if model.get("sha256"):
        return store_rules.manifest_revision(dict((name, {"sha256": digest.lower()})
                                                  for name, digest in model["sha256"].items()))
    key = "sha256sums:" + store_rules.redact_url(urljoin(_http_base(model), model["sha256sums"]))
    return key + " " + model["archive"] if model["kind"] == "archive" else key


def _http_checksums(model, ca_bundle):
    """{file: sha256}: the operator's sha256, or the SHA256SUMS file fetched (relative to _http_base, or absolute)."""
    if model.get("sha256"):
        return dict((name, digest.lower()) for name, digest in model["sha256"].items())
    url = urljoin(_http_base(model), model["sha256sums"])
    return store_rules.parse_sha256sums(_http_open(model, url, ca_bundle=ca_bundle).read().decode("utf-8", "replace"),
                                        store_rules.redact_url(url))


def _http_size(model, url, ca_bundle):
    """The size a HEAD request announces, 0 when the server announces none."""
    length = _http_open(model, url, method="HEAD", ca_bundle=ca_bundle).headers.get("Content-Length")
    return int(length) if length and length.isdigit() else 0


def place_http(store, module):
    """An HTTP(S) file list: each file <source>/<name> of the checksums, streamed into staging."""
    model, result = store.model, {"changed": False}
    key = _http_key(model)
    revision = _known_revision(store, model)
    record = store.placed(revision) if revision else None
    if record:
        return store.reuse(revision, record, result)
    base = _http_base(model)
    ca_bundle = module.params["ca_bundle"]
    expected = _http_checksums(model, ca_bundle)
    revision = model["revision"] or store_rules.manifest_revision(
        dict((name, {"sha256": digest}) for name, digest in expected.items()))
    existing = store.placed(revision)
    if existing:
        return store.reuse(revision, existing, result, ref=key)
    names = sorted(expected)
    sizes = dict(zip(names, store_rules.in_parallel(lambda name: _http_size(model, base + quote(name), ca_bundle),
                                                    names, module.params["workers"])))
    record = _record(model, revision, key, dict((name, {"sha256": expected[name], "size": sizes[name]})
                                                for name in expected))

    def download(staging):
        def one(name):
            store.hashed[name] = _http_stream(model, base + quote(name), _staged_file(staging, name), ca_bundle,
                                              store.cap, sizes[name])

        store_rules.in_parallel(one, sorted(expected), module.params["workers"])

    def read(name, limit):
        return _http_read(model, base + quote(name), limit, ca_bundle)

    # A server that announces no Content-Length gives 0 above: the disk check's allowance caps the download then,
    # and the sha256 decides.
    return store.fetch(revision, record, dict((name, {"sha256": expected[name]}) for name in expected), download,
                       result, read=read)


# What one read of a transfer takes at most (bytes).
STREAM_BLOCK = 4 << 20


def _http_stream(model, url, path, ca_bundle, cap, limit=0):
    """Stream url into the file at path; returns the sha256 of the file's bytes, hashed as they arrived. More bytes
    than limit (the size announced, when one was) or than the placement's cap allows (store.cap) are refused as they
    arrive. With a size announced, a file an interrupted run left there goes on from its last byte (an HTTP range; an
    origin that answers with the whole file instead starts it again), and a complete one is not fetched again; its
    bytes on disk are hashed first. A transfer that stops early raises TransferInterrupted."""
    offset = os.path.getsize(path) if limit and os.path.isfile(path) and not os.path.islink(path) else 0
    offset = offset if offset <= limit else 0
    digest = hashlib.sha256()
    if offset:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(4 << 20), b""):
                digest.update(block)
        if offset == limit:
            return digest.hexdigest()
    try:
        response = _http_open(model, url, ca_bundle=ca_bundle, offset=offset)
    except ModelStoreError as error:
        raise TransferInterrupted(str(error))
    if offset and _range_answered(model, url, response, offset, limit) == 0:
        offset, digest = 0, hashlib.sha256()  # the whole file came back: it starts again
    count = cap.counter(store_rules.redact_url(url), limit - offset if limit else 0)
    # One buffer for the whole file: a new 4 MiB bytes object per read costs the page faults of a fresh mapping.
    buffer = memoryview(bytearray(STREAM_BLOCK))
    try:
        with open(path, "ab" if offset else "wb") as handle:
            written = handle.tell()  # on disk up to here, or asked to be (store_rules.start_writeback)
            while True:
                try:
                    length = response.readinto(buffer)
                except (OSError, http_client.HTTPException) as error:
                    raise TransferInterrupted("%s stopped after %d bytes (got %s: %s)" % (
                        store_rules.redact_url(url), handle.tell(), type(error).__name__, error))
                if not length:
                    break
                count(length)
                digest.update(buffer[:length])
                handle.write(buffer[:length])
                if handle.tell() - written >= store_rules.WRITEBACK_BYTES:
                    handle.flush()
                    store_rules.start_writeback(handle.fileno(), written, handle.tell() - written)
                    written = handle.tell()
            if limit and handle.tell() < limit:
                raise TransferInterrupted("%s stopped after %d of its %d bytes" % (
                    store_rules.redact_url(url), handle.tell(), limit))
            # On disk now, while the other files still arrive, rather than all of them at the commit's sync.
            handle.flush()
            os.fdatasync(handle.fileno())
    finally:
        response.close()  # a stopped transfer hangs up on the origin
    return digest.hexdigest()


def _range_answered(model, url, response, offset, limit):
    """Where the body of the answer to `Range: bytes=<offset>-` begins: 0 for the whole file (200, or 206 for bytes
    0-<end>/<limit>: it starts again), offset for exactly the rest of the file announced (206 bytes
    <offset>-<limit - 1>/<limit or *>). Any other 206 (another offset, end or size) is refused: its bytes appended, or
    written from the start, would make another file; staging goes and the next run fetches it from its start."""
    if response.getcode() != 206:
        return 0
    answered = response.headers.get("Content-Range", "")
    found = re.match(r"^bytes (\d+)-(\d+)/(\d+|\*)$", answered.strip())
    if found and int(found.group(2)) == limit - 1 and found.group(3) in (str(limit), "*"):
        if int(found.group(1)) in (0, offset):
            return int(found.group(1))
    response.close()
    raise ModelStoreError("vllm_model_models (%s).source: %s answered the request for its bytes %d- (of %d) with "
                          "Content-Range %s, not the rest of the file (an origin or proxy that answers ranges "
                          "wrongly); nothing of it is kept, the next run fetches the file from its start"
                          % (model["name"], store_rules.redact_url(url), offset, limit, store_rules.shown(answered)))


# The directory inside staging an archive is downloaded into (kept by an interrupted run, see place_archive).
ARCHIVE_DIR = ".archive"


def place_archive(store, module):
    """An HTTP(S) archive of the model directory: streamed into staging's reserved ARCHIVE_DIR, verified against the
    archive's sha256, its members checked and weighed with their exact sizes, then extracted member by member into
    staging, the archive removed, and each extracted file verified and recorded (sha256 and size)."""
    model, result = store.model, {"changed": False}
    key = _http_key(model)
    revision = _known_revision(store, model)
    record = store.placed(revision) if revision else None
    if record:  # decided from the record alone: nothing is asked of the origin
        return store.reuse(revision, record, result)
    ca_bundle, name, variable = module.params["ca_bundle"], model["archive"], "vllm_model_models (%s)" % model["name"]
    listed = _http_checksums(model, ca_bundle)
    if name not in listed:
        raise ModelStoreError("%s.sha256sums: %s does not list the archive %s (got %s); add the archive's line, as "
                              "sha256sum writes it in the archive's directory"
                              % (variable, store_rules.redact_url(urljoin(_http_base(model), model["sha256sums"])), name,
                                 store_rules.shown(sorted(listed))))
    digest = listed[name]
    revision = model["revision"] or store_rules.manifest_revision({name: {"sha256": digest}})
    existing = store.placed(revision)
    if existing:
        return store.reuse(revision, existing, result, ref=key)
    size = _http_size(model, model["source"], ca_bundle)
    # Before the download the archive's size is all that is known: it stands for the weights in the fit check, and
    # twice it (the archive and its files, side by side) for the disk. Both are checked again with the members' exact
    # sizes once the archive is verified, before anything is extracted.
    record = _record(model, revision, key, {}, {"weight_bytes": size, "total_bytes": size})

    def download(staging):
        # The partial archive lies inside staging, under a name the store reserves (as the hub client's .cache), not
        # beside it: staging is what the disk check counts as kept, what a fetch of another revision removes and counts
        # as free, what a refusal removes and an interruption keeps, and what the lock and the leftovers rules already
        # cover; a file of its own beside staging would need each of those taught a second name. It goes before the
        # extracted files are verified, and no member may lie under its name.
        reserved = os.path.join(staging, ARCHIVE_DIR)
        os.makedirs(reserved, 0o700, exist_ok=True)
        path = store_rules.check_inside(staging, os.path.join(reserved, "archive"))
        # An interruption (TransferInterrupted) keeps what arrived; the next run goes on from its last byte.
        got = _http_stream(model, model["source"], path, ca_bundle, store.cap, limit=size)
        if got != digest:
            raise ModelStoreError("%s has sha256 %s, expected %s: a corrupted download or a wrong checksum"
                                  % (name, got, digest))
        with vllm_model_archive.ModelArchive(path, name, variable + ".source",
                                             store_rules.redact_url(model["source"])) as archive:
            members = archive.members()
            taken = [member.path for member in members if member.path.split("/")[0] == ARCHIVE_DIR]
            if taken:
                raise archive.error("member %s uses the name %s, which the store reserves for the download" % (
                    store_rules.shown(taken[0]), ARCHIVE_DIR))
            sizes = dict((member.path, member.size) for member in members if not member.directory)
            result["fit"] = store.check_fit(revision, store_rules.weight_bytes(sizes),
                                            consequence="Weighed from the archive's members: nothing was extracted")
            store.check_disk(revision, sum(sizes.values()))
            archive.extract(members, staging)
        shutil.rmtree(reserved)
        return dict((member, {"size": sizes[member]}) for member in sizes)

    return store.fetch(revision, record, None, download, result, disk_bytes=2 * size, keep_in_staging=(ARCHIVE_DIR,))


def _staged_file(staging, name):
    """The path of a file of the model inside staging, its directories created (by any of the parallel transfers)."""
    store_rules.check_file_names([name], "staging %s" % staging, "nothing was written")
    if name.split("/")[0] == store_rules.PARTS_DIR:
        raise ModelStoreError("the source lists %s, under %s/, which the store keeps for the parts of interrupted "
                              "transfers; rename that directory in the source" % (store_rules.shown(name),
                                                                                  store_rules.PARTS_DIR))
    target = os.path.join(staging, name)
    os.makedirs(os.path.dirname(target), 0o700, exist_ok=True)
    return store_rules.check_inside(staging, target)


def _s3_url(model, key):
    return s3.url(model["bucket"], key)


def _s3_key(model, name):
    return "%s/%s" % (model["prefix"], name) if model["prefix"] else name


def _s3_sums_key(model):
    """The SHA256SUMS object: relative to the prefix, or s3://bucket/key in the same bucket."""
    sums = model["sha256sums"]
    if sums.startswith("s3://"):
        bucket, _slash, key = sums[5:].partition("/")
        if bucket != model["bucket"]:
            raise ModelStoreError("vllm_model_models (%s).sha256sums: names another bucket than the source (got %s); "
                                  "keep the SHA256SUMS object in s3://%s" % (model["name"], sums, model["bucket"]))
        return key
    return _s3_key(model, sums)


def _s3_ref(model):
    """What a re-run without a revision label looks up: the checksums given, or the sums object's URL."""
    if model.get("sha256"):
        return store_rules.manifest_revision(dict((name, {"sha256": digest.lower()})
                                                  for name, digest in model["sha256"].items()))
    return "sha256sums:" + _s3_url(model, _s3_sums_key(model))


def place_s3(store, module):
    """An S3 prefix: the files the checksums name, s3://bucket/prefix/<name>, downloaded by boto3 into staging."""
    model, result = store.model, {"changed": False}
    ref = _s3_ref(model)
    revision = _known_revision(store, model)
    record = store.placed(revision) if revision else None
    if record:  # decided from the record alone: no client is created
        return store.reuse(revision, record, result)
    client = s3.client(model, module.params["ca_bundle"], connections=module.params["workers"] * s3.PARTS_AT_ONCE)

    def call(url, function, **arguments):
        try:
            return function(**arguments)
        except Exception as error:  # botocore's ClientError, EndpointConnectionError, NoCredentialsError, ...
            raise _capped(error) or s3.error_line(model, url, error)

    if model.get("sha256"):
        expected = dict((name, digest.lower()) for name, digest in model["sha256"].items())
    else:
        key = _s3_sums_key(model)
        url = _s3_url(model, key)
        body = call(url, client.get_object, Bucket=model["bucket"], Key=key)["Body"].read()
        expected = store_rules.parse_sha256sums(body.decode("utf-8", "replace"), url)
    revision = model["revision"] or store_rules.manifest_revision(
        dict((name, {"sha256": digest}) for name, digest in expected.items()))
    existing = store.placed(revision)
    if existing:
        return store.reuse(revision, existing, result, ref=ref)

    def head(name):
        key = _s3_key(model, name)
        return s3.head(call(_s3_url(model, key), client.head_object, Bucket=model["bucket"], Key=key))

    names = sorted(expected)
    heads = dict(zip(names, store_rules.in_parallel(head, names, module.params["workers"])))
    files = dict((name, {"sha256": expected[name], "size": heads[name][0]}) for name in names)
    record = _record(model, revision, ref, dict((name, dict(entry)) for name, entry in files.items()))

    def download(staging):
        def one(name):
            key = _s3_key(model, name)
            url = _s3_url(model, key)
            path = _staged_file(staging, name)
            # Ranged parts in parallel, written at their offsets; a run before's parts (or whole file) are kept.
            s3.RangedFile("vllm_model_models (%s).source" % model["name"], url, path,
                          store_rules.parts_record(staging, name), heads[name][0], heads[name][1],
                          lambda first, last: call(url, client.get_object, Bucket=model["bucket"], Key=key,
                                                   Range="bytes=%d-%d" % (first, last)),
                          store.cap.counter(url, heads[name][0])).fetch()
            # Hashed now, while the other files still arrive (the parts arrive out of order, so not as they arrive).
            store.hashed[name] = store_rules.file_sha256(path)

        store_rules.in_parallel(one, sorted(expected), module.params["workers"])

    def read(name, limit):
        key = _s3_key(model, name)
        return s3.read_small(call(_s3_url(model, key), client.get_object, Bucket=model["bucket"], Key=key,
                                  Range="bytes=0-%d" % limit), limit)

    return store.fetch(revision, record, files, download, result, read=read)


# A fleet's mirror (the model's `mirror`, module_utils/vllm_model_s3.Mirror): each host reports whether it holds
# the revision its source leads to (status); when one does not, one host seeds the mirror (seed: from its store,
# or from the origin, or, for a controller source, the controller from its directory); the others place the
# published revision from the mirror (place with mirror_revision), verified against the seeder's checksums.

def _source_ref(model, manifest=None):
    """What the store records a source's revision under: the hub ref, the checksums given or their URL (http,
    archive, s3), the manifest's revision (controller)."""
    if model["kind"] == "hf":
        return model["revision"]
    if model["kind"] in ("http", "archive"):
        return _http_key(model)
    if model["kind"] == "s3":
        return _s3_ref(model)
    return model["revision"] or store_rules.manifest_revision(manifest or {})


def _known_revision(store, model, manifest=None):
    """The revision the source leads to as far as this host knows without asking anyone: what its arguments fix
    (_pinned_revision), else what its record says the source's ref led to; None when the host never placed it. What
    every source's re-run, and a mirror's status, decide from before any network client is created."""
    return _pinned_revision(model, manifest) or store.state["refs"].get(_source_ref(model, manifest))


def model_status(store, module):
    """Read-only: does this host hold (placed and intact) the revision its source leads to?"""
    revision = _known_revision(store, store.model, module.params["manifest"])
    held = bool(revision and store.placed(revision))
    # name: the seeder is chosen among the hosts whose last status is this model's (vllm_model_seeder).
    return {"changed": False, "name": store.model["name"], "revision": revision if held else None, "needed": not held}


def seed_mirror(store, module):
    """On the seeding host: make the mirror hold the revision this host's source leads to, fetching from the
    origin only when neither this host nor the mirror has it. A seeder that is not the fleet's writer
    (mirror_writer names another host) only reads the mirror: it refuses, before anything changes, a revision
    the mirror does not hold yet."""
    model, manifest = store.model, module.params["manifest"]
    mirror = s3.Mirror(model, module.params["ca_bundle"])
    ref = _source_ref(model, manifest)
    revision = _known_revision(store, model, manifest)
    record = store.placed(revision) if revision else None
    result = {"changed": False, "seeded_from": "store"}
    writer = module.params["mirror_writer"]
    if record is None:
        revision = revision or mirror.refs().get(ref)
        sums = mirror.sums(revision) if revision else None
        if sums is None and writer:
            return _not_the_writer(module, mirror, model, ref, revision, writer)
        pins = _source_pins(store, module, revision, sums) if sums is not None else None
        if pins is not None:  # published by an earlier batch or run: taken from the mirror, checked against the pins
            return _seed_from_mirror(store, module, mirror, revision, sums, pins, ref, result)
        placed = PLACE[model["kind"]](store, module)
        revision, result["changed"], result["seeded_from"] = placed["revision"], placed["changed"], "origin"
        result.update(dict((key, placed[key]) for key in ("weight_bytes", "total_bytes", "fit") if key in placed))
        if module.check_mode:
            return dict(result, revision=revision, manifest=None)
        record = store.state["revisions"][revision]
    sums = mirror.sums(revision)
    if sums is not None:
        mirror.check(revision, sums, record["files"])
        if not module.check_mode and not writer:
            mirror.remember(ref, revision)
        return dict(result, revision=revision, manifest=sums)
    if writer:
        return _not_the_writer(module, mirror, model, ref, revision, writer)
    result["changed"] = True
    if not module.check_mode:
        result["uploaded_bytes"] = mirror.publish(os.path.join(store.dir, revision), revision, record["files"], ref)
    published = dict((name, entry["sha256"]) for name, entry in record["files"].items())
    return dict(result, revision=revision, manifest=published)


def _not_the_writer(module, mirror, model, ref, revision, writer):
    """A seeder that may only read, for a revision the mirror does not hold yet: refused (in check mode, reported:
    the writer may publish it in an earlier batch of the same run, which check mode does not do)."""
    missing = mirror.url(revision) + "/" if revision else "a revision for %s in %s" % (
        store_rules.shown(ref), mirror.url())
    message = ("vllm_model_models (%s).mirror: %s is not in the mirror yet, and only vllm_model_mirror_writer (%s) "
               "writes it, which is not in this batch of the play; run the play with %s in it first, or set "
               "vllm_model_mirror_writer to a host of this play that may write the mirror"
               % (model["name"], missing, writer, writer))
    if module.check_mode:
        module.warn(message)
        return {"changed": True, "revision": revision, "manifest": None, "seeded_from": "writer", "msg": message}
    raise ModelStoreError(message)


def _source_pins(store, module, revision, sums):
    """What the source itself says the files of revision are ({file: {sha256 or git_sha1[, size]}}), to check a
    mirror's copy against: the operator's sha256, the origin's SHA256SUMS (a small file), the hub's per-file
    checksums at the commit. None when the source pins only an archive: the seeder then places from the origin and
    compares the mirror with what it verified. A mirror's file set or sha256 that differs is refused, naming the
    mirror."""
    model = store.model
    if model["kind"] == "hf":
        pins = _hub_commit_pins(store, module, revision)
    elif model["kind"] == "http":
        pins = dict((name, {"sha256": digest}) for name, digest in _http_checksums(
            model, module.params["ca_bundle"]).items())
    else:
        return None
    _mirror_agrees(model, revision, sums, pins)
    return pins


def _mirror_agrees(model, revision, sums, pins):
    """Refuse a mirror's {file: sha256} for revision (its SHA256SUMS, or the seeder's result) that differs from the
    source's pins: other files, or other sha256 where the source pins one."""
    sums = dict((name, digest.lower()) for name, digest in sums.items())
    differ = sorted(name for name in set(sums) | set(pins) if name not in sums or name not in pins
                    or (pins[name].get("sha256") and pins[name]["sha256"].lower() != sums[name]))
    if differ:
        mirror = "%s/%s/%s" % (model["mirror"], model["name"], revision)
        raise ModelStoreError(
            "vllm_model_models (%s).mirror: %s/ disagrees with the checksums the source pins (got differences in %s); "
            "the mirror is a cache and only a seeder writes it: check who may write it, delete %s/ and re-run"
            % (model["name"], mirror, ", ".join(store_rules.shown(name) for name in differ[:5]), mirror))


def _operator_pins(model, params):
    """The pins every host holds without asking anyone: the operator's sha256 (a file list), the controller's
    manifest (a controller source). None for the others."""
    if model["kind"] == "http" and model.get("sha256"):
        return dict((name, {"sha256": digest.lower()}) for name, digest in model["sha256"].items())
    if model["kind"] == "controller" and params.get("manifest"):
        return dict((name, {"sha256": entry["sha256"]}) for name, entry in params["manifest"].items())
    return None


def _seed_from_mirror(store, module, mirror, revision, sums, pins, ref, result):
    """The seeder places the mirror's revision itself, every file verified against the source's pins (a hub file
    outside LFS by its git object id), and hands on what it verified."""
    expected = dict((name, dict(pins[name], sha256=pins[name].get("sha256") or sums[name])) for name in pins)
    placed = _place_from_mirror(store, module, mirror, revision, expected, ref)
    result = dict(result, revision=revision, changed=placed["changed"], seeded_from="mirror")
    result.update(dict((key, placed[key]) for key in ("weight_bytes", "total_bytes", "fit") if key in placed))
    record = store.state["revisions"].get(revision)
    verified = dict((name, entry["sha256"]) for name, entry in record["files"].items()) if record else sums
    return dict(result, manifest=verified)


def _place_from_mirror(store, module, mirror, revision, expected, ref):
    """Place revision from the mirror, each file verified against expected ({file: {sha256 and/or git_sha1}}); a
    file that does not verify is refused naming the mirror, the previous revision kept."""
    model = store.model
    heads = dict((name, mirror.head(revision, name)) for name in expected)
    files = dict((name, {"sha256": entry.get("sha256"), "size": heads[name][0]}) for name, entry in expected.items())
    record = _record(model, revision, ref, dict((name, dict(entry)) for name, entry in files.items()),
                     extra={"via": mirror.url(revision)})

    def download(staging):
        for name in sorted(files):
            path = _staged_file(staging, name)
            mirror.download(revision, name, path, store_rules.parts_record(staging, name), heads[name],
                            store.cap.counter(mirror.url(revision, name), files[name]["size"]))
            store.hashed[name] = store_rules.file_sha256(path)

    try:
        return store.fetch(revision, record, expected, download, {"changed": False},
                           read=lambda name, limit: mirror.read_small(revision, name, limit))
    except ModelStoreError as error:
        raise ModelStoreError("vllm_model_models (%s).mirror: %s/ does not verify: %s" % (
            model["name"], mirror.url(revision), error))


def seed_mirror_from_controller(module):
    """On the controller, for a controller:// source: publish its directory (verified by action manifest) once,
    so no host needs a copy through the controller."""
    model, manifest = _model_from_params(module.params), module.params["manifest"] or {}
    revision = model["revision"] or store_rules.manifest_revision(manifest)
    mirror = s3.Mirror(model, module.params["ca_bundle"], where="the controller")
    result = {"changed": False, "revision": revision, "seeded_from": "controller",
              "manifest": dict((name, entry["sha256"]) for name, entry in manifest.items())}
    sums = mirror.sums(revision)
    if sums is not None:
        mirror.check(revision, sums, manifest)
        return result
    result["changed"] = True
    if not module.check_mode:
        # Published as the manifest task hashed it; every host verifies each file against that manifest.
        result["uploaded_bytes"] = mirror.publish(model["location"], revision, manifest, revision)
    return result


def place_mirrored(store, module):
    """The revision the seeder published, from the mirror, verified against the seeder's checksums."""
    model, result = store.model, {"changed": False}
    revision, sums = module.params["mirror_revision"], module.params["mirror_manifest"]
    _check_seeded(model, revision, sums)
    pinned = _pinned_revision(model, module.params["manifest"])
    if pinned and pinned != revision:
        raise ModelStoreError(
            "vllm_model_models (%s).mirror: the seeder's result names revision %s, but this host's source leads to %s; "
            "the revision a seeder hands on comes from the mirror: check who may write it and re-run"
            % (model["name"], store_rules.shown(revision), pinned))
    ref = _source_ref(model, module.params["manifest"])
    record = store.placed(revision)
    if record:
        return store.reuse(revision, record, result, ref=ref)
    if not sums:  # check mode on a fleet that has it nowhere yet: nothing was published to read
        return {"changed": True, "revision": revision}
    pins = _operator_pins(model, module.params)
    if pins is not None:  # what every host holds itself outranks what the seeder hands on
        _mirror_agrees(model, revision, sums, pins)
    expected = dict((name, {"sha256": digest.lower()}) for name, digest in sums.items())
    hub = _hub_pins_from_here(store, module, revision) if model["kind"] == "hf" else None
    if hub is not None:  # the hub's own checksums, asked by this host: a seeder's hand-on is checked, not believed
        _mirror_agrees(model, revision, sums, hub)
        expected = dict((name, dict(hub[name], sha256=hub[name].get("sha256") or expected[name]["sha256"]))
                        for name in hub)
    mirror = s3.Mirror(model, module.params["ca_bundle"])
    return _place_from_mirror(store, module, mirror, revision, expected, ref)


def _hub_pins_from_here(store, module, revision):
    """The hub's per-file checksums of the commit a seeder handed on (one metadata request, no file byte), so every
    host checks the mirror's copy against the hub itself, as the seeder did: a seeder (even the writer) cannot hand
    the fleet other bytes than the hub pins. None when the hub cannot be reached from this host (one that joins while
    the hub is down): the seeder's checksums, which it checked against the hub, are used, with a warning."""
    try:
        return _hub_commit_pins(store, module, revision)
    except SourceUnreachable as error:
        module.warn("vllm_model_models (%s).mirror: %s was checked against the checksums the seeder verified at the "
                    "hub, not the hub's own: %s" % (store.model["name"], revision, error))
        return None


def _hub_commit_pins(store, module, revision):
    """The hub's per-file checksums of revision (_hub_pins), a revision read from the mirror or handed on by its
    seeder: refused, naming the mirror, when the hub does not know it as a commit."""
    model = store.model
    dummy, api, dummy = _hub_client(store, module)
    commit, pins = _hub_pins(model, api, revision)
    if commit != revision:
        raise ModelStoreError("vllm_model_models (%s).mirror: revision %s is not a commit of %s on %s (the hub "
                              "resolves it to %s); delete it from the mirror and re-run"
                              % (model["name"], revision, model["location"], api.endpoint, commit))
    return pins


def _pinned_revision(model, manifest=None):
    """The revision this host's own arguments fix, whatever any store or mirror says: a hub commit (given, or the
    controller's resolution of a branch in this run), a controller directory's manifest revision, an operator's
    revision label; None when only a record or the mirror could say (an HTTP file list's checksums URL)."""
    if model["kind"] == "hf":
        return model["revision"] if store_rules.is_commit(model["revision"]) else model.get("resolved")
    if model["kind"] == "controller":
        return _source_ref(model, manifest)
    return model["revision"] or None


def _check_seeded(model, revision, sums):
    """The seeder's result, handed to this host: a revision of the source's kind and {file: sha256} with file names
    inside the model directory. It names paths in this host's store, so it is checked like any outside input."""
    origin = "vllm_model_models (%s).mirror: the seeder's result" % model["name"]
    advice = "the revision and files a seeder hands on come from the mirror; check who may write it"
    store_rules.check_revision(revision, model["kind"], origin, advice)
    store_rules.check_file_names(sums or {}, origin, advice)
    for name, digest in (sums or {}).items():
        if not store_rules.is_sha256(digest):
            raise ModelStoreError("%s: %s has no sha256 (got %s); %s" % (origin, name, store_rules.shown(digest), advice))


def _check_manifest_param(model, manifest):
    """A controller source's manifest (action manifest's result): names inside the model directory."""
    store_rules.check_file_names(manifest or {}, "%s: manifest" % model["name"], "compute it with action manifest")


def _hub_endpoint(model):
    return (model["endpoint"] or os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")


def _hub_headers(model):
    return {"Authorization": "Bearer %s" % model["token"]} if model["token"] else {}


def _hub_api(model, ref, ca_bundle, blobs=False, where=""):
    """The hub's answer for the model at ref, from its API over plain HTTPS (no hub client needed: the controller and
    a host without the tools venv ask it so): (commit, the answer's JSON). The hub's refusals raise their one-line
    errors; no answer (the network, TLS, a server error) raises SourceUnreachable (where: whence it was asked, for its
    message), and the caller decides whether that is fatal. The commit is checked (40 lower-case hex digits): it
    names a directory of the store."""
    endpoint = _hub_endpoint(model)
    url = "%s/api/models/%s/revision/%s%s" % (endpoint, model["location"], quote(ref, safe=""),
                                              "?blobs=true" if blobs else "")
    try:
        # The token goes to the hub only, never along a redirect (the hub client strips it on one too).
        response = open_url(url, headers=_hub_headers(model), timeout=30, follow_redirects="safe", ca_path=ca_bundle,
                            unredirected_headers=["Authorization"])
        body = response.read(16 << 20)
    except Exception as error:  # HTTPError carries the hub's X-Error-Code; the rest is the network
        code = error.headers.get("X-Error-Code", "") if getattr(error, "headers", None) is not None else ""
        status = getattr(error, "code", None)
        if code in ("RevisionNotFound", "GatedRepo", "RepoNotFound"):
            raise _hub_refusal(model, endpoint, ref, code)
        if status in (401, 404):  # a server without the hub's codes
            raise _hub_refusal(model, endpoint, ref, "RevisionNotFound" if status == 404 else "RepoNotFound")
        raise _hub_unreachable(model, endpoint, error, where)
    try:
        answer = json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        answer = None
    if not isinstance(answer, dict):
        answer = {"sha": body[:80].decode("utf-8", "replace")}
    commit = store_rules.check_revision(answer.get("sha"), "hf", "vllm_model_models (%s).endpoint: the hub at %s "
                                        "answered for %s" % (model["name"], endpoint, ref), HUB_HOSTILE)
    return commit, answer


def resolve_on_controller(module):
    """On the controller, once per run: the commit a hub branch or tag leads to now, from the hub's API, so every host
    places the same commit. A commit needs no resolving. An unreachable hub is not an error here (resolved is null,
    with the reason): each host then keeps the commit it recorded for the ref."""
    model = _model_from_params(module.params)
    if model["kind"] != "hf":
        raise ModelStoreError("action resolve needs a hub source (got %s)" % store_rules.shown(model["source"]))
    ref = model["revision"]
    if store_rules.is_commit(ref):
        return {"changed": False, "revision": ref, "ref": ref, "resolved": ref}
    try:
        commit, dummy = _hub_api(model, ref, module.params["ca_bundle"], where=" from the controller")
    except SourceUnreachable as unreachable:
        unresolved = "the hub at %s cannot be reached from the controller (%s)" % (_hub_endpoint(model),
                                                                                   unreachable.reason)
        module.warn("vllm_model_models (%s): %s %s was not resolved for the fleet: %s; each host keeps the commit it "
                    "recorded for it, and a host without one resolves it itself" % (model["name"], model["source"], ref,
                                                                                    unresolved))
        return {"changed": False, "revision": None, "ref": ref, "resolved": None, "unresolved": unresolved}
    return {"changed": False, "revision": commit, "ref": ref, "resolved": commit}


# The preflight's question to each host, before any host changes (action reach, read-only).

def _importable(name):
    try:
        __import__(name)
    except ImportError:
        return False
    return True


def reach_source(store, module):
    """Can this host place its model? A revision the host holds intact needs nothing (no network, as a re-run), but
    a hub branch or tag is asked where it leads now, as the run will ask the controller. Else the source is asked
    what placing it asks first, and the fit and disk checks run on the sizes it announces (and vllm_serve's rules on
    its small files, where the source serves them): an HTTP(S) file list or archive, and a hub or S3 source where this
    Python has its client (the tools venv), through action place in check mode; a hub source without the client
    through the hub's API and file URLs; an S3 source without boto3 by reaching its endpoint (any answer of the
    bucket's server; its credentials are checked when the role places it); a host directory by being there. A
    controller source is the controller's to read (the role's action manifest). A source that gives no answer at
    all is not fatal where the run would not need it: a branch whose recorded commit this host holds (the run keeps
    that commit when the hub cannot be reached), or a model with a fleet mirror (one host seeds it, the others read
    the mirror); a warning says so."""
    model = store.model
    revision = _known_revision(store, model)
    held = bool(revision and store.placed(revision))
    branch = model["kind"] == "hf" and not store_rules.is_commit(model["revision"]) and not model["resolved"]
    if held and not branch:
        return {"changed": False, "needed": False, "revision": revision, "reached": "placed"}
    try:
        if branch:  # where it leads now (the hub's API, no client needed); then that commit is what is asked
            model["resolved"] = _hub_api(model, model["revision"], module.params["ca_bundle"], where=" from this host")[0]
        answer = _ask_source(store, module)
    except SourceUnreachable as error:
        if not (held or model["mirror"]):
            raise
        if not held:  # the mirror is where this host's revision comes from now: it must answer
            _reach_mirror(model, module.params["ca_bundle"])
        module.warn("%s; %s" % (error, "this host keeps the commit %s it holds for %s unless the controller resolves "
                                "it" % (revision, model["revision"]) if held else "the fleet's mirror %s must hold the "
                                "revision, or one host reach the origin to seed it" % store_rules.redact_url(
                                    model["mirror"])))
        return {"changed": False, "needed": not held, "revision": revision,
                "reached": "placed (the source did not answer)" if held else "mirror (the origin did not answer)"}
    if answer.get("revision") and store.placed(answer["revision"]):
        return {"changed": False, "needed": False, "revision": answer["revision"], "reached": "placed"}
    if model["mirror"]:  # every host reads it (and one seeds it) before it places the revision
        answer["mirror"] = _reach_mirror(model, module.params["ca_bundle"])
    return dict(answer, changed=False, needed=True)


def _reach_mirror(model, ca_bundle):
    """The fleet's mirror from this host: with boto3 (the tools venv), its refs.json read as placing reads it first
    (the keys, the grant and the entries checked); without, its endpoint answering, as for an S3 source."""
    if _importable("boto3"):
        s3.Mirror(model, ca_bundle).refs()
        return "refs read"
    _reach_s3_endpoint(dict(model, bucket=model["mirror_bucket"], prefix=model["mirror_prefix"]), ca_bundle,
                       key="mirror")
    return "endpoint"


def _ask_source(store, module):
    model, kind = store.model, store.model["kind"]
    if kind == "controller":
        return {"revision": None, "reached": "on the controller"}
    if kind == "host":
        if not os.path.isdir(model["location"]):
            raise ModelStoreError("vllm_model_models (%s).source: %s is not a directory on this host (got %s); place the "
                                  "model's directory there first, or point source at it"
                                  % (model["name"], model["location"], store_rules.shown(model["source"])))
        return {"revision": None, "reached": "directory"}
    client = {"hf": "huggingface_hub", "s3": "boto3"}.get(kind)
    if client is None or _importable(client):
        return dict(PLACE[kind](store, module), reached="source")  # check mode: nothing is written
    if kind == "hf":
        return dict(_reach_hub(store, module), reached="hub API")
    return dict(_reach_s3_endpoint(model, module.params["ca_bundle"]), revision=None, reached="endpoint")


def _reach_hub(store, module):
    """The hub's API answer for the ref (hostile input: each name, checksum and size checked as the client's are),
    weighed by the fit and disk checks."""
    model = store.model
    endpoint = _hub_endpoint(model)
    revision, answer = _hub_api(model, model["resolved"] or model["revision"], module.params["ca_bundle"],
                                blobs=True, where=" from this host")
    listed = answer.get("siblings")
    if not isinstance(listed, list) or not all(isinstance(entry, dict) and isinstance(entry.get("rfilename"), str)
                                               for entry in listed):
        raise ModelStoreError("vllm_model_models (%s).endpoint: the hub at %s answered for %s without a file list "
                              "(got %s); %s" % (model["name"], endpoint, model["revision"],
                                                store_rules.shown(listed), HUB_HOSTILE))

    def text(value):
        return value if isinstance(value, str) else None

    siblings = {}
    for entry in listed:
        lfs = entry.get("lfs") if isinstance(entry.get("lfs"), dict) else None
        siblings[entry["rfilename"]] = {
            "size": entry.get("size"), "blob_id": text(entry.get("blobId")), "lfs": lfs is not None,
            "lfs_sha256": text(lfs.get("sha256")) if lfs else None, "lfs_size": lfs.get("size") if lfs else None}
    expected = _hub_expected(model, endpoint, revision, siblings)
    if store.placed(revision):  # a branch now leading to a commit this host holds
        return {"revision": revision}
    record = _record(model, revision, model["revision"], dict(
        (name, {"size": entry["size"] or 0}) for name, entry in expected.items()))

    def read(name, limit):
        """The first limit + 1 bytes of a file (a small file, a header) from the hub's file URL, asked for with a
        Range (the token to the hub only, never along a redirect: the hub sends LFS files to another host)."""
        return _http_read(model, "%s/%s/resolve/%s/%s" % (endpoint, model["location"], revision, quote(name)), limit,
                          module.params["ca_bundle"], headers=_hub_headers(model), unredirected=["Authorization"])

    summary = store.serving_summary(revision, record, expected, read)
    return {"revision": revision, "weight_bytes": record["weight_bytes"], "total_bytes": record["total_bytes"],
            "fit": store.check_fit(revision, record["weight_bytes"], summary=summary),
            "free_bytes": store.check_disk(revision, record["total_bytes"])}


def _reach_s3_endpoint(model, ca_bundle, key="source"):
    """Without boto3 (a host without the tools venv yet): the bucket's server answers over HTTPS (any status: the
    request is not signed), so the name resolves, the network lets it through and its certificate is trusted."""
    endpoint = (model["endpoint_url"] or ("https://s3.%s.amazonaws.com" % model["region"] if model["region"]
                                          else "https://s3.amazonaws.com")).rstrip("/")
    try:
        open_url("%s/%s" % (endpoint, quote(model["bucket"])), method="HEAD", timeout=20, follow_redirects="none",
                 ca_path=ca_bundle).close()
    except Exception as error:  # an HTTP status is an answer; the rest is the network
        if getattr(error, "code", None) is None:
            raise SourceUnreachable(str(s3.error_line(model, s3.url(model["bucket"], model["prefix"]), error, key=key)))
    return {"endpoint": endpoint}


def plan_controller(store, module):
    model, manifest = store.model, module.params["manifest"] or {}
    _check_manifest_param(model, manifest)
    if not manifest:
        raise ModelStoreError("%s: action plan needs the manifest computed on the controller" % model["name"])
    revision = model["revision"] or store_rules.manifest_revision(manifest)
    record = store.placed(revision)
    sizes = dict((name, entry["size"]) for name, entry in manifest.items())
    result = {"changed": False, "revision": revision, "weight_bytes": store_rules.weight_bytes(sizes),
              "total_bytes": sum(sizes.values()), "needed": record is None, "staging": store.staging(revision)}
    if record is None:
        # The summary action manifest read on the controller (config, index, safetensors headers): vllm_serve's
        # rules run before anything is copied.
        result["fit"] = store.check_fit(revision, result["weight_bytes"], summary=module.params["summary"])
        result["free_bytes"] = store.check_disk(revision, result["total_bytes"])
        result["changed"] = True
        if not module.check_mode:
            store.ensure_dirs()
            if not os.path.isdir(result["staging"]):
                os.mkdir(result["staging"], 0o700)
    return result


def place_controller(store, module):
    model, manifest = store.model, module.params["manifest"] or {}
    _check_manifest_param(model, manifest)
    revision = model["revision"] or store_rules.manifest_revision(manifest)
    result = {"changed": False}
    record = store.placed(revision)
    if record:
        return store.reuse(revision, record, result)
    staged = module.params["staged"]
    if os.path.normpath(staged or "") != store.staging(revision):
        raise ModelStoreError("%s: staged must be the staging directory action plan created (got %s, expected %s)"
                              % (model["name"], store_rules.shown(staged), store.staging(revision)))
    record = _record(model, revision, revision, dict(
        (name, {"sha256": entry["sha256"], "size": entry["size"]}) for name, entry in manifest.items()))
    _announced(result, record)
    result["changed"] = True
    result["_record"] = record
    if module.check_mode:
        return store.finish(revision, result)
    try:
        files = store_rules.verify_files(staged, dict(
            (name, {"sha256": entry["sha256"], "size": entry["size"]}) for name, entry in manifest.items()))
        record["files"] = files
        result["fit"] = store.check_staged(revision, staged, "Read from the verified copy in staging: it was not "
                                           "made current.")
        store.commit(revision, record, staged=staged)
    except (ModelStoreError, OSError) as error:
        _fail_cleanly(store, staged, "the copy from the controller does not verify: %s" % error)
    return store.finish(revision, result)


def activate(store, module):
    """Make a revision the store holds intact current again; nothing is fetched, verified again or pruned."""
    revision = module.params["revision"]
    store.revision_path(revision)
    record = store.placed(revision)
    if record is None:
        raise ModelStoreError(
            "%s: revision %s is not placed intact in %s (placed: %s); place it again with the vllm_model role"
            % (store.name, revision, store.dir, ", ".join(sorted(store.state["revisions"])) or "none"))
    result = {"changed": False, "_record": record}
    _announced(result, record)
    return store.finish(revision, result, prune=False)


PLACE = {"hf": place_hub, "host": place_host, "http": place_http, "archive": place_archive, "s3": place_s3,
         "controller": place_controller}


def run(module):
    action = module.params["action"]
    if action == "resolve":
        return resolve_on_controller(module)
    if action == "manifest":
        model = _model_from_params(module.params)
        files = directory_manifest(model, model["location"])
        sizes = dict((name, entry["size"]) for name, entry in files.items())
        try:  # what vllm_serve will read of it, for the hosts' fit check before the copy
            summary = vllm_model_info.read_model_dir(model["location"])
        except vllm_model_info.ModelInfoError as error:
            raise ModelStoreError("vllm_model_models (%s).source: %s" % (model["name"], " ".join(str(error).split())))
        return {"changed": False, "manifest": files, "revision": model["revision"] or store_rules.manifest_revision(files),
                "weight_bytes": store_rules.weight_bytes(sizes), "total_bytes": sum(sizes.values()), "summary": summary}
    if action == "seed" and _model_from_params(module.params)["kind"] == "controller":
        return seed_mirror_from_controller(module)
    for key in ("store", "name"):
        if not module.params[key]:
            raise ModelStoreError("action %s needs %s" % (action, key))
    if action == "reach":  # read-only, under no lock: the preflight's question
        module.check_mode = True
        if module.params["ca_bundle_pem"]:  # the bundle the role installs later, for this question only
            module.params["ca_bundle"] = os.path.join(module.tmpdir, "ca-bundle.pem")
            with open(module.params["ca_bundle"], "w", encoding="utf-8") as handle:
                handle.write(module.params["ca_bundle_pem"])
        return reach_source(Store(module), module)
    if action == "status":  # read-only: it reads the record, under no lock
        store = Store(module)
        if not store.model["mirror"]:
            raise ModelStoreError("action status needs a model with a mirror")
        return model_status(store, module)
    name = store_rules.check_model_name(module.params["name"], "name")
    with store_rules.ModelLock(module.params["store"], name, module.check_mode):
        return _locked(Store(module), module, action)


def _locked(store, module, action):
    """What an action does to the store, under the model's lock."""
    if action == "activate":
        return activate(store, module)
    if action == "seed" and not store.model["mirror"]:
        raise ModelStoreError("action seed needs a model with a mirror")
    if action == "plan":
        return plan_controller(store, module)
    if action == "seed":
        return seed_mirror(store, module)
    if module.params["mirror_revision"]:
        return place_mirrored(store, module)
    return PLACE[store.model["kind"]](store, module)


# URL parameters that may carry a presigned query (a credential): see _with_secret_queries.
URL_PARAMETERS = ("source", "sha256sums")


def _with_secret_queries(argument_spec):
    """argument_spec, with no_log on each URL parameter whose value this run carries a query in (a presigned URL):
    its value is then neither logged to the host's journal nor shown in the result's invocation, and any copy of it in
    the output is masked. Decided from the module's own arguments before AnsibleModule logs them (ansible's
    _load_params, which is there for modules that decide their spec from their arguments); a URL without a query
    stays shown, as the messages that quote it read best."""
    arguments = _load_params() or {}  # nothing when ansible-test reads the spec without arguments
    for name in URL_PARAMETERS:
        value = arguments.get(name)
        if isinstance(value, str) and urlsplit(value).query:
            argument_spec[name] = dict(argument_spec[name], no_log=True)
    return argument_spec


def main():
    module = AnsibleModule(
        argument_spec=_with_secret_queries({
            "action": {"type": "str", "choices": ["place", "plan", "manifest", "status", "seed",
                                                  "activate", "resolve", "reach"], "default": "place"},
            "resolved": {"type": "str"},
            "store": {"type": "path"},
            "name": {"type": "str"},
            "source": {"type": "str"},
            "revision": {"type": "str"},
            "token": {"type": "str", "no_log": True},
            "region": {"type": "str"},
            "endpoint_url": {"type": "str"},
            "access_key_id": {"type": "str", "no_log": True},
            "secret_access_key": {"type": "str", "no_log": True},
            "headers": {"type": "dict", "no_log": True},
            "include": {"type": "list", "elements": "str"},
            "exclude": {"type": "list", "elements": "str"},
            "endpoint": {"type": "str"},
            "sha256": {"type": "dict"},
            "sha256sums": {"type": "str"},
            "manifest": {"type": "dict"},
            "staged": {"type": "path"},
            "group": {"type": "str"},
            "keep": {"type": "int", "default": 2},
            "min_free_disk_gib": {"type": "float", "default": 1},
            "workers": {"type": "int", "default": 4},
            "ca_bundle": {"type": "path"},
            "ca_bundle_pem": {"type": "str"},
            "fit": {"type": "dict"},
            "summary": {"type": "dict"},
            "verify": {"type": "str", "choices": ["quick", "full"], "default": "quick"},
            "mirror": {"type": "str"},
            "mirror_revision": {"type": "str"},
            "mirror_manifest": {"type": "dict"},
            "mirror_writer": {"type": "str", "default": ""},
        }),
        required_if=[("action", "place", ["source"]), ("action", "plan", ["source"]),
                     ("action", "manifest", ["source"]), ("action", "activate", ["revision"]),
                     ("action", "resolve", ["source", "revision"]), ("action", "reach", ["source"])],
        supports_check_mode=True,
    )
    try:
        module.exit_json(**run(module))
    except (ModelStoreError, store_rules.ModelInputError, OSError, KeyError) as error:
        module.fail_json(msg=str(error))


if __name__ == "__main__":
    main()
