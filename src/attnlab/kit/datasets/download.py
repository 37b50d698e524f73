"""Download a data file once into a local cache, verified by its SHA-256 sum.

Every real data set of the labs is a list of :class:`RemoteFile` (relative name, public URL, SHA-256).
:func:`fetch_file` puts one into the cache and returns its path; :func:`fetch` does the same for a bare URL.

- Cache: ``$ATTNLAB_DATA`` when set, else ``~/.cache/attnlab`` (see :func:`default_cache_dir`).
- Mirror: when ``$ATTNLAB_DATA_MIRROR`` is set (``file:///srv/data``, ``/srv/data`` or ``http://host:8000``),
  ``fetch_file`` downloads ``<mirror>/<relative name>`` instead of the public URL (courses without internet).
- A file already in the cache with the right digest is never downloaded again.
- A download is written to a temporary file beside its destination and renamed only once its digest is right,
  so an interrupted or corrupt download never leaves a file the next call would trust.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import re
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from tqdm.auto import tqdm

from ... import settings

__all__ = [
    "DATA_ENV",
    "MIRROR_ENV",
    "DatasetUnavailable",
    "RemoteFile",
    "default_cache_dir",
    "fetch",
    "fetch_file",
    "mirror_url",
    "sha256_of",
]

DATA_ENV = settings.DATA
MIRROR_ENV = settings.DATA_MIRROR

_SCHEMES = ("http", "https", "file")
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
_CHUNK = 1 << 16


class DatasetUnavailable(RuntimeError):
    """A data file could not be downloaded (offline, unreachable server, missing file on a mirror).

    Attributes: ``url`` (what was tried), ``path`` (where the file is expected in the cache), ``sha256``.
    """

    def __init__(self, message: str, *, url: str, path: Path, sha256: str):
        super().__init__(message)
        self.url = url
        self.path = path
        self.sha256 = sha256


@dataclass(frozen=True)
class RemoteFile:
    """One file of a data set.

    name:   relative name, the same in the cache and on a mirror (``"multi30k/train.de.gz"``).
    url:    public URL of the original file.
    sha256: lowercase hex SHA-256 of the file's bytes.
    size:   size in bytes when known (documentation only; the digest is what is checked).
    """

    name: str
    url: str
    sha256: str
    size: int | None = None

    def __post_init__(self) -> None:
        _check_relative_name(self.name)
        _check_sha256(self.sha256)
        _check_url(self.url)


def default_cache_dir() -> Path:
    """The cache folder: ``$ATTNLAB_DATA`` when set and not empty, else ``~/.cache/attnlab``."""
    env = settings.get(DATA_ENV).strip()
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "attnlab"


def sha256_of(path: str | os.PathLike) -> str:
    """Lowercase hex SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def mirror_url(name: str, mirror: str | None = None) -> str | None:
    """URL of the relative file ``name`` on the mirror (``$ATTNLAB_DATA_MIRROR`` by default), or None.

    A mirror is a URL prefix (``file:///srv/data``, ``http://127.0.0.1:8000/data``) or a plain folder path.
    """
    _check_relative_name(name)
    if mirror is None:
        mirror = settings.get(MIRROR_ENV).strip()
    if not mirror:
        return None
    if "://" not in mirror:
        mirror = Path(mirror).expanduser().resolve().as_uri()
    _check_url(mirror)
    return mirror.rstrip("/") + "/" + urllib.parse.quote(name)


def fetch_file(
    remote: RemoteFile,
    *,
    cache_dir: str | os.PathLike | None = None,
    progress: bool = True,
    timeout: float = 30,
) -> Path:
    """Path of ``remote`` in the cache, downloaded if needed (from ``$ATTNLAB_DATA_MIRROR`` when it is set).

    Raises ``DatasetUnavailable`` when the file cannot be downloaded, ``ValueError`` when its digest is wrong.
    """
    url = mirror_url(remote.name) or remote.url
    return _fetch(
        url, remote.sha256, remote.name, cache_dir=cache_dir, progress=progress, timeout=timeout,
        public_url=remote.url,
    )


def fetch(
    url: str,
    sha256: str,
    *,
    filename: str | None = None,
    cache_dir: str | os.PathLike | None = None,
    progress: bool = True,
    timeout: float = 30,
) -> Path:
    """Download ``url`` into the cache once and return its path.

    url:       ``http://``, ``https://`` or ``file://``.
    sha256:    expected lowercase hex digest; a mismatch deletes the download and raises ``ValueError``.
    filename:  relative path inside the cache (may contain ``/``); default: the last part of the URL.
    cache_dir: default :func:`default_cache_dir`.
    progress:  show a tqdm bar (sized by Content-Length when the server sends it).
    timeout:   seconds to wait for the server.

    A file already in the cache with the right digest is returned without any network access; one with a wrong
    digest (an older or damaged copy) is downloaded again. Unreachable URLs raise ``DatasetUnavailable``.
    """
    _check_url(url)
    if filename is None:
        filename = PurePosixPath(urllib.parse.unquote(urllib.parse.urlsplit(url).path)).name
        if not filename:
            raise ValueError(f"cannot derive a file name from the URL {url!r}; pass filename='...'")
    return _fetch(
        url, sha256, filename, cache_dir=cache_dir, progress=progress, timeout=timeout, public_url=url
    )


def _fetch(
    url: str,
    sha256: str,
    name: str,
    *,
    cache_dir: str | os.PathLike | None,
    progress: bool,
    timeout: float,
    public_url: str,
) -> Path:
    _check_url(url)
    _check_sha256(sha256)
    _check_relative_name(name)
    if timeout <= 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    path = root.joinpath(*PurePosixPath(name).parts)
    if path.is_file() and sha256_of(path) == sha256:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    _download(url, sha256, path, progress=progress, timeout=timeout, public_url=public_url, name=name)
    return path


def _download(
    url: str, sha256: str, path: Path, *, progress: bool, timeout: float, public_url: str, name: str
) -> None:
    """Stream ``url`` into a temporary file beside ``path``, check its digest, then rename it to ``path``."""
    fd, tmp_name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    tmp = Path(tmp_name)
    digest = hashlib.sha256()
    where = dict(url=url, sha256=sha256, path=path, public_url=public_url, name=name)
    try:
        with os.fdopen(fd, "wb") as out:
            response = _network(lambda: urllib.request.urlopen(url, timeout=timeout), **where)
            with response:
                length = response.headers.get("Content-Length")
                total = int(length) if length and length.isdigit() else None
                with tqdm(
                    total=total, unit="B", unit_scale=True, unit_divisor=1024,
                    desc=path.name, disable=not progress,
                ) as bar:
                    while chunk := _network(lambda: response.read(_CHUNK), **where):
                        out.write(chunk)
                        digest.update(chunk)
                        bar.update(len(chunk))
        actual = digest.hexdigest()
        if actual != sha256:
            raise ValueError(
                f"SHA-256 mismatch for {url}: expected {sha256}, got {actual}. The download was deleted. "
                "The file on the server differs from the one this version of attnlab expects: check the URL "
                f"(or the copy on your mirror, ${MIRROR_ENV}), or update attnlab."
            )
        os.chmod(tmp, 0o644)  # mkstemp makes it owner-only; a shared cache must stay readable
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _network(call, *, url: str, sha256: str, path: Path, public_url: str, name: str):
    """``call()``, with network and file-URL errors turned into ``DatasetUnavailable`` (disk errors pass)."""
    try:
        return call()
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        raise DatasetUnavailable(
            _unavailable_message(url, _reason(exc), path, sha256, public_url, name),
            url=url, path=path, sha256=sha256,
        ) from None  # the reason is in the message; a chained socket traceback would bury the action


def _reason(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code} {exc.reason}"
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason)
    return f"{type(exc).__name__}: {exc}"


def _unavailable_message(url: str, reason: str, path: Path, sha256: str, public_url: str, name: str) -> str:
    """What to do first, then what failed: the reader acts on the first lines."""
    mirror = settings.get(MIRROR_ENV).strip()
    lines = [f"{name} is not in the cache and could not be downloaded. To get it, either"]
    if url != public_url:
        lines.append(
            f"  - put {name} on the mirror ${MIRROR_ENV}={mirror!r}, "
            f"or unset {MIRROR_ENV} to download from {public_url}, or"
        )
    lines += [
        f"  - set {MIRROR_ENV} to a folder or server that holds {name} "
        "(for example file:///path/to/data or http://127.0.0.1:8000), or",
        f"  - download {public_url} by hand and save it as {path} (SHA-256 {sha256}).",
        f"What failed: {url} ({reason}).",
    ]
    return "\n".join(lines)


def _check_url(url: str) -> None:
    scheme = urllib.parse.urlsplit(url).scheme.lower() if isinstance(url, str) else None
    if scheme not in _SCHEMES:
        raise ValueError(f"unsupported URL {url!r}: use one starting with http://, https:// or file://")


def _check_sha256(sha256: str) -> None:
    if not isinstance(sha256, str) or not _SHA256_RE.fullmatch(sha256):
        raise ValueError(f"sha256 must be 64 lowercase hex digits, got {sha256!r}")


def _check_relative_name(name: str) -> None:
    parts = PurePosixPath(name).parts if isinstance(name, str) else ()
    if (
        not parts
        or name.startswith("/")
        or "\\" in name
        or any(part in ("..", ".") for part in parts)
    ):
        raise ValueError(
            f"file name {name!r} must be a relative path inside the cache such as 'multi30k/train.de.gz' "
            "(no leading '/', no '..', forward slashes only)"
        )
