"""Model archives: the member checks (absolute names, '..', links, devices), the common top directory stripped,
and extraction member by member, on tar and zip archives the tests build with tarfile and zipfile."""

from __future__ import annotations

import io
import os
import re
import stat
import tarfile
import zipfile

import pytest

from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_model_archive import ModelArchive
from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_model_store import ModelStoreError

SOURCE = "https://models.example/tiny.tar.gz"
VARIABLE = "vllm_model_models (tiny).source"
FILES = {"config.json": b'{"architectures": ["LlamaForCausalLM"]}', "model.safetensors": b"\x08" + b"\0" * 300,
         "tokenizer/tokenizer.json": b"{}"}
# <variable>: <what is wrong> (got <value>); <what to do>
ONE_LINE = re.compile(r"^vllm_model_models \(tiny\)\.source: the archive [^\n]+ \(got [^\n]+\); [^\n]+$")


def _tar(path, entries, mode="w:gz"):
    """entries: (name, bytes) for files, (name, None) for directories, (name, TarInfo-type, linkname) for others."""
    with tarfile.open(path, mode) as tar:
        for entry in entries:
            info = tarfile.TarInfo(entry[0])
            if len(entry) == 3:
                info.type, info.linkname = entry[1], entry[2]
                tar.addfile(info)
            elif entry[1] is None:
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            else:
                info.size = len(entry[1])
                tar.addfile(info, io.BytesIO(entry[1]))
    return str(path)


def _zip(path, entries):
    """entries: (name, bytes) for files, (name, mode) for an entry with that unix mode and no content."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in entries:
            if isinstance(content, int):
                info = zipfile.ZipInfo(name)
                info.external_attr = content << 16
                archive.writestr(info, b"target")
            else:
                archive.writestr(name, content)
    return str(path)


def _members(path, name="tiny.tar.gz"):
    with ModelArchive(path, name, VARIABLE, SOURCE) as archive:
        return archive.members()


def _refused(path, name="tiny.tar.gz"):
    with pytest.raises(ModelStoreError) as error:
        _members(path, name)
    message = str(error.value)
    assert ONE_LINE.match(message), message
    return message


def _extract(path, root, name="tiny.tar.gz"):
    with ModelArchive(path, name, VARIABLE, SOURCE) as archive:
        archive.extract(archive.members(), str(root))
    found = {}
    for directory, dummy, files in os.walk(root):
        for file_name in files:
            full = os.path.join(directory, file_name)
            found[os.path.relpath(full, root)] = open(full, "rb").read()
    return found


@pytest.mark.parametrize("mode, name", [("w:gz", "tiny.tar.gz"), ("w:xz", "tiny.txz"), ("w:bz2", "tiny.tar.bz2"),
                                        ("w", "tiny.tar")])
def test_one_top_directory_is_stripped_and_every_file_extracted(tmp_path, mode, name):
    entries = [("qwen", None), ("qwen/tokenizer", None)] + [("qwen/" + path, data) for path, data in FILES.items()]
    path = _tar(tmp_path / name, entries, mode)
    members = _members(path, name)
    assert sorted((member.path, member.size) for member in members if not member.directory) == sorted(
        (path, len(data)) for path, data in FILES.items())
    assert _extract(path, tmp_path / "out", name) == FILES
    assert stat.S_IMODE(os.stat(tmp_path / "out" / "config.json").st_mode) == 0o600


def test_dot_names_and_a_zip_without_a_top_directory(tmp_path):
    path = _tar(tmp_path / "dot.tgz", [(".", None)] + [("./" + path, data) for path, data in FILES.items()])
    assert sorted(member.path for member in _members(path, "dot.tgz")) == sorted(FILES)
    path = _zip(tmp_path / "tiny.zip", list(FILES.items()))
    assert _extract(path, tmp_path / "zip", "tiny.zip") == FILES


def test_a_top_level_file_keeps_the_directory_in_the_names(tmp_path):
    path = _tar(tmp_path / "mixed.tar.gz", [("README", b"x"), ("qwen/config.json", b"{}")])
    assert sorted(member.path for member in _members(path, "mixed.tar.gz")) == ["README", "qwen/config.json"]


@pytest.mark.parametrize("entries, words", [
    ([("config.json", b"{}"), ("../x", b"escape")], "member ../x leads out of the model directory with '..'"),
    ([("config.json", b"{}"), ("qwen/../../x", b"escape")], "member qwen/../../x leads out"),
    ([("config.json", b"{}"), ("/etc/cron.d/x", b"* * * * * root id")], "member /etc/cron.d/x has an absolute name"),
    ([("config.json", b"{}"), ("passwd", tarfile.SYMTYPE, "/etc/passwd")],
     "member passwd is a symbolic link (to /etc/passwd)"),
    ([("config.json", b"{}"), ("copy.json", tarfile.LNKTYPE, "config.json")],
     "member copy.json is a hard link (to config.json)"),
    ([("config.json", b"{}"), ("null", tarfile.CHRTYPE, "")], "member null is a device or FIFO"),
    ([("config.json", b"{}"), ("pipe", tarfile.FIFOTYPE, "")], "member pipe is a device or FIFO"),
    ([("config.json", b"{}"), ("config.json", b"{ }")], "member config.json appears twice"),
    ([("config.json", b"{}"), ("config.json/x", b"{}")], "member config.json/x lies below config.json, which is a file"),
    ([("a\nb", b"{}")], "control characters"),
    ([("qwen", None)], "holds no files"),
])
def test_tar_members_that_are_not_plain_files_are_refused_naming_the_member(tmp_path, entries, words):
    message = _refused(_tar(tmp_path / "bad.tar.gz", entries))
    assert words in message and "(got %s)" % SOURCE in message


@pytest.mark.parametrize("entries, words", [
    ([("config.json", b"{}"), ("../x", b"escape")], "member ../x leads out of the model directory"),
    ([("config.json", b"{}"), ("/x", b"escape")], "member /x has an absolute name"),
    ([("config.json", b"{}"), ("passwd", stat.S_IFLNK | 0o777)], "member passwd is a symbolic link"),
    ([("config.json", b"{}"), ("null", stat.S_IFCHR | 0o666)], "member null is a device, FIFO or socket"),
])
def test_zip_members_that_are_not_plain_files_are_refused(tmp_path, entries, words):
    assert words in _refused(_zip(tmp_path / "bad.zip", entries), "bad.zip")


def test_a_damaged_archive_is_refused_on_one_line_and_extraction_never_overwrites(tmp_path):
    path = _tar(tmp_path / "tiny.tar.gz", list(FILES.items()))
    data = open(path, "rb").read()
    (tmp_path / "cut.tar.gz").write_bytes(data[:len(data) // 2])
    with pytest.raises(ModelStoreError) as error:
        _extract(str(tmp_path / "cut.tar.gz"), tmp_path / "cut")
    assert ONE_LINE.match(str(error.value)), str(error.value)
    (tmp_path / "noise.zip").write_bytes(b"not a zip at all")
    assert "cannot be read as a zip archive" in _refused(str(tmp_path / "noise.zip"), "noise.zip")
    # Files are created, never opened over what exists (a link planted there is not followed).
    (tmp_path / "planted").mkdir()
    os.symlink("/etc/passwd", tmp_path / "planted" / "config.json")
    with pytest.raises(FileExistsError):
        _extract(path, tmp_path / "planted")
