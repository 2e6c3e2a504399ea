#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: arm_inference.vllm contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: file_set
short_description: Write a role's set of files, and their directories, in one module run
version_added: 0.1.0
description:
  - Makes each of O(directories), then writes each of O(files), in the order given, with the content given and
    the owner, group and mode given. A file whose content, owner, group and mode already match is left alone, so a
    converged host changes nothing.
  - One module run for what would be two per file with M(ansible.builtin.copy) or M(ansible.builtin.template)
    (a stat, then the copy or a file run for the attributes), so a converged re-run of a role that writes ten
    files spends one round trip on them instead of twenty.
  - New content goes to a temporary file in the same directory, private (0600) from its creation, which gets
    the wanted owner, group and mode and passes O(files[].validate) before it is renamed over the file, so a
    reader sees the old file or the new one, never a part of it, and a secret is never readable by anyone else.
  - When a file fails validation, it is left as it was and the module fails; the files before it in the list
    stay written (as a task per file would leave them).
  - Last, removes each file of O(absent) that exists.
options:
  directories:
    description:
      - Directories made before any file is written. A missing parent is made as the module's user's (root's), mode
        0755, not with the directory's owner as M(ansible.builtin.file) makes it; that owner could otherwise swap
        what root writes below the parent for a link to anywhere.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path of the directory.
        type: path
        required: true
      owner:
        description: Owner of the directory.
        type: str
        default: root
      group:
        description: Group of the directory.
        type: str
        default: root
      mode:
        description: Mode of the directory, an octal string such as C("0755") (an integer is taken as the number it is).
        type: raw
        required: true
  files:
    description:
      - Files written in order, each with exactly one of O(files[].content), O(files[].secret_content) and
        O(files[].secret_from_host).
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path of the file; its directory must exist or be one of O(directories).
        type: path
        required: true
      content:
        description: What the file holds; shown in C(--diff).
        type: str
      secret_content:
        description:
          - What the file holds when it is a secret (a key, a key map); never shown, in no diff or result, and a
            failed O(files[].validate) reports only its exit code.
        type: str
      secret_from_host:
        description:
          - Files of the host the file is made of, in order, each with the whitespace around it removed and followed by
            a newline (a certificate and its key in one PEM). They are read on the host, so their content never
            leaves it; it is shown nowhere, as O(files[].secret_content). Each must be a regular file (a link to one
            is followed).
        type: list
        elements: path
      owner:
        description: Owner of the file.
        type: str
        default: root
      group:
        description: Group of the file.
        type: str
        default: root
      mode:
        description: Mode of the file, an octal string such as C("0644") (an integer is taken as the number it is).
        type: raw
        required: true
      validate:
        description:
          - A command that must succeed on the new content before it replaces the file; C(%s) is the temporary
            file's path (as M(ansible.builtin.copy)'s C(validate)). Run only when the content changes.
        type: str
  absent:
    description: Files (or symbolic links) removed after the files are written; a path that does not exist is fine.
    type: list
    elements: path
    default: []
author:
  - Arm Inference maintainers (@arm-inference)
notes:
  - Supports check mode (reports what would change, writes nothing, validates nothing) and diff mode (the content
    of each changed file given as O(files[].content)).
  - A file's path that is a symbolic link is replaced by a regular file, as M(ansible.builtin.copy) does by default;
    a directory's path that is a symbolic link is followed, as M(ansible.builtin.file) follows it.
  - On a host with SELinux a new content keeps the file's context (a new file gets the policy's default); ACLs and
    other extended attributes of the old file are not carried over.
"""

EXAMPLES = r"""
- name: Write the gateway's key map and configuration, the configuration checked by haproxy -c
  arm_inference.vllm.file_set:
    directories:
      - {path: /etc/haproxy/vllm, mode: "0700"}
    files:
      - path: /etc/haproxy/vllm/clients.map
        secret_content: "{{ client_map }}"
        mode: "0600"
      - path: /etc/haproxy/haproxy.cfg
        content: "{{ lookup('ansible.builtin.template', 'haproxy.cfg.j2') }}"
        mode: "0644"
        validate: haproxy -c -f %s
  register: written
"""

RETURN = r"""
changed_paths:
  description: The directories and files made, changed (content, owner, group or mode) or removed, in the order handled.
  returned: always
  type: list
  elements: str
  sample: ["/etc/haproxy/vllm/clients.map"]
"""

import grp
import os
import pwd
import re
import stat
import tempfile

from ansible.module_utils.basic import AnsibleModule

OCTAL_MODE = re.compile(r"^0?[0-7]{3,4}$")
CONTENT_KEYS = ("content", "secret_content", "secret_from_host")


def octal_mode(mode):
    """The mode as an octal string: a string as given, an integer (YAML's unquoted 0644 is 420) as the number it is;
    None when it is neither an octal string nor an integer."""
    if isinstance(mode, int) and not isinstance(mode, bool) and 0 <= mode <= 0o7777:
        return "%04o" % mode
    if isinstance(mode, str) and OCTAL_MODE.match(mode):
        return mode
    return None


def problems(directories, files, absent=()):
    """One line per bad entry (paths not absolute, modes not octal, content given twice or not at all, a validate
    command without %s)."""
    found = ["file_set: absent[%d] (%s): path must be absolute" % (index, path)
             for index, path in enumerate(absent) if not os.path.isabs(path)]
    for kind, entries in (("directories", directories), ("files", files)):
        for index, entry in enumerate(entries):
            where = "file_set: %s[%d] (%s)" % (kind, index, entry["path"])
            if not os.path.isabs(entry["path"]):
                found.append("%s: path must be absolute" % where)
            if octal_mode(entry["mode"]) is None:
                found.append("%s: mode must be an octal string such as \"0644\" (got %s)" % (where, entry["mode"]))
            if kind == "files" and [entry[key] is not None for key in CONTENT_KEYS].count(True) != 1:
                found.append("%s: give exactly one of content, secret_content and secret_from_host" % where)
            if kind == "files" and entry["validate"] and "%s" not in entry["validate"]:
                found.append("%s: validate must contain %%s, the new file's path (got %s)" % (where, entry["validate"]))
    return found


def normalized(params):
    """The entries with paths normalized (a trailing slash, "//" or "/./" dropped) and modes as octal strings."""
    for kind in ("directories", "files"):
        for entry in params[kind]:
            entry["path"] = os.path.normpath(entry["path"])
            entry["mode"] = octal_mode(entry["mode"]) or entry["mode"]
    params["absent"] = [os.path.normpath(path) for path in params["absent"]]
    return params


def wanted_bytes(entry):
    """The file's content; raises OSError naming a file of O(files[].secret_from_host) that is missing or not a
    regular file (a FIFO would hold the read forever)."""
    if entry["secret_from_host"] is None:
        text = entry["content"] if entry["content"] is not None else entry["secret_content"]
        return text.encode("utf-8")
    parts = []
    for source in entry["secret_from_host"]:
        handle = os.open(source, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(handle, "rb") as stream:
            if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
                raise OSError("%s is not a regular file" % source)
            parts.append(stream.read().strip() + b"\n")
    return b"".join(parts)


def current_bytes(path):
    """The file's bytes, or None when there is no regular file at `path` (missing, a symbolic link, a FIFO...).
    Opened without following a link and checked on the open descriptor, so a link or FIFO swapped in after a check
    is never read (its target could be a root-only file that a diff would show)."""
    try:
        handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as error:
        if os.path.isdir(path) and not os.path.islink(path):
            raise IsADirectoryError(path) from error
        return None  # ELOOP: a symbolic link, replaced by the new file
    with os.fdopen(handle, "rb") as stream:
        info = os.fstat(stream.fileno())
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(path)
        return stream.read() if stat.S_ISREG(info.st_mode) else None


# A parent nobody asked for belongs to the module's user (root) and anyone may pass through it. Given to the
# directory's owner, as ansible.builtin.file gives it, it would let that user swap root's later writes below it for
# links to anywhere: /opt/vllm of a venv at /opt/vllm/venv, where root keeps the release link and its history.
PARENT_MODE = 0o755


def attributes(module, path, entry):
    """What AnsibleModule.set_fs_attributes_if_different takes for `path` with the entry's owner, group and mode
    (the SELinux context left to the host's policy, as copy leaves it without se* options)."""
    return module.load_file_common_arguments({"owner": entry["owner"], "group": entry["group"],
                                              "mode": entry["mode"]}, path=path)


def missing_directories(module, path):
    """`path` and its missing parents, outermost first; fails naming the first of them that exists as something
    other than a directory (the path itself or a parent)."""
    missing = []
    while not os.path.isdir(path):
        if os.path.lexists(path):
            module.fail_json(msg="file_set: %s exists and is not a directory" % path)
        missing.insert(0, path)
        path = os.path.dirname(path)
    return missing


def make_directory(module, entry):
    """Makes the directory when missing, each missing parent first as root's, 0755; returns whether anything
    changed."""
    missing = missing_directories(module, entry["path"])
    if not missing:
        return module.set_fs_attributes_if_different(attributes(module, entry["path"], entry), False)
    if not module.check_mode:
        for directory in missing[:-1]:
            try:
                os.mkdir(directory)
            except FileExistsError:
                if not os.path.isdir(directory):
                    module.fail_json(msg="file_set: %s exists and is not a directory" % directory)
                continue  # made meanwhile by someone else: theirs as it is
            os.chmod(directory, PARENT_MODE)  # whatever the umask
        os.mkdir(missing[-1], 0o700)
        module.set_fs_attributes_if_different(attributes(module, missing[-1], entry), True)
    return True


def ids(module, entry):
    """The entry's owner and group as numbers; fails naming the one the host does not have."""
    try:
        uid = pwd.getpwnam(entry["owner"]).pw_uid
    except KeyError:
        module.fail_json(msg="file_set: the owner %s of %s does not exist on the host" % (entry["owner"], entry["path"]))
    try:
        gid = grp.getgrnam(entry["group"]).gr_gid
    except KeyError:
        module.fail_json(msg="file_set: the group %s of %s does not exist on the host" % (entry["group"], entry["path"]))
    return uid, gid


def selinux_context(module, path):
    """The context the file gets on a host with SELinux: the existing file's, else the policy's default for the
    path (as ansible.builtin.copy's atomic move gives them); None without SELinux."""
    if not module.selinux_enabled():
        return None
    return module.selinux_context(path) if os.path.lexists(path) else module.selinux_default_context(path)


def replace_file(module, entry, data):
    """Writes `data` to a private temporary file next to the file, gives it the entry's owner, group and mode on its
    open descriptor (never by a path someone could swap), validates it, then renames it over the file."""
    path = entry["path"]
    uid, gid = ids(module, entry)
    handle, temporary = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=os.path.dirname(path))
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
            os.fchown(stream.fileno(), uid, gid)
            os.fchmod(stream.fileno(), int(entry["mode"], 8))
        context = selinux_context(module, path)
        if context is not None:
            module.set_context_if_different(temporary, context, False)
        if entry["validate"]:
            rc, out, err = module.run_command(entry["validate"] % temporary)
            if rc != 0:
                # A secret's validator may print what it read: its exit code alone.
                said = "" if entry["content"] is None else ": " + (err or out).strip()[-2000:]
                module.fail_json(msg="file_set: %s was left as it was: its new content failed `%s` (exit %d)%s"
                                 % (path, entry["validate"], rc, said))
        os.replace(temporary, path)
    finally:
        if os.path.lexists(temporary):
            os.unlink(temporary)


def write_file(module, entry, diffs):
    """Writes the file when its content differs, then its attributes; returns whether anything changed."""
    path = entry["path"]
    try:
        data = wanted_bytes(entry)
    except OSError as error:
        module.fail_json(msg="file_set: %s: secret_from_host: %s" % (path, error))
    try:
        before = current_bytes(path)
    except IsADirectoryError:
        module.fail_json(msg="file_set: %s is a directory, not a file" % path)
    if before == data:
        return module.set_fs_attributes_if_different(attributes(module, path, entry), False)
    if entry["content"] is not None and module._diff:
        diffs.append({"before_header": path, "after_header": path,
                      "before": "" if before is None else before.decode("utf-8", "replace"), "after": entry["content"]})
    if module.check_mode:
        return True
    if not os.path.isdir(os.path.dirname(path)):
        module.fail_json(msg="file_set: the directory of %s does not exist; list it under directories" % path)
    replace_file(module, entry, data)
    return True


def remove_file(module, path):
    """Removes the file or symbolic link at `path` when there is one; returns whether anything changed."""
    if not os.path.lexists(path):
        return False
    if os.path.isdir(path) and not os.path.islink(path):
        module.fail_json(msg="file_set: absent (%s) is a directory; only files are removed" % path)
    if not module.check_mode:
        os.unlink(path)
    return True


def main():
    entry_common = {"path": {"type": "path", "required": True}, "owner": {"type": "str", "default": "root"},
                    "group": {"type": "str", "default": "root"}, "mode": {"type": "raw", "required": True}}
    module = AnsibleModule(
        argument_spec={
            "directories": {"type": "list", "elements": "dict", "default": [], "options": dict(entry_common)},
            "files": {"type": "list", "elements": "dict", "default": [], "options": dict(
                entry_common, content={"type": "str"}, secret_content={"type": "str", "no_log": True},
                # Paths, not secrets: what they hold is read on the host and never returned.
                secret_from_host={"type": "list", "elements": "path", "no_log": False}, validate={"type": "str"})},
            "absent": {"type": "list", "elements": "path", "default": []},
        },
        supports_check_mode=True,
    )
    params = normalized(module.params)
    found = problems(params["directories"], params["files"], params["absent"])
    if found:
        module.fail_json(msg="; ".join(found))
    changed_paths, diffs = [], []
    for entry in module.params["directories"]:
        if make_directory(module, entry):
            changed_paths.append(entry["path"])
    for entry in module.params["files"]:
        if write_file(module, entry, diffs):
            changed_paths.append(entry["path"])
    changed_paths.extend(path for path in module.params["absent"] if remove_file(module, path))
    result = {"changed": bool(changed_paths), "changed_paths": changed_paths}
    if diffs:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
