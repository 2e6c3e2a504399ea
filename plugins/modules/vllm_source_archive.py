#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: vllm_source_archive
short_description: Fetch, verify and unpack a vLLM source archive or sdist
version_added: 0.1.0
description:
  - Gives the vllm_build role a source tree from a tar archive instead of a git checkout, from one of
    O(src) (an archive on the host or an http(s)/file URL) or O(sdist_name)/O(sdist_version) (the
    source distribution on the package index the build venv's pip uses).
  - An sdist is looked up like pip does, in the find-links pages and then the index pages that
    O(pip_config) names (PyPI when it names none), through the simple repository API (PEP 503 HTML
    or PEP 691 JSON). The sha256 the index publishes is checked; where it publishes none, O(sha256)
    is required (nothing is downloaded unverified).
  - The archive's sha256 must match O(sha256) when given; a download is kept in O(download_dir)
    and not fetched again while its digest matches.
  - The tree is unpacked beside O(dest) and renamed into place complete, with a marker naming the
    archive's digest; the same archive again changes nothing. Members that would land outside the
    tree, links pointing outside it, members below a link of the same archive and device files are
    refused.
  - User and password parts of URLs are left out of the result and of error messages.
options:
  dest:
    description: Directory that becomes the source tree (the archive's single top directory).
    type: path
    required: true
  src:
    description: An archive file on the host, or an http(s) or file URL of one (C(.tar.gz), C(.tgz), C(.tar.xz), C(.tar.bz2), C(.tar)).
    type: str
  sha256:
    description: Expected sha256 of the archive (hex).
    type: str
  sdist_name:
    description: Project whose source distribution to fetch, with O(sdist_version).
    type: str
  sdist_version:
    description: Exact version of the source distribution.
    type: str
  index_url:
    description: Simple index to look the sdist up on instead of the ones in O(pip_config).
    type: str
  pip_config:
    description: A pip.conf whose index-url, extra-index-url, find-links, no-index and cert apply.
    type: path
  download_dir:
    description: Where downloaded archives are kept. Required with a URL or an sdist.
    type: path
  timeout:
    description: Seconds to wait for an index page or download to answer.
    type: int
    default: 60
author:
  - Arm Inference maintainers (@arm-inference)
notes:
  - In check mode nothing is downloaded or unpacked; the result says whether a real run would unpack.
"""

EXAMPLES = r"""
- name: Fetch vLLM's source distribution from the venv's index
  arm_inference.vllm.vllm_source_archive:
    sdist_name: vllm
    sdist_version: 0.32.0
    pip_config: /opt/vllm/venv/pip.conf
    download_dir: /opt/vllm/src/archives
    dest: /opt/vllm/src/archive

- name: Unpack a release tarball kept on an internal server
  arm_inference.vllm.vllm_source_archive:
    src: https://mirror.example.com/vllm/vllm-0.32.0.tar.gz
    sha256: 0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
    download_dir: /opt/vllm/src/archives
    dest: /opt/vllm/src/archive
"""

RETURN = r"""
archive:
  description: Path of the archive on the host.
  returned: success, not in check mode when it had to be downloaded
  type: str
  sample: /opt/vllm/src/archives/vllm-0.32.0.tar.gz
sha256:
  description: sha256 of the archive (the expected one in check mode before a download).
  returned: success
  type: str
url:
  description: Where the archive came from (null for a file on the host).
  returned: success
  type: str
label:
  description: The archive's file name without its suffix, such as C(vllm-0.32.0).
  returned: success
  type: str
pkg_info:
  description: Whether the tree has a C(PKG-INFO) (an sdist), from which setuptools-scm reads the version.
  returned: success
  type: bool
"""

import os
import shutil

from urllib.error import URLError
from urllib.parse import unquote, urlsplit

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url
from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_source


def _open(url, cert, timeout):
    """A readable response for http(s) and file URLs (find-links pages are often directories)."""
    parts = urlsplit(url)
    if parts.scheme == "file":
        path = unquote(parts.path)
        # A directory is a simple-index page when it has index.html (as pip reads it), else a find-links listing.
        if os.path.isdir(path) and os.path.isfile(os.path.join(path, "index.html")):
            path = os.path.join(path, "index.html")
        elif os.path.isdir(path):
            listing = "".join('<a href="%s">%s</a>\n' % (name, name) for name in sorted(os.listdir(path)))
            return None, listing
        return open(path, "rb"), None
    headers = {"Accept": "application/vnd.pypi.simple.v1+json, text/html;q=0.5"}
    return open_url(url, headers=headers, timeout=timeout, ca_path=cert, http_agent="arm_inference.vllm"), None


def _read_page(url, cert, timeout):
    response, listing = _open(url if "://" in url else "file://" + os.path.abspath(url), cert, timeout)
    if listing is not None:
        return listing
    with response:
        return response.read().decode("utf-8", errors="replace")


def locate_sdist(params, config):
    pages = vllm_source.sdist_locations(params["sdist_name"], config, params["index_url"])
    if not pages:
        raise vllm_source.SourceError("The pip configuration has no-index and no find-links: nowhere to find the sdist.")
    files, problems = [], []
    for page in pages:
        base = page if "://" in page else "file://" + os.path.abspath(page) + "/"
        try:
            files.extend(vllm_source.parse_index_page(_read_page(page, config.get("cert"), params["timeout"]), base))
        except (URLError, OSError, ValueError) as error:
            problems.append("%s: %s" % (page, error))
    try:
        return vllm_source.pick_sdist(files, params["sdist_name"], params["sdist_version"], ", ".join(pages))
    except vllm_source.SourceError as error:
        if problems:
            raise vllm_source.SourceError("%s (pages that could not be read: %s)" % (error, "; ".join(problems))) from error
        raise


def download(url, expected, directory, cert, timeout):
    """The archive at url in directory, verified; kept across runs while its digest matches."""
    name = unquote(os.path.basename(urlsplit(url).path))
    if vllm_source.archive_label(name) is None:
        raise vllm_source.SourceError("%s does not name a tar archive (%s)." % (url, ", ".join(vllm_source.ARCHIVE_SUFFIXES)))
    if not expected:
        raise vllm_source.SourceError("%s has no sha256 to check it against; it is not downloaded unverified." % url)
    path = os.path.join(directory, name)
    if os.path.isfile(path) and vllm_source.file_sha256(path) == expected:
        return path, False
    partial = path + ".part"
    response, listing = _open(url, cert, timeout)
    if listing is not None:
        raise vllm_source.SourceError("%s is a directory, not an archive." % url)
    with response, open(partial, "wb") as handle:
        shutil.copyfileobj(response, handle, 1 << 20)
    actual = vllm_source.file_sha256(partial)
    if actual != expected:
        os.unlink(partial)
        raise vllm_source.SourceError("%s has sha256 %s, but %s was expected; it was not used." % (url, actual, expected))
    os.rename(partial, path)
    return path, True


def run(module):
    params = module.params
    config = {}
    if params["pip_config"] and os.path.isfile(params["pip_config"]):
        with open(params["pip_config"], encoding="utf-8") as handle:
            config = vllm_source.read_pip_config(handle.read())
    expected = (params["sha256"] or "").lower() or None
    url = None
    if params["sdist_name"]:
        found = locate_sdist(params, config)
        url = found["url"]
        expected = vllm_source.sdist_sha256(found, expected)
    elif "://" in params["src"]:
        url = params["src"]
    label = vllm_source.archive_label(url or params["src"])
    if label is None:
        raise vllm_source.SourceError("%s is not a tar archive (%s)." % (url or params["src"], ", ".join(vllm_source.ARCHIVE_SUFFIXES)))
    marker = vllm_source.read_marker(params["dest"])
    result = {"url": vllm_source.redact_urls(url), "label": label, "sha256": expected, "archive": None}
    if module.check_mode:
        unchanged = bool(marker and expected and marker.get("sha256") == expected)
        return dict(result, changed=not unchanged, pkg_info=bool(unchanged and os.path.isfile(os.path.join(params["dest"], "PKG-INFO"))))
    changed = False
    if url:
        if not params["download_dir"]:
            raise vllm_source.SourceError("download_dir is required to fetch %s." % url)
        os.makedirs(params["download_dir"], exist_ok=True)
        archive, changed = download(url, expected, params["download_dir"], config.get("cert"), params["timeout"])
        actual = expected  # download() has hashed the file and checked it against this
    else:
        archive = params["src"]
        if not os.path.isfile(archive):
            raise vllm_source.SourceError("The archive %s does not exist on the host." % archive)
        actual = vllm_source.file_sha256(archive)
        if expected and actual != expected:
            raise vllm_source.SourceError("%s has sha256 %s, but %s was expected; it was not used." % (archive, actual, expected))
    record = {"url": result["url"], "archive": os.path.basename(archive), "label": label}
    changed = vllm_source.install_tree(archive, actual, params["dest"], record) or changed
    return dict(result, changed=changed, archive=archive, sha256=actual,
                pkg_info=os.path.isfile(os.path.join(params["dest"], "PKG-INFO")))


def main():
    module = AnsibleModule(
        argument_spec={
            "dest": {"type": "path", "required": True},
            "src": {"type": "str"},
            "sha256": {"type": "str"},
            "sdist_name": {"type": "str"},
            "sdist_version": {"type": "str"},
            "index_url": {"type": "str"},
            "pip_config": {"type": "path"},
            "download_dir": {"type": "path"},
            "timeout": {"type": "int", "default": 60},
        },
        required_one_of=[("src", "sdist_name")],
        mutually_exclusive=[("src", "sdist_name")],
        required_together=[("sdist_name", "sdist_version")],
        supports_check_mode=True,
    )
    sha256 = module.params["sha256"]
    if sha256 and not (len(sha256) == 64 and all(char in "0123456789abcdefABCDEF" for char in sha256)):
        module.fail_json(msg="sha256 must be 64 hex digits, got %r." % sha256)
    try:
        module.exit_json(**run(module))
    except (vllm_source.SourceError, URLError, OSError) as error:
        module.fail_json(msg=vllm_source.redact_urls(str(error)))


if __name__ == "__main__":
    main()
