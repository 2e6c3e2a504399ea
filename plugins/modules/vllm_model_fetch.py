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
      - V(activate) makes O(revision), a revision the store already holds intact, current again, without fetching or
        pruning anything (the rolling update's rollback, to the revision its restored units name). Needs O(store),
        O(name) and O(revision); O(source) is not used.
    type: str
    choices: [place, plan, manifest, activate]
    default: place
  store:
    description: Root of the model store.
    type: path
  name:
    description: The model's name (its directory in the store).
    type: str
  source:
    description:
      - Source URI, C(hf://org/name), C(s3://bucket/prefix) or C(https://host/dir/) (the files named by O(sha256) or
        O(sha256sums) under that prefix or URL), C(file:///dir/on/host) or C(controller:///dir/on/controller).
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
  sha256:
    description: File name to sha256 for https, file and controller sources.
    type: dict
  sha256sums:
    description: A SHA256SUMS file, relative to the source directory (or URL) or absolute.
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
    description: Parallel hub downloads.
    type: int
    default: 4
  ca_bundle:
    description:
      - A PEM bundle on the host that hub, HTTPS and S3 downloads trust instead of the clients' own CA store (a
        TLS-intercepting proxy's CA). Default the clients' own.
    type: path
  fit:
    description:
      - What the fit check weighs a new revision against, before its first byte is downloaded (or, for a
        controller source, copied). C(facts) is C(ansible_facts.arm_inference_host) (the host_facts module);
        C(instances) and C(serve_model) are vllm_serve's instances and default model as its contract publishes
        them (every instance that names this model is checked in its layout, or the single-instance layout when
        none does); C(kv_cache_min_gib) and C(memory_headroom_gib) are vllm_serve's floor and headroom.
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
  description: Bytes of the weight files the source announces (or the record holds), before any download.
  returned: always
  type: int
total_bytes:
  description: Bytes of every file of the model.
  returned: always
  type: int
fit:
  description:
    - For a revision not placed yet, the fit check's numbers per layout checked (C(variable), C(per_rank_gib),
      C(node), C(node_share_gib), C(kv_budget_gib), C(checked)).
  returned: when a new revision was weighed
  type: list
  elements: dict
free_bytes:
  description: Free bytes on the store's file system before the placement.
  returned: action place and plan
  type: int
needed:
  description: For V(plan), whether the revision still has to be copied (and where, in RV(staging)).
  returned: action plan
  type: bool
staging:
  description: For V(plan), the staging directory a controller source is copied to.
  returned: action plan
  type: str
manifest:
  description: For V(manifest), each file's sha256 and size.
  returned: action manifest
  type: dict
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

import grp
import os
import shutil
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.six.moves.urllib.parse import quote, urljoin
from ansible.module_utils.urls import open_url
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_info
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_model_store as store_rules
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_tuning
from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_model_store import ModelStoreError


def _model_from_params(params):
    model = dict((key, params[key]) for key in store_rules.MODEL_KEYS if params.get(key) is not None)
    return store_rules.normalize_model(model, 0)


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
                              % (model["name"], root, model["source"]))
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
        self.state = store_rules.read_state(self.dir)
        self.current = store_rules.current_revision(self.dir) if os.path.isdir(self.dir) else None

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

    def staging(self, revision):
        return os.path.join(self.dir, store_rules.STAGING_PREFIX + revision.replace("/", "_"))

    def placed(self, revision):
        record = self.state["revisions"].get(revision)
        if record and store_rules.intact(self.dir, revision, record):
            if record["kind"] == "host" and not self._host_unchanged(record):
                return None
            return record
        return None

    def _host_unchanged(self, record):
        root = os.path.join(self.dir, record["revision"])
        for name, entry in record["files"].items():
            try:
                if os.stat(os.path.join(root, name)).st_mtime_ns != entry.get("mtime_ns"):
                    return False
            except OSError:
                return False
        return True

    def check_fit(self, revision, weight_bytes):
        """Refuse a revision that cannot fit the host's memory per NUMA node, before any byte is written."""
        fit = self.module.params["fit"] or {}
        if not fit.get("facts"):
            return None
        results = []
        for layout in store_rules.serving_layouts(self.name, fit.get("instances"), fit.get("serve_model") or ""):
            try:
                checked = vllm_model_info.check_fit(
                    fit["facts"], weight_bytes, tensor_parallel_size=layout["tensor_parallel_size"],
                    instances=layout["instances"], kv_cache_min_gib=fit.get("kv_cache_min_gib", 1),
                    memory_headroom_gib=fit.get("memory_headroom_gib"), model="%s at %s" % (self.name, revision),
                    variable=layout["variable"])
            except vllm_tuning.TuningError as error:
                raise ModelStoreError("%s Nothing was fetched; the previous revision (%s) stays current."
                                      % (error, self.current or "none"))
            results.append(dict(checked, variable=layout["variable"]))
        return results

    def check_disk(self, revision, needed):
        free = store_rules.free_bytes(self.root)
        store_rules.check_free_disk(self.name, revision, needed, free, self.reserve, self.root)
        return free

    def commit(self, revision, record, staged=None, link_target=None):
        """Move a verified revision into place, record it, switch current, prune."""
        target = os.path.join(self.dir, revision)
        if os.path.lexists(target):
            store_rules.remove_entry(self.dir, revision)
        if staged:
            self._own_tree(staged)
            os.rename(staged, target)
        else:
            os.symlink(link_target, target)
        self.state["revisions"][revision] = record
        self.state["refs"][record["requested"]] = revision
        store_rules.write_state(self.dir, self.state)

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
        junk = store_rules.leftovers(self.dir, self.state) if prune else []
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
        return result


def _record(model, revision, requested, files, extra=None):
    sizes = dict((name, entry["size"]) for name, entry in files.items())
    record = {"revision": revision, "requested": requested, "kind": model["kind"], "source": model["source"],
              "files": files, "weight_bytes": store_rules.weight_bytes(sizes),
              "total_bytes": sum(sizes.values()), "placed": store_rules.now()}
    record.update(extra or {})
    return record


def _announced(result, record):
    result["weight_bytes"] = record["weight_bytes"]
    result["total_bytes"] = record["total_bytes"]


def _fail_cleanly(store, staging, error):
    if staging and os.path.isdir(staging):
        shutil.rmtree(staging, ignore_errors=True)
    raise ModelStoreError("%s: %s; the previous revision (%s) stays current" % (store.name, error, store.current or "none"))


def place_hub(store, module):
    model, result = store.model, {"changed": False}
    requested = model["revision"]
    revision = requested if store_rules.is_commit(requested) else store.state["refs"].get(requested)
    record = store.placed(revision) if revision else None
    if record:
        _announced(result, record)
        result["_record"] = record
        return store.finish(revision, result)

    # Only now is the hub client loaded: a placed revision never needs it.
    os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    os.environ["HF_HOME"] = os.path.join(store.root, ".hf-home")
    try:
        import huggingface_hub
        from huggingface_hub import errors as hub_errors
    except ImportError as error:
        raise ModelStoreError("%s: huggingface_hub is not importable by %s (%s); run the role, which installs it into "
                              "vllm_model_tools_venv" % (model["name"], module._name, error))
    if module.params["ca_bundle"]:
        _hub_trusts(huggingface_hub, module.params["ca_bundle"])
    token = model["token"] or False
    api = huggingface_hub.HfApi(endpoint=model["endpoint"], token=token)
    variable = "vllm_model_models (%s)" % model["name"]
    try:
        info = api.model_info(model["location"], revision=requested, files_metadata=True)
    except hub_errors.RevisionNotFoundError:
        raise ModelStoreError("%s.revision: %s has no revision %s (got %s); pin a commit, tag or branch that exists"
                              % (variable, model["location"], requested, requested))
    except hub_errors.GatedRepoError:
        raise ModelStoreError("%s.token: %s is gated and %s (got %s); accept its terms on the hub and set a token "
                              "with read access" % (variable, model["location"],
                                                    "the token was refused" if model["token"] else "no token is set",
                                                    "a token" if model["token"] else "no token"))
    except hub_errors.RepositoryNotFoundError:
        raise ModelStoreError("%s.source: no repository %s on %s, or it is private (got %s); check the id, or set a "
                              "token" % (variable, model["location"], api.endpoint, model["source"]))
    except Exception as error:  # connection refused, DNS, TLS, timeouts: the client's many exception types
        raise ModelStoreError("%s.endpoint: the hub at %s cannot be reached (got %s: %s); check the endpoint, proxy and "
                              "CA settings, or pin a revision already placed" % (variable, api.endpoint,
                                                                                 type(error).__name__, error))
    revision = info.sha
    siblings = dict((sibling.rfilename, sibling) for sibling in info.siblings or [])
    names = store_rules.select_files(sorted(siblings), model["include"], model["exclude"])
    if not names:
        raise ModelStoreError("%s.include: no file of %s at %s matches (got include %s, exclude %s); adjust the "
                              "patterns" % (variable, model["location"], revision, model["include"], model["exclude"]))
    expected = {}
    for name in names:
        sibling = siblings[name]
        store_rules.check_relative_path("%s file" % variable, name)
        if sibling.lfs is not None:
            expected[name] = {"sha256": sibling.lfs.sha256, "size": sibling.lfs.size}
        else:
            expected[name] = {"git_sha1": sibling.blob_id, "size": sibling.size}
    sizes = dict((name, entry["size"] or 0) for name, entry in expected.items())
    result["weight_bytes"] = store_rules.weight_bytes(sizes)
    result["total_bytes"] = sum(sizes.values())
    existing = store.placed(revision)
    if not existing:
        result["fit"] = store.check_fit(revision, result["weight_bytes"])
    result["free_bytes"] = store.check_disk(revision, result["total_bytes"])

    if existing:  # a branch now pointing at a commit placed earlier under another name
        store.state["refs"][requested] = revision
        result["_record"] = existing
        if not module.check_mode:
            store_rules.write_state(store.dir, store.state)
        return store.finish(revision, result)
    result["changed"] = True
    if module.check_mode:
        result["_record"] = _record(model, revision, requested, dict(
            (name, {"size": size, "sha256": None}) for name, size in sizes.items()))
        return store.finish(revision, result)

    store.ensure_dirs()
    staging = store.staging(revision)
    try:
        if os.path.lexists(staging):
            shutil.rmtree(staging)
        os.mkdir(staging, 0o700)

        def download(name):
            huggingface_hub.hf_hub_download(model["location"], name, revision=revision, local_dir=staging,
                                            endpoint=model["endpoint"], token=token)

        with ThreadPoolExecutor(max_workers=max(1, module.params["workers"])) as pool:
            list(pool.map(download, names))
        # The client's own bookkeeping inside local_dir is not part of the model.
        shutil.rmtree(os.path.join(staging, ".cache"), ignore_errors=True)
        files = store_rules.verify_files(staging, expected)
        store.commit(revision, _record(model, revision, requested, files), staged=staging)
    except (ModelStoreError, OSError) as error:
        _fail_cleanly(store, staging, error)
    except Exception as error:  # the client's download errors
        _fail_cleanly(store, staging, "the download from %s failed (%s: %s)" % (api.endpoint, type(error).__name__,
                                                                                error))
    return store.finish(revision, result)


def _hub_trusts(huggingface_hub, ca_bundle):
    """Make the hub client trust ca_bundle: its documented hook, set_client_factory, with the client it builds by
    default (the same request hook, redirects, no timeout) plus the bundle."""
    import ssl
    import httpx2
    from huggingface_hub.utils import _http

    context = ssl.create_default_context(cafile=ca_bundle)
    huggingface_hub.set_client_factory(lambda: httpx2.Client(
        event_hooks={"request": [_http.hf_request_event_hook]}, follow_redirects=True, timeout=None, verify=context))


def place_host(store, module):
    model, result = store.model, {"changed": False}
    root = model["location"]
    requested = model["revision"]
    revision = requested or store.state["refs"].get(store_rules.manifest_revision(dict(
        (name, {"sha256": digest}) for name, digest in (_operator_manifest(model, root) or {}).items())))
    record = store.placed(revision) if revision else None
    if record:
        _announced(result, record)
        result["_record"] = record
        return store.finish(revision, result)
    files = directory_manifest(model, root)
    for name in files:
        files[name]["mtime_ns"] = os.stat(os.path.join(root, name)).st_mtime_ns
    derived = store_rules.manifest_revision(files)
    revision = requested or derived
    record = _record(model, revision, revision, files)
    record["requested"] = derived  # the ref a re-run without a label looks up
    _announced(result, record)
    result["fit"] = store.check_fit(revision, record["weight_bytes"])
    result["changed"] = True
    result["_record"] = record
    if not module.check_mode:
        store.ensure_dirs()
        store.commit(revision, record, link_target=root)
    return store.finish(revision, result)


def _http_base(model):
    return model["source"] if model["source"].endswith("/") else model["source"] + "/"


def _http_open(model, url, method="GET", timeout=60, ca_bundle=None):
    try:
        return open_url(url, method=method, timeout=timeout, follow_redirects="safe", ca_path=ca_bundle)
    except Exception as error:  # HTTPError, URLError, TLS and socket errors
        raise ModelStoreError("vllm_model_models (%s).source: %s cannot be fetched (got %s: %s); check the URL, "
                              "proxy and CA settings" % (model["name"], url, type(error).__name__, error))


def _http_key(model):
    """What a re-run without a revision label looks up: the checksums given, or the sums file's URL."""
    if model.get("sha256"):
        return store_rules.manifest_revision(dict((name, {"sha256": digest.lower()})
                                                  for name, digest in model["sha256"].items()))
    return "sha256sums:" + urljoin(_http_base(model), model["sha256sums"])


def place_http(store, module):
    """An HTTP(S) file list: each file <source>/<name> of the checksums, streamed into staging."""
    model, result = store.model, {"changed": False}
    key = _http_key(model)
    revision = model["revision"] or store.state["refs"].get(key)
    record = store.placed(revision) if revision else None
    if record:
        _announced(result, record)
        result["_record"] = record
        return store.finish(revision, result)
    base = _http_base(model)
    ca_bundle = module.params["ca_bundle"]
    if model.get("sha256"):
        expected = dict((name, digest.lower()) for name, digest in model["sha256"].items())
    else:
        url = urljoin(base, model["sha256sums"])
        expected = store_rules.parse_sha256sums(_http_open(model, url, ca_bundle=ca_bundle).read().decode(
            "utf-8", "replace"), url)
    revision = model["revision"] or store_rules.manifest_revision(
        dict((name, {"sha256": digest}) for name, digest in expected.items()))
    existing = store.placed(revision)
    if existing:
        store.state["refs"][key] = revision
        if not module.check_mode:
            store_rules.write_state(store.dir, store.state)
        result["_record"] = existing
        _announced(result, existing)
        return store.finish(revision, result)
    sizes = {}
    for name in expected:
        length = _http_open(model, base + quote(name), method="HEAD", ca_bundle=ca_bundle).headers.get(
            "Content-Length")
        sizes[name] = int(length) if length and length.isdigit() else 0
    result["weight_bytes"] = store_rules.weight_bytes(sizes)
    result["total_bytes"] = sum(sizes.values())
    result["fit"] = store.check_fit(revision, result["weight_bytes"])
    result["free_bytes"] = store.check_disk(revision, result["total_bytes"])
    record = _record(model, revision, key, dict((name, {"sha256": expected[name], "size": sizes[name]})
                                                for name in expected))
    result["changed"] = True
    result["_record"] = record
    if module.check_mode:
        return store.finish(revision, result)
    store.ensure_dirs()
    staging = store.staging(revision)
    try:
        if os.path.lexists(staging):
            shutil.rmtree(staging)
        os.mkdir(staging, 0o700)
        for name in sorted(expected):
            target = os.path.join(staging, name)
            if not os.path.isdir(os.path.dirname(target)):
                os.makedirs(os.path.dirname(target), 0o700)
            response = _http_open(model, base + quote(name), ca_bundle=ca_bundle)
            with open(target, "wb") as handle:
                for block in iter(lambda: response.read(1 << 20), b""):
                    handle.write(block)
        files = store_rules.verify_files(staging, dict((name, {"sha256": expected[name]}) for name in expected))
        record["files"] = files
        record.update(weight_bytes=store_rules.weight_bytes(dict((n, e["size"]) for n, e in files.items())),
                      total_bytes=sum(entry["size"] for entry in files.values()))
        store.commit(revision, record, staged=staging)
    except (ModelStoreError, OSError) as error:
        _fail_cleanly(store, staging, error)
    return store.finish(revision, result)


def _s3_url(model, key):
    return "s3://%s/%s" % (model["bucket"], key)


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


def _s3_client(model, ca_bundle=None):
    """A boto3 client: the keys given (module arguments, never logged), else boto3's own chain (the instance
    profile on EC2). Short timeouts and few retries, so an unreachable endpoint fails in seconds."""
    try:
        import boto3
        from botocore.config import Config
    except ImportError as error:
        raise ModelStoreError("%s: boto3 is not importable (%s); run the role, which installs it into "
                              "vllm_model_tools_venv" % (model["name"], error))
    config = Config(connect_timeout=10, read_timeout=60, retries={"max_attempts": 2, "mode": "standard"})
    return boto3.session.Session().client(
        "s3", region_name=model["region"], endpoint_url=model["endpoint_url"], config=config, verify=ca_bundle,
        aws_access_key_id=model["access_key_id"], aws_secret_access_key=model["secret_access_key"])


def _s3_error(model, url, error):
    """One line for what boto3 raised: denied, missing, no credentials, or an unreachable endpoint."""
    variable = "vllm_model_models (%s)" % model["name"]
    response = getattr(error, "response", None) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    endpoint = model["endpoint_url"] or "the AWS endpoint of region %s" % (model["region"] or "(boto3's default)")
    if code in ("AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled"):
        return ModelStoreError("%s.source: access to %s is denied (got %s); grant the host's role (or the keys given) "
                               "s3:GetObject on the prefix" % (variable, url, code))
    if code in ("NoSuchKey", "404", "NotFound"):
        return ModelStoreError("%s.source: %s does not exist (got %s); check the prefix and the names in the checksums"
                               % (variable, url, code))
    if code in ("NoSuchBucket",):
        return ModelStoreError("%s.source: bucket %s does not exist (got %s); check the source" % (
            variable, model["bucket"], code))
    if type(error).__name__ in ("NoCredentialsError", "PartialCredentialsError"):
        return ModelStoreError("%s.source: no AWS credentials for %s (got %s); attach an instance profile to the host "
                               "or set access_key_id and secret_access_key" % (variable, url, type(error).__name__))
    if type(error).__name__ == "NoRegionError":
        return ModelStoreError("%s.region: no region for %s (got none); set region" % (variable, url))
    return ModelStoreError("%s.endpoint_url: %s cannot be reached for %s (got %s: %s); check endpoint_url, region, "
                           "proxy and CA settings" % (variable, endpoint, url, type(error).__name__,
                                                      str(error).splitlines()[0] if str(error) else ""))


def place_s3(store, module):
    """An S3 prefix: the files the checksums name, s3://bucket/prefix/<name>, downloaded by boto3 into staging."""
    model, result = store.model, {"changed": False}
    ref = _s3_ref(model)
    revision = model["revision"] or store.state["refs"].get(ref)
    record = store.placed(revision) if revision else None
    if record:  # decided from the record alone: no client is created
        _announced(result, record)
        result["_record"] = record
        return store.finish(revision, result)
    client = _s3_client(model, module.params["ca_bundle"])

    def call(url, function, **arguments):
        try:
            return function(**arguments)
        except Exception as error:  # botocore's ClientError, EndpointConnectionError, NoCredentialsError, ...
            raise _s3_error(model, url, error)

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
        store.state["refs"][ref] = revision
        if not module.check_mode:
            store_rules.write_state(store.dir, store.state)
        result["_record"] = existing
        _announced(result, existing)
        return store.finish(revision, result)
    sizes = {}
    for name in sorted(expected):
        key = _s3_key(model, name)
        sizes[name] = int(call(_s3_url(model, key), client.head_object, Bucket=model["bucket"], Key=key)
                          ["ContentLength"])
    result["weight_bytes"] = store_rules.weight_bytes(sizes)
    result["total_bytes"] = sum(sizes.values())
    result["fit"] = store.check_fit(revision, result["weight_bytes"])
    result["free_bytes"] = store.check_disk(revision, result["total_bytes"])
    record = _record(model, revision, ref, dict((name, {"sha256": expected[name], "size": sizes[name]})
                                                for name in expected))
    result["changed"] = True
    result["_record"] = record
    if module.check_mode:
        return store.finish(revision, result)
    store.ensure_dirs()
    staging = store.staging(revision)
    try:
        if os.path.lexists(staging):
            shutil.rmtree(staging)
        os.mkdir(staging, 0o700)
        for name in sorted(expected):
            target = os.path.join(staging, name)
            if not os.path.isdir(os.path.dirname(target)):
                os.makedirs(os.path.dirname(target), 0o700)
            key = _s3_key(model, name)
            # boto3's managed transfer: ranged parts in parallel for large files.
            call(_s3_url(model, key), client.download_file, Bucket=model["bucket"], Key=key, Filename=target)
        files = store_rules.verify_files(staging, dict((name, {"sha256": expected[name], "size": sizes[name]})
                                                       for name in expected))
        record["files"] = files
        store.commit(revision, record, staged=staging)
    except (ModelStoreError, OSError) as error:
        _fail_cleanly(store, staging, error)
    return store.finish(revision, result)


def plan_controller(store, module):
    model, manifest = store.model, module.params["manifest"] or {}
    if not manifest:
        raise ModelStoreError("%s: action plan needs the manifest computed on the controller" % model["name"])
    revision = model["revision"] or store_rules.manifest_revision(manifest)
    record = store.placed(revision)
    sizes = dict((name, entry["size"]) for name, entry in manifest.items())
    result = {"changed": False, "revision": revision, "weight_bytes": store_rules.weight_bytes(sizes),
              "total_bytes": sum(sizes.values()), "needed": record is None, "staging": store.staging(revision)}
    if record is None:
        result["fit"] = store.check_fit(revision, result["weight_bytes"])
        result["free_bytes"] = store.check_disk(revision, result["total_bytes"])
        result["changed"] = True
        if not module.check_mode:
            store.ensure_dirs()
            if not os.path.isdir(result["staging"]):
                os.mkdir(result["staging"], 0o700)
    return result


def place_controller(store, module):
    model, manifest = store.model, module.params["manifest"] or {}
    revision = model["revision"] or store_rules.manifest_revision(manifest)
    result = {"changed": False}
    record = store.placed(revision)
    if record:
        _announced(result, record)
        result["_record"] = record
        return store.finish(revision, result)
    staged = module.params["staged"]
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
        store.commit(revision, record, staged=staged)
    except (ModelStoreError, OSError) as error:
        _fail_cleanly(store, staged, "the copy from the controller does not verify: %s" % error)
    return store.finish(revision, result)


def activate(store, module):
    """Make a revision the store holds intact current again; nothing is fetched, verified again or pruned."""
    revision = module.params["revision"]
    record = store.placed(revision)
    if record is None:
        raise ModelStoreError(
            "%s: revision %s is not placed intact in %s (placed: %s); place it again with the vllm_model role"
            % (store.name, revision, store.dir, ", ".join(sorted(store.state["revisions"])) or "none"))
    result = {"changed": False, "_record": record}
    _announced(result, record)
    return store.finish(revision, result, prune=False)


def run(module):
    action = module.params["action"]
    if action == "manifest":
        model = _model_from_params(module.params)
        files = directory_manifest(model, model["location"])
        sizes = dict((name, entry["size"]) for name, entry in files.items())
        return {"changed": False, "manifest": files, "revision": model["revision"] or store_rules.manifest_revision(files),
                "weight_bytes": store_rules.weight_bytes(sizes), "total_bytes": sum(sizes.values())}
    for key in ("store", "name"):
        if not module.params[key]:
            raise ModelStoreError("action %s needs %s" % (action, key))
    store = Store(module)
    if action == "activate":
        return activate(store, module)
    kind = store.model["kind"]
    if action == "plan":
        return plan_controller(store, module)
    if kind == "hf":
        return place_hub(store, module)
    if kind == "host":
        return place_host(store, module)
    if kind == "http":
        return place_http(store, module)
    if kind == "s3":
        return place_s3(store, module)
    return place_controller(store, module)


def main():
    module = AnsibleModule(
        argument_spec={
            "action": {"type": "str", "choices": ["place", "plan", "manifest", "activate"], "default": "place"},
            "store": {"type": "path"},
            "name": {"type": "str"},
            "source": {"type": "str"},
            "revision": {"type": "str"},
            "token": {"type": "str", "no_log": True},
            "region": {"type": "str"},
            "endpoint_url": {"type": "str"},
            "access_key_id": {"type": "str", "no_log": True},
            "secret_access_key": {"type": "str", "no_log": True},
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
            "fit": {"type": "dict"},
        },
        required_if=[("action", "place", ["source"]), ("action", "plan", ["source"]),
                     ("action", "manifest", ["source"]), ("action", "activate", ["revision"])],
        supports_check_mode=True,
    )
    try:
        module.exit_json(**run(module))
    except (ModelStoreError, store_rules.ModelInputError, OSError, KeyError) as error:
        module.fail_json(msg=str(error))


if __name__ == "__main__":
    main()
