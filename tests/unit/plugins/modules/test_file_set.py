"""file_set on a real directory: one run writes what differs, leaves what matches, keeps secrets out of its result
and never lets a reader see a half-written or unvalidated file."""

from __future__ import annotations

import grp
import json
import os
import pwd
import stat

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.arm_inference.vllm.plugins.modules import file_set

OWNER = pwd.getpwuid(os.getuid()).pw_name
GROUP = grp.getgrgid(os.getgid()).gr_name


def run_module(capsys, **args):
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            file_set.main()
    return json.loads(capsys.readouterr().out)


def entry(path, mode="0644", **fields):
    return dict({"path": str(path), "owner": OWNER, "group": GROUP, "mode": mode}, **fields)


def test_a_new_set_is_written_then_a_rerun_changes_nothing(capsys, tmp_path):
    directory = tmp_path / "conf" / "deep"
    files = [entry(directory / "routes.map", content="/v1/models GET\n"),
             entry(directory / "clients.map", mode="0600", secret_content="key-one client\n")]
    first = run_module(capsys, directories=[entry(directory, mode="0750")], files=files)
    assert first["changed"] and first["changed_paths"] == [str(directory)] + [item["path"] for item in files]
    assert (directory / "routes.map").read_text() == "/v1/models GET\n"
    assert stat.S_IMODE((directory / "clients.map").stat().st_mode) == 0o600
    assert stat.S_IMODE(directory.stat().st_mode) == 0o750
    again = run_module(capsys, directories=[entry(directory, mode="0750")], files=files)
    assert not again["changed"] and again["changed_paths"] == []
    assert sorted(os.listdir(directory)) == ["clients.map", "routes.map"]


def test_only_what_differs_is_reported(capsys, tmp_path):
    same, other, loose = tmp_path / "same", tmp_path / "other", tmp_path / "loose"
    same.write_text("a\n")
    other.write_text("old\n")
    loose.write_text("b\n")
    for path in (same, other):
        path.chmod(0o644)
    loose.chmod(0o666)
    result = run_module(capsys, files=[entry(same, content="a\n"), entry(other, content="new\n"),
                                       entry(loose, content="b\n")])
    assert result["changed_paths"] == [str(other), str(loose)]
    assert other.read_text() == "new\n" and stat.S_IMODE(loose.stat().st_mode) == 0o644


def test_a_secret_is_in_no_result_and_no_diff_and_private_from_its_first_byte(capsys, tmp_path, fdopen_modes):
    path = tmp_path / "upstream.map"
    path.write_text("vllm old-secret-value\n")
    path.chmod(0o644)
    with patch_module_args({"files": [entry(path, mode="0600", secret_content="vllm new-secret-value\n")],
                            "_ansible_diff": True}):
        with pytest.raises(SystemExit):
            file_set.main()
    out = capsys.readouterr().out
    assert "secret-value" not in out and "diff" not in json.loads(out)
    # The old file (0644) is read first; the temporary file is private from its creation.
    assert fdopen_modes == [0o644, 0o600]
    assert path.read_text() == "vllm new-secret-value\n"


def test_diff_mode_shows_a_plain_file_before_and_after(capsys, tmp_path):
    path = tmp_path / "haproxy.cfg"
    path.write_text("global\n")
    result = run_module(capsys, files=[entry(path, content="global\n  maxconn 64\n")], _ansible_diff=True)
    assert result["diff"] == [{"before_header": str(path), "after_header": str(path), "before": "global\n",
                               "after": "global\n  maxconn 64\n"}]


def test_check_mode_writes_nothing_and_says_what_would_change(capsys, tmp_path):
    directory = tmp_path / "new"
    existing = tmp_path / "existing"
    existing.write_text("old\n")
    result = run_module(capsys, directories=[entry(directory, mode="0755")],
                        files=[entry(directory / "a", content="x"), entry(existing, content="new\n")],
                        _ansible_check_mode=True)
    assert result["changed_paths"] == [str(directory), str(directory / "a"), str(existing)]
    assert not directory.exists() and existing.read_text() == "old\n"


def test_content_that_fails_validation_leaves_the_file_and_the_files_before_it_are_written(capsys, tmp_path):
    first, checked = tmp_path / "clients.map", tmp_path / "haproxy.cfg"
    checked.write_text("good\n")
    result = run_module(capsys, files=[
        entry(first, content="one\n"),
        entry(checked, content="bad\n", validate="grep -q good %s")])
    assert result["failed"] and "%s was left as it was" % checked in result["msg"] and "exit 1" in result["msg"]
    assert checked.read_text() == "good\n" and first.read_text() == "one\n"
    assert sorted(os.listdir(tmp_path)) == ["clients.map", "haproxy.cfg"]


def test_validation_sees_the_new_content_with_its_final_mode(capsys, tmp_path):
    checked = tmp_path / "unit.service"
    result = run_module(capsys, files=[entry(checked, mode="0640", content="good\n",
                                             validate="sh -c 'grep -q good \"$0\" && test \"$(stat -c %%a \"$0\")\" = 640' %s")])
    assert not result.get("failed"), result
    assert checked.read_text() == "good\n"


def test_a_symbolic_link_is_replaced_by_a_file_and_its_target_is_untouched(capsys, tmp_path):
    target, link = tmp_path / "target", tmp_path / "link"
    target.write_text("keep\n")
    link.symlink_to(target)
    result = run_module(capsys, files=[entry(link, content="keep\n")])
    assert result["changed_paths"] == [str(link)]
    assert not link.is_symlink() and target.read_text() == "keep\n"


def test_a_file_made_of_host_files_never_shows_them(capsys, tmp_path):
    """A certificate and its key joined into one PEM on the host: the key is in no result and no diff; a re-run
    changes nothing; a missing part or a FIFO (whose read would never end) fails naming it, writing nothing."""
    certificate, key, pem = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "gateway.pem"
    certificate.write_text("-----BEGIN CERTIFICATE-----\nCERT\n-----END CERTIFICATE-----\n\n")
    key.write_text("  -----BEGIN PRIVATE KEY-----\nKEY-SECRET\n-----END PRIVATE KEY-----")
    (tmp_path / "live").symlink_to(key)
    wanted = [entry(pem, mode="0600", secret_from_host=[str(certificate), str(tmp_path / "live")])]
    with patch_module_args({"files": wanted, "_ansible_diff": True}):
        with pytest.raises(SystemExit):
            file_set.main()
    first = capsys.readouterr().out
    assert json.loads(first)["changed_paths"] == [str(pem)] and "KEY-SECRET" not in first and "diff" not in json.loads(first)
    assert pem.read_text() == ("-----BEGIN CERTIFICATE-----\nCERT\n-----END CERTIFICATE-----\n"
                               "-----BEGIN PRIVATE KEY-----\nKEY-SECRET\n-----END PRIVATE KEY-----\n")
    assert stat.S_IMODE(pem.stat().st_mode) == 0o600
    assert not run_module(capsys, files=wanted)["changed"]
    os.mkfifo(tmp_path / "fifo")
    for part, why in ((tmp_path / "absent", "No such file or directory"), (tmp_path / "fifo", "is not a regular file")):
        result = run_module(capsys, files=[entry(tmp_path / "new.pem", mode="0600", secret_from_host=[str(part)])])
        assert result["failed"] and result["msg"].startswith("file_set: %s: secret_from_host: " % (tmp_path / "new.pem"))
        assert why in result["msg"] and str(part) in result["msg"]
        assert not (tmp_path / "new.pem").exists()


@pytest.mark.parametrize("files, directories, wanted", [
    ([{"path": "relative", "mode": "0644", "content": ""}], [], "files[0] (relative): path must be absolute"),
    ([{"path": "/x", "mode": "644x", "content": ""}], [], "files[0] (/x): mode must be an octal string"),
    ([{"path": "/x", "mode": "0644"}], [], "files[0] (/x): give exactly one of content, secret_content and "
     "secret_from_host"),
    ([{"path": "/x", "mode": "0644", "content": "a", "secret_content": "b"}], [],
     "files[0] (/x): give exactly one of content, secret_content and secret_from_host"),
    ([{"path": "/x", "mode": "0644", "secret_content": "not-shown-1", "secret_from_host": ["/k"]}], [],
     "files[0] (/x): give exactly one of content, secret_content and secret_from_host"),
    ([], [{"path": "/d", "mode": "rwx"}], "directories[0] (/d): mode must be an octal string"),
    ([{"path": "/x", "mode": "0644", "content": "", "validate": "haproxy -c"}], [],
     "files[0] (/x): validate must contain %s"),
])
def test_bad_entries_are_refused_before_anything_is_written(capsys, tmp_path, files, directories, wanted):
    (tmp_path / "f").write_text("x")
    result = run_module(capsys, files=files, directories=directories, absent=[str(tmp_path / "f")])
    assert result["failed"] and wanted in result["msg"]
    assert os.listdir(tmp_path) == ["f"]


def test_a_relative_absent_path_is_refused(capsys):
    result = run_module(capsys, absent=["api_key"])
    assert result["failed"] and "absent[0] (api_key): path must be absolute" in result["msg"]


def test_a_missing_directory_is_named_and_a_directory_in_the_way_refused(capsys, tmp_path):
    missing = run_module(capsys, files=[entry(tmp_path / "nowhere" / "f", content="x")])
    assert missing["failed"] and "list it under directories" in missing["msg"]
    (tmp_path / "dir").mkdir()
    blocked = run_module(capsys, files=[entry(tmp_path / "dir", content="x")])
    assert blocked["failed"] and "is a directory, not a file" in blocked["msg"]


def test_absent_files_are_removed_after_the_writes_and_a_missing_one_is_fine(capsys, tmp_path):
    stale, link, kept = tmp_path / "api_key", tmp_path / "ca.pem", tmp_path / "pip.conf"
    stale.write_text("old-key\n")
    link.symlink_to(tmp_path / "nowhere")
    result = run_module(capsys, files=[entry(kept, content="[global]\n")],
                        absent=[str(stale), str(link), str(tmp_path / "never-there")])
    assert result["changed_paths"] == [str(kept), str(stale), str(link)]
    assert os.listdir(tmp_path) == ["pip.conf"]
    assert not run_module(capsys, files=[entry(kept, content="[global]\n")], absent=[str(stale)])["changed"]


def test_absent_refuses_a_directory_and_check_mode_removes_nothing(capsys, tmp_path):
    (tmp_path / "dir").mkdir()
    refused = run_module(capsys, absent=[str(tmp_path / "dir")])
    assert refused["failed"] and "is a directory; only files are removed" in refused["msg"]
    (tmp_path / "stale").write_text("x")
    checked = run_module(capsys, absent=[str(tmp_path / "stale")], _ansible_check_mode=True)
    assert checked["changed_paths"] == [str(tmp_path / "stale")] and (tmp_path / "stale").exists()


def test_missing_parents_are_made_0755_whatever_the_directory_s_mode_and_the_umask(capsys, tmp_path):
    """A venv at /opt/vllm/venv on a host without /opt/vllm: the parent must be enterable by the venv's user (the
    build user makes its releases under /opt/vllm), not left private to root."""
    venv = tmp_path / "opt" / "vllm" / "venv"
    old_umask = os.umask(0o077)
    try:
        result = run_module(capsys, directories=[entry(venv, mode="0755")])
    finally:
        os.umask(old_umask)
    assert result["changed_paths"] == [str(venv)]
    for path in (tmp_path / "opt", tmp_path / "opt" / "vllm", venv):
        assert stat.S_IMODE(path.stat().st_mode) == 0o755, path


def test_a_secret_s_failed_validation_says_its_exit_code_and_never_what_the_validator_printed(capsys, tmp_path):
    path = tmp_path / "clients.map"
    result = run_module(capsys, files=[entry(path, mode="0600", secret_content="line-one-SECRET-A\nline-two-SECRET-B\n",
                                             validate="sh -c 'cat \"$0\"; cat \"$0\" >&2; exit 3' %s")])
    assert result["failed"] and "(exit 3)" in result["msg"]
    assert "SECRET-A" not in json.dumps(result) and "SECRET-B" not in json.dumps(result)
    assert os.listdir(tmp_path) == []


def test_a_trailing_slash_and_an_integer_mode_are_what_they_mean(capsys, tmp_path):
    """YAML's unquoted 0644 reaches the module as 420: the mode 0644, not "420"."""
    directory = tmp_path / "a" / "b"
    result = run_module(capsys, directories=[entry(str(directory) + "/", mode=0o750)],
                        files=[entry(str(directory / "f"), mode=0o640, content="x")])
    assert result["changed_paths"] == [str(directory), str(directory / "f")]
    assert stat.S_IMODE(directory.stat().st_mode) == 0o750
    assert stat.S_IMODE((directory / "f").stat().st_mode) == 0o640


def test_a_fifo_at_the_path_is_never_read_and_is_replaced(capsys, tmp_path):
    fifo = tmp_path / "pip.conf"
    os.mkfifo(fifo)
    result = run_module(capsys, files=[entry(fifo, content="[global]\n")], _ansible_diff=True)
    assert result["changed_paths"] == [str(fifo)] and fifo.read_text() == "[global]\n"
    assert result["diff"][0]["before"] == ""


def test_a_symbolic_link_to_a_private_file_never_shows_the_file_in_a_diff(capsys, tmp_path):
    secret = tmp_path / "shadow"
    secret.write_text("root:private-hash\n")
    link = tmp_path / "pip-ca-bundle.pem"
    link.symlink_to(secret)
    result = run_module(capsys, files=[entry(link, content="CA\n")], _ansible_diff=True)
    assert "private-hash" not in json.dumps(result) and secret.read_text() == "root:private-hash\n"


@pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another owner needs root")
def test_new_files_get_the_owner_and_group_asked_for_and_created_parents_are_root_s(capsys, tmp_path):
    other = pwd.getpwnam("nobody")
    group = grp.getgrgid(other.pw_gid).gr_name
    venv = tmp_path / "opt" / "vllm" / "venv"
    result = run_module(capsys, directories=[dict(entry(venv, mode="0755"), owner="nobody", group=group)],
                        files=[dict(entry(venv / "pip.conf", mode="0640", secret_content="[global]\n"),
                                    owner="nobody", group=group)])
    assert not result.get("failed"), result
    for path in (venv, venv / "pip.conf"):
        assert (path.stat().st_uid, path.stat().st_gid) == (other.pw_uid, other.pw_gid), path
    # The parents are root's: the venv's owner cannot rename the venv away and put a link to /etc in its place.
    for path in (tmp_path / "opt", tmp_path / "opt" / "vllm"):
        assert (path.stat().st_uid, stat.S_IMODE(path.stat().st_mode)) == (0, 0o755), path


def test_an_owner_the_host_lacks_is_named_and_no_file_is_left(capsys, tmp_path):
    result = run_module(capsys, files=[dict(entry(tmp_path / "f", content="x"), owner="no-such-user-4f2a")])
    assert result["failed"] and "the owner no-such-user-4f2a of %s does not exist" % (tmp_path / "f") in result["msg"]
    assert os.listdir(tmp_path) == []


def test_a_file_where_a_directory_or_its_parent_should_be_is_named(capsys, tmp_path):
    (tmp_path / "opt").write_text("not a directory")
    for path in (tmp_path / "opt", tmp_path / "opt" / "vllm" / "venv"):
        result = run_module(capsys, directories=[entry(path, mode="0755")])
        assert result["failed"] and result["msg"] == "file_set: %s exists and is not a directory" % (tmp_path / "opt")
