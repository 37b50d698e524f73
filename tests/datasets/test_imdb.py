"""The IMDB loader on a small archive with the real layout, written by the test and served through a file:// mirror.

The real archive (84 MB) is never downloaded here: the tests swap ``IMDB_ARCHIVE`` for a ``RemoteFile`` with the
same relative name and the small archive's digest, so everything else (mirror, cache, digest check, tar reading)
runs as it does on the real file.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
from pathlib import Path

import pytest

from attnlab.kit.datasets import imdb
from attnlab.kit.datasets.download import DatasetUnavailable, RemoteFile

# member name -> text; the real layout: aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt, plus files to ignore
REVIEWS = {
    "aclImdb/train/pos/10_7.txt": "Loved it.<br /><br />Would watch again!",
    "aclImdb/train/pos/2_9.txt": "A café scene so naïve it's charming.\n",
    "aclImdb/train/neg/3_1.txt": "Dull. Just dull.",
    "aclImdb/train/neg/0_4.txt": "  Not as good as the book  ",
    "aclImdb/test/pos/5_10.txt": "Brilliant from start to finish.",
    "aclImdb/test/neg/7_2.txt": "I want my two hours back.",
}
IGNORED = {
    "aclImdb/README": "Large Movie Review Dataset v1.0",
    "aclImdb/imdb.vocab": "the\nand\n",
    "aclImdb/imdbEr.txt": "0.0490972013402\n",
    "aclImdb/train/labeledBow.feat": "9 0:9 1:1\n",
    "aclImdb/train/urls_pos.txt": "http://www.imdb.com/title/tt0453418/usercomments\n",
    "aclImdb/train/unsup/0_0.txt": "An unlabelled review.",
    "aclImdb/test/urls_neg.txt": "http://www.imdb.com/title/tt0064354/usercomments\n",
}


def write_archive(path: Path, members: dict[str, str]) -> str:
    """A gzipped tar holding ``members`` (folders included, as in the real file); returns its SHA-256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        folders = sorted({"/".join(name.split("/")[:i]) for name in members for i in range(1, name.count("/") + 1)})
        for folder in folders:
            info = tarfile.TarInfo(folder)
            info.type = tarfile.DIRTYPE
            tar.addfile(info)
        for name, text in members.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def mirror(tmp_path, monkeypatch) -> Path:
    """A mirror folder holding imdb/aclImdb_v1.tar.gz (the small archive), set as ATTNLAB_DATA_MIRROR."""
    folder = tmp_path / "mirror"
    digest = write_archive(folder / imdb.IMDB_ARCHIVE.name, {**REVIEWS, **IGNORED})
    monkeypatch.setattr(imdb, "IMDB_ARCHIVE", RemoteFile(imdb.IMDB_ARCHIVE.name, imdb.IMDB_ARCHIVE.url, digest))
    monkeypatch.setenv("ATTNLAB_DATA_MIRROR", folder.as_uri())
    return folder


def test_the_real_archive_is_described_exactly():
    remote = imdb.IMDB_ARCHIVE
    assert remote.name == "imdb/aclImdb_v1.tar.gz"
    assert remote.url == "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz"
    assert remote.sha256 == "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe"
    assert remote.size == 84_125_825
    assert imdb.IMDB_SIZES == {"train": 25_000, "test": 25_000}


def test_both_splits_in_one_pass_labels_order_and_text(mirror, tmp_path):
    splits = imdb.load_imdb_splits(cache_dir=tmp_path / "cache", progress=False)
    assert set(splits) == {"train", "test"}
    # negative reviews first, then positive, each by numeric review id (2 before 10); stripped, <br /> kept
    assert splits["train"] == [
        ("Not as good as the book", 0),
        ("Dull. Just dull.", 0),
        ("A café scene so naïve it's charming.", 1),
        ("Loved it.<br /><br />Would watch again!", 1),
    ]
    assert splits["test"] == [("I want my two hours back.", 0), ("Brilliant from start to finish.", 1)]
    cached = tmp_path / "cache" / "imdb" / "aclImdb_v1.tar.gz"
    assert cached.read_bytes() == (mirror / "imdb" / "aclImdb_v1.tar.gz").read_bytes()


def test_one_split_and_then_the_cache_only(mirror, tmp_path):
    cache = tmp_path / "cache"
    test = imdb.load_imdb("test", cache_dir=cache, progress=False)
    assert [label for _, label in test] == [0, 1]
    (mirror / "imdb" / "aclImdb_v1.tar.gz").unlink()  # the mirror is gone: the cached copy must do
    assert imdb.load_imdb("train", cache_dir=cache, progress=False)[0] == ("Not as good as the book", 0)
    assert imdb.load_imdb_splits("test", cache_dir=cache, progress=False) == {"test": test}


def test_unknown_split_raises_before_any_download(tmp_path):
    for bad in ("unsup", "val", "Train"):
        with pytest.raises(ValueError, match=f"unknown IMDB split '{bad}'"):
            imdb.load_imdb(bad, cache_dir=tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_offline_without_the_file_says_what_to_do(tmp_path, monkeypatch):
    empty = tmp_path / "empty-mirror"
    empty.mkdir()
    monkeypatch.setenv("ATTNLAB_DATA_MIRROR", empty.as_uri())
    with pytest.raises(DatasetUnavailable) as info:
        imdb.load_imdb("train", cache_dir=tmp_path / "cache", progress=False)
    message = str(info.value)
    assert "imdb/aclImdb_v1.tar.gz" in message
    assert "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz" in message
    assert "c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe" in message
    assert str(tmp_path / "cache" / "imdb" / "aclImdb_v1.tar.gz") in message


def test_a_different_archive_is_refused_by_its_digest(mirror, tmp_path):
    write_archive(mirror / "imdb" / "aclImdb_v1.tar.gz", {"aclImdb/train/pos/0_9.txt": "changed"})
    with pytest.raises(ValueError, match="SHA-256 mismatch"):
        imdb.load_imdb("train", cache_dir=tmp_path / "cache", progress=False)
    assert not (tmp_path / "cache" / "imdb" / "aclImdb_v1.tar.gz").exists()


def test_an_archive_without_the_split_is_reported(tmp_path, monkeypatch):
    folder = tmp_path / "mirror"
    digest = write_archive(folder / "imdb" / "aclImdb_v1.tar.gz", {"aclImdb/train/pos/0_9.txt": "Good.", **IGNORED})
    monkeypatch.setattr(imdb, "IMDB_ARCHIVE", RemoteFile(imdb.IMDB_ARCHIVE.name, imdb.IMDB_ARCHIVE.url, digest))
    monkeypatch.setenv("ATTNLAB_DATA_MIRROR", folder.as_uri())
    assert imdb.load_imdb("train", cache_dir=tmp_path / "cache", progress=False) == [("Good.", 1)]
    with pytest.raises(RuntimeError, match="no review of the 'test' split"):
        imdb.load_imdb("test", cache_dir=tmp_path / "cache", progress=False)
