"""The real loaders on the real files, offline: the shared copies served by file:// and loopback HTTP."""

from __future__ import annotations

import pytest

from attnlab.kit.datasets.multi30k import MULTI30K_FILES, MULTI30K_SIZES, load_multi30k, multi30k_file
from attnlab.kit.datasets.shakespeare import TINY_SHAKESPEARE, load_tiny_shakespeare

FIRST_PAIRS = {  # (de, en, fr) of line 1 of each split
    "train": ("Zwei junge weiße Männer sind im Freien in der Nähe vieler Büsche.",
              "Two young, White males are outside near many bushes.",
              "Deux jeunes hommes blancs sont dehors près de buissons."),
    "val": ("Eine Gruppe von Männern lädt Baumwolle auf einen Lastwagen",
            "A group of men are loading cotton onto a truck",
            "Un groupe d'hommes chargent du coton dans un camion"),
    "test_2016_flickr": ("Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.",
                         "A man in an orange hat starring at something.",
                         "Un homme avec un chapeau orange regardant quelque chose."),
}


def test_sums_in_the_code_match_the_shared_sha256sums(shared_data):
    listed = {}
    for line in (shared_data / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split()
        listed[name] = digest
    in_code = {f.name: f.sha256 for f in [TINY_SHAKESPEARE, *MULTI30K_FILES.values()]}
    assert in_code == listed


def test_public_urls():
    assert TINY_SHAKESPEARE.url == (
        "https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt"
    )
    remote = multi30k_file("test", "fr")
    assert remote.name == "multi30k/test_2016_flickr.fr.gz"
    assert remote.url == "https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw/test_2016_flickr.fr.gz"


def test_tiny_shakespeare_through_a_file_mirror(shared_data, monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNLAB_DATA_MIRROR", shared_data.as_uri())
    text = load_tiny_shakespeare(cache_dir=tmp_path / "cache", progress=False)
    assert len(text) == 1_115_394
    assert text.startswith("First Citizen:\nBefore we proceed any further, hear me speak.")
    assert (tmp_path / "cache" / "tinyshakespeare" / "input.txt").stat().st_size == TINY_SHAKESPEARE.size


@pytest.mark.parametrize("split", ["train", "val", "test_2016_flickr"])
def test_multi30k_through_a_file_mirror(split, shared_data, monkeypatch, tmp_path):
    monkeypatch.setenv("ATTNLAB_DATA_MIRROR", shared_data.as_uri())
    pairs = load_multi30k(split, src="de", tgt="en", cache_dir=tmp_path / "cache", progress=False)
    expected = {"train": 29_000, "val": 1_014, "test_2016_flickr": 1_000}[split]
    assert len(pairs) == MULTI30K_SIZES[split] == expected
    de, en, _ = FIRST_PAIRS[split]
    assert pairs[0] == (de, en)
    assert all(s == s.strip() and s for pair in pairs for s in pair)  # stripped, none empty
    cached = {p.name: p.stat().st_size for p in (tmp_path / "cache" / "multi30k").iterdir()}
    assert cached == {f"{split}.{lang}.gz": multi30k_file(split, lang).size for lang in ("de", "en")}


def test_multi30k_and_shakespeare_through_a_loopback_http_mirror(shared_data, serve, monkeypatch, tmp_path):
    server = serve(shared_data)
    monkeypatch.setenv("ATTNLAB_DATA_MIRROR", server.url)
    cache = tmp_path / "cache"
    pairs = load_multi30k("test", src="en", tgt="fr", cache_dir=cache, progress=False)
    text = load_tiny_shakespeare(cache_dir=cache, progress=False)
    expected_requests = ["/multi30k/test_2016_flickr.en.gz", "/multi30k/test_2016_flickr.fr.gz",
                         "/tinyshakespeare/input.txt"]
    assert server.requests == expected_requests
    _, en, fr = FIRST_PAIRS["test_2016_flickr"]
    assert len(pairs) == 1_000 and pairs[0] == (en, fr)
    assert len(text) == 1_115_394
    # Second round: everything comes from the cache, the server sees no new request.
    assert load_multi30k("test", src="en", tgt="fr", cache_dir=cache, progress=False) == pairs
    assert load_tiny_shakespeare(cache_dir=cache, progress=False) == text
    # Reversing the direction needs no download either, and swaps each pair.
    assert load_multi30k("test_2016_flickr", src="fr", tgt="en", cache_dir=cache, progress=False) == [
        (b, a) for a, b in pairs
    ]
    assert server.requests == expected_requests


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"split": "valid"}, "'valid'"),
        ({"src": "cs"}, "src='cs'"),
        ({"tgt": "EN"}, "tgt='EN'"),
        ({"src": "en", "tgt": "en"}, "both 'en'"),
    ],
)
def test_multi30k_rejects_bad_arguments_before_downloading(kwargs, fragment, tmp_path):
    with pytest.raises(ValueError) as info:
        load_multi30k(cache_dir=tmp_path / "cache", progress=False, **kwargs)
    assert fragment in str(info.value)
    assert not (tmp_path / "cache").exists()
