"""Atomic records, damaged-record errors and exclusive locks, on local paths and on TensorFlow's
in-memory filesystem (ram://), which stands for gs:// and the other remote ones."""

import os
import signal
import subprocess
import sys
import textwrap
import uuid

import pytest
import tensorflow as tf

from datasets import files

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def remote_directory() -> str:
    return f"ram://gantry-files-{uuid.uuid4().hex}"


@pytest.mark.parametrize("where", ["local", "ram"])
def test_a_json_record_round_trips_and_leaves_no_temporary_file(tmp_path, where):
    directory = str(tmp_path / "new" / "dir") if where == "local" else remote_directory()
    path = os.path.join(directory, "record.json")
    files.write_json(path, {"b": 1, "a": [1.5, "x"]})
    files.write_json(path, {"b": 2})  # replaced whole
    assert files.read_json(path, holds="h", fix="f") == {"b": 2}
    assert tf.io.gfile.listdir(directory) == ["record.json"]


def test_a_missing_record_is_none(tmp_path):
    assert files.read_json(str(tmp_path / "none.json"), holds="h", fix="f") is None
    assert files.read_json(remote_directory() + "/none.json", holds="h", fix="f") is None


@pytest.mark.parametrize("content", [b"{not json", b"[1, 2]", b"\xff\xfe"])
def test_a_damaged_record_names_the_file_what_it_holds_and_the_fix(tmp_path, content):
    path = tmp_path / "config.json"
    path.write_bytes(content)
    with pytest.raises(files.FileFault) as raised:
        files.read_json(str(path), holds="the flags", fix="Move it away.")
    message = str(raised.value)
    assert message.startswith(f"{path} is damaged (") and message.endswith(
        "it holds the flags. Move it away.")


def test_a_failed_write_keeps_the_old_record_and_no_temporary_file(tmp_path):
    path = str(tmp_path / "best.json")
    files.write_json(path, {"score": 1.0})

    def fail_midway(handle):
        handle.write(b'{"score": ')
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        files.write_atomically(path, fail_midway)
    assert files.read_json(path, holds="h", fix="f") == {"score": 1.0}
    assert os.listdir(tmp_path) == ["best.json"]


def test_a_rename_that_fails_removes_the_temporary_file(tmp_path, monkeypatch):
    def refuse(source, target):
        raise PermissionError(13, "Permission denied", target)

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(PermissionError):
        files.write_json(str(tmp_path / "config.json"), {"a": 1})
    assert os.listdir(tmp_path) == []


def test_a_lock_excludes_a_second_holder_until_released(tmp_path):
    path = str(tmp_path / "sub" / ".lock")
    with files.locked(path, wait=False) as first:
        assert first is not None
        with files.locked(path, wait=False) as second:
            assert second is None
    with files.locked(path, wait=False) as again:
        assert again is not None


def test_a_lock_dies_with_its_holder_killed_by_sigkill(tmp_path):
    path = str(tmp_path / ".lock")
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {ROOT!r})
        from datasets import files
        with files.locked({path!r}, wait=False) as handle:
            print("held", flush=True)
            time.sleep(600)
    """)], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert holder.stdout.readline().strip() == "held"
        with files.locked(path, wait=False) as handle:
            assert handle is None
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        with files.locked(path, wait=False) as handle:
            assert handle is not None
    finally:
        holder.kill()
        holder.wait()


def test_only_paths_with_a_scheme_are_remote():
    assert files.is_local("runs/a") and files.is_local("/abs/b")
    assert not files.is_local("gs://bucket/run") and not files.is_local("ram://x")
