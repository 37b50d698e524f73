"""The download cache on tiny files the tests write themselves: file://, loopback HTTP, mirror, failures."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from attnlab.kit.datasets.download import (
    DatasetUnavailable,
    RemoteFile,
    default_cache_dir,
    fetch,
    fetch_file,
    mirror_url,
)

PAYLOAD = bytes(range(256)) * 8  # 2048 bytes, every byte value
PAYLOAD_SHA = hashlib.sha256(PAYLOAD).hexdigest()


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file())


@pytest.fixture
def source(tmp_path) -> Path:
    """A folder with PAYLOAD at data/blob.bin."""
    (tmp_path / "src" / "data").mkdir(parents=True)
    (tmp_path / "src" / "data" / "blob.bin").write_bytes(PAYLOAD)
    return tmp_path / "src"


def test_default_cache_dir_follows_attnlab_data(monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNLAB_DATA", str(tmp_path / "here"))
    assert default_cache_dir() == tmp_path / "here"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ATTNLAB_DATA", "")
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "attnlab"
    monkeypatch.delenv("ATTNLAB_DATA")
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "attnlab"


def test_file_url_is_downloaded_verified_and_then_served_from_the_cache(source, tmp_path):
    cache = tmp_path / "cache"
    path = fetch((source / "data" / "blob.bin").as_uri(), PAYLOAD_SHA, cache_dir=cache, progress=False)
    assert path == cache / "blob.bin"
    assert path.read_bytes() == PAYLOAD
    assert _files(cache) == [path]  # no temporary file left behind
    assert path.stat().st_mode & 0o777 == 0o644
    (source / "data" / "blob.bin").unlink()  # the origin is gone: a second call must not need it
    again = fetch((source / "data" / "blob.bin").as_uri(), PAYLOAD_SHA, cache_dir=cache, progress=False)
    assert again == path


def test_filename_may_name_a_subfolder_and_default_cache_is_attnlab_data(source, tmp_path):
    url = (source / "data" / "blob.bin").as_uri()
    path = fetch(url, PAYLOAD_SHA, filename="set/part/one.bin", progress=False)
    assert path == tmp_path / "default-cache" / "set" / "part" / "one.bin"  # ATTNLAB_DATA set by conftest
    assert path.read_bytes() == PAYLOAD


def test_http_download_happens_once(serve, source, tmp_path):
    server = serve(source)
    cache = tmp_path / "cache"
    for _ in range(3):
        path = fetch(f"{server.url}/data/blob.bin", PAYLOAD_SHA, cache_dir=cache, progress=False)
        assert path.read_bytes() == PAYLOAD
    assert server.requests == ["/data/blob.bin"]


def test_progress_bar_is_sized_by_content_length(serve, source, tmp_path, capsys):
    server = serve(source)
    fetch(f"{server.url}/data/blob.bin", PAYLOAD_SHA, cache_dir=tmp_path / "cache", progress=True)
    err = capsys.readouterr().err
    assert "blob.bin" in err and "2.00k/2.00k" in err, err  # total known: "done/total"


def test_sha_mismatch_is_rejected_and_the_download_deleted(serve, source, tmp_path):
    server = serve(source)
    cache = tmp_path / "cache"
    wrong = hashlib.sha256(b"something else").hexdigest()
    with pytest.raises(ValueError) as info:
        fetch(f"{server.url}/data/blob.bin", wrong, cache_dir=cache, progress=False)
    message = str(info.value)
    assert f"expected {wrong}" in message and f"got {PAYLOAD_SHA}" in message
    assert _files(cache) == []  # neither the file nor a temporary copy stays


def test_cached_file_with_a_wrong_digest_is_downloaded_again(serve, source, tmp_path):
    server = serve(source)
    cache = tmp_path / "cache"
    path = fetch(f"{server.url}/data/blob.bin", PAYLOAD_SHA, cache_dir=cache, progress=False)
    path.write_bytes(b"truncated")
    assert fetch(f"{server.url}/data/blob.bin", PAYLOAD_SHA, cache_dir=cache, progress=False) == path
    assert path.read_bytes() == PAYLOAD
    assert len(server.requests) == 2


def test_unreachable_url_raises_dataset_unavailable_with_instructions(closed_port, tmp_path):
    url = f"http://127.0.0.1:{closed_port}/data/blob.bin"
    cache = tmp_path / "cache"
    with pytest.raises(DatasetUnavailable) as info:
        fetch(url, PAYLOAD_SHA, cache_dir=cache, progress=False, timeout=5)
    error = info.value
    message = str(error)
    assert isinstance(error, RuntimeError)
    assert url in message
    assert "refused" in message.lower()  # the reason
    assert f"save it as {cache / 'blob.bin'} (SHA-256 {PAYLOAD_SHA})" in message
    assert "ATTNLAB_DATA_MIRROR" in message
    assert (error.url, error.path, error.sha256) == (url, cache / "blob.bin", PAYLOAD_SHA)
    assert _files(cache) == []
    # the action comes first, and no chained socket traceback buries it
    assert message.splitlines()[0] == "blob.bin is not in the cache and could not be downloaded. To get it, either"
    assert error.__cause__ is None and error.__suppress_context__


def test_http_404_and_missing_file_url_raise_dataset_unavailable(serve, source, tmp_path):
    server = serve(source)
    with pytest.raises(DatasetUnavailable, match="HTTP 404"):
        fetch(f"{server.url}/data/missing.bin", PAYLOAD_SHA, cache_dir=tmp_path / "c", progress=False)
    missing = (source / "nothing.bin").as_uri()
    with pytest.raises(DatasetUnavailable, match=missing):
        fetch(missing, PAYLOAD_SHA, cache_dir=tmp_path / "c", progress=False)
    assert _files(tmp_path / "c") == []


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"url": "ftp://example.org/a.bin"}, "ftp://example.org/a.bin"),
        ({"sha256": "ABC"}, "'ABC'"),
        ({"sha256": PAYLOAD_SHA.upper()}, "64 lowercase hex"),
        ({"filename": "../escape.bin"}, "'../escape.bin'"),
        ({"filename": "/etc/passwd"}, "'/etc/passwd'"),
        ({"timeout": 0}, "timeout"),
        ({"url": "http://127.0.0.1:1/"}, "filename="),
    ],
)
def test_fetch_rejects_bad_arguments_before_any_download(kwargs, fragment, tmp_path):
    args = {"url": "http://127.0.0.1:1/a.bin", "sha256": PAYLOAD_SHA, **kwargs}
    url, sha = args.pop("url"), args.pop("sha256")
    with pytest.raises(ValueError) as info:
        fetch(url, sha, cache_dir=tmp_path / "cache", progress=False, **args)
    assert fragment in str(info.value)
    assert not (tmp_path / "cache").exists()


def test_remote_file_validates_its_fields():
    with pytest.raises(ValueError, match="relative path"):
        RemoteFile("../x", "https://example.org/x", PAYLOAD_SHA)
    with pytest.raises(ValueError, match="64 lowercase hex"):
        RemoteFile("x", "https://example.org/x", "0" * 63)
    with pytest.raises(ValueError, match="unsupported URL"):
        RemoteFile("x", "example.org/x", PAYLOAD_SHA)


def test_mirror_url_forms(monkeypatch, tmp_path):
    assert mirror_url("set/a b.gz") is None  # no mirror set (conftest)
    assert mirror_url("set/a.gz", "http://127.0.0.1:8000/") == "http://127.0.0.1:8000/set/a.gz"
    assert mirror_url("set/a b.gz", "file:///srv/data") == "file:///srv/data/set/a%20b.gz"
    monkeypatch.setenv("ATTNLAB_DATA_MIRROR", str(tmp_path))  # a plain folder becomes a file:// URL
    assert mirror_url("set/a.gz") == tmp_path.resolve().as_uri() + "/set/a.gz"


@pytest.mark.parametrize("form", ["file_url", "folder", "http"])
def test_fetch_file_downloads_from_the_mirror_instead_of_the_public_url(
    form, monkeypatch, serve, source, tmp_path, closed_port
):
    mirror = {"file_url": source.as_uri(), "folder": str(source), "http": None}[form]
    if form == "http":
        server = serve(source)
        mirror = server.url
    monkeypatch.setenv("ATTNLAB_DATA_MIRROR", mirror)
    # The public URL is unreachable, so success proves the mirror was used.
    remote = RemoteFile("data/blob.bin", f"http://127.0.0.1:{closed_port}/blob.bin", PAYLOAD_SHA, size=2048)
    path = fetch_file(remote, cache_dir=tmp_path / "cache", progress=False)
    assert path == tmp_path / "cache" / "data" / "blob.bin"
    assert path.read_bytes() == PAYLOAD
    if form == "http":
        assert server.requests == ["/data/blob.bin"]


def test_fetch_file_uses_the_public_url_without_a_mirror(source, tmp_path):
    remote = RemoteFile("copy/blob.bin", (source / "data" / "blob.bin").as_uri(), PAYLOAD_SHA)
    assert fetch_file(remote, cache_dir=tmp_path / "cache", progress=False).read_bytes() == PAYLOAD


def test_a_mirror_without_the_file_names_the_mirror_and_the_public_url(monkeypatch, tmp_path):
    (tmp_path / "empty-mirror").mkdir()
    monkeypatch.setenv("ATTNLAB_DATA_MIRROR", (tmp_path / "empty-mirror").as_uri())
    remote = RemoteFile("data/blob.bin", "https://example.org/public/blob.bin", PAYLOAD_SHA)
    with pytest.raises(DatasetUnavailable) as info:
        fetch_file(remote, cache_dir=tmp_path / "cache", progress=False)
    message = str(info.value)
    assert (tmp_path / "empty-mirror").as_uri() + "/data/blob.bin" in message  # what failed
    assert "unset ATTNLAB_DATA_MIRROR to download from https://example.org/public/blob.bin" in message
    assert f"save it as {tmp_path / 'cache' / 'data' / 'blob.bin'}" in message
