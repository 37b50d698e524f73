"""``attnlab mark OUT``: serve the marking application on a gradebook, as Jupyter serves a notebook server.

It listens on 127.0.0.1 (this machine only) unless told otherwise, on a free port unless given one, with a new
random token that the printed URL carries (the instructor's); it answers only to its own address (``hosts``). It
checks the audit log's hash chain first and says what it found. ``attnlab mark OUT --add-marker NAME`` gives a
marker a token of their own (``markers``) and serves nothing; ``--import-requests FILE`` imports regrade requests
(``regrade_csv``) and serves nothing. Each lab's rubric comes from its hidden bundle where
one is found (``autograder/<lab>/`` in the course repository); items already in the gradebook keep their (edited)
points.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

from attnlab.grading.core import bundle as bundles
from attnlab.marking.store import MarkStore

LOCAL_HOST = "127.0.0.1"


def free_port(host: str = LOCAL_HOST) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def seed_rubrics(store: MarkStore, start=None) -> dict[tuple[str, str], tuple[str, str]]:
    """Add each lab's written questions' rubric items from its bundle (found from ``start``, the course folder);
    return ``{(lab, question): (prompt, reference answer)}`` for the markers' page. A lab without a bundle here is
    left as it is: its markers add items on the page."""
    read = getattr(bundles, "written_questions", None)  # the build side's reader; absent in a kit without written questions
    guides = {}
    for lab in store.gradebook.labs():
        try:
            folder = bundles.find_bundle(lab, start=start)
        except FileNotFoundError:
            continue
        if read is None or not folder.is_dir():
            continue
        for q in read(folder):
            store.ensure_rubric(lab, q.name, [(item.id, item.criterion, item.points) for item in q.rubric])
            guides[(lab, q.name)] = (q.prompt, q.reference)
    return guides


def _marker_line(book, name: str) -> str:
    from attnlab.marking.markers import add_marker

    token = add_marker(MarkStore(book), name)
    return (f"attnlab mark: {name}'s own token (shown once; give it to {name} alone): {token}\n"
            f"    {name} opens the URL `attnlab mark` prints with ?token={token} in place of its token")


def course_roster(start):
    """The course's roster (``roster:`` in course.yml), to match the students of regrade requests; None outside a
    course or where course.yml does not load (marking goes on without it)."""
    from attnlab.course import load_course

    try:
        return load_course(start).roster or None
    except (FileNotFoundError, ValueError):
        return None


def _import_line(book, path: str, start) -> str:
    from attnlab.marking.markers import INSTRUCTOR
    from attnlab.marking.regrade_csv import MAX_BYTES, import_requests

    file = Path(path)
    if not file.is_file() or file.stat().st_size > MAX_BYTES:
        raise MarkingUsageError(f"--import-requests {path}: no such file, or over {MAX_BYTES:,} bytes; give the CSV "
                                "the form exported (columns student, question, text, time)")
    try:
        text = file.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise MarkingUsageError(f"--import-requests {path} is not UTF-8: export the CSV as UTF-8") from None
    added, had = import_requests(MarkStore(book), text, marker=INSTRUCTOR, source=f"imported from {file.name}",
                                 roster=course_roster(start))
    return (f"attnlab mark: {added} regrade request(s) imported from {file.name}"
            + (f" ({had} already there, left as they were)" if had else "") + "; resolve them on the Regrade "
            "requests page of each lab")


class MarkingUsageError(ValueError):
    """``attnlab mark`` cannot start: a gradebook that is not there, a port that is taken, the extra not installed."""


def hosts(host: str, port: int) -> list[str]:
    """The ``Host`` values this server answers to: its address and port (and ``localhost`` for the loopback one)."""
    names = {host, LOCAL_HOST, "localhost"} if host in (LOCAL_HOST, "0.0.0.0", "localhost") else {host}
    if host == "0.0.0.0":  # every address: this machine's name and its addresses
        try:
            name, aliases, addresses = socket.gethostbyname_ex(socket.gethostname())
        except OSError:
            name, aliases, addresses = socket.gethostname(), [], []
        names |= {name, socket.gethostname(), *aliases, *addresses}
    return sorted(f"{name}:{port}" for name in names)


def run_marking(target, *, host: str, port: int, start=None, add_marker: str | None = None,
                import_requests: str | None = None, say: Callable[[str], None] = print) -> int:
    """Open the gradebook at ``target`` (it must exist) and ``serve`` it with a new token; 0 after Ctrl-C. With
    ``add_marker``: print that marker's new token instead; with ``import_requests``: import that CSV instead."""
    from attnlab.grading.outputs.connection import GradebookError
    from attnlab.grading.outputs.gradebook import open_gradebook

    if not 0 <= port <= 65535:
        raise MarkingUsageError(f"--port {port} is not a port: pass 1 to 65535, or 0 for a free one")
    try:
        from attnlab.marking.security import new_token  # Starlette: the marking extra

        with open_gradebook(target, create=False) as book:
            if add_marker is not None:
                say(_marker_line(book, add_marker))
                return 0
            if import_requests is not None:
                say(_import_line(book, import_requests, start))
                return 0
            serve(book, host=host, port=port, token=new_token(), start=start, say=say)
    except ImportError as exc:
        raise MarkingUsageError(f'attnlab mark needs the marking extra ({exc}): pip install "attnlab[marking]"') \
            from None
    except (FileNotFoundError, GradebookError, ValueError) as exc:  # ValueError: a bundle's broken written list
        raise MarkingUsageError(str(exc)) from None
    except OSError as exc:  # the port is taken, the host is not this machine's
        raise MarkingUsageError(f"cannot listen on {host}:{port} ({exc.strerror or exc}): pass another --port or "
                                "--host") from None
    return 0


def serve(gradebook, *, host: str = LOCAL_HOST, port: int = 0, token: str, start=None,
          say: Callable[[str], None] = print) -> None:
    """Run the application on ``gradebook`` until Ctrl-C (uvicorn); ``port`` 0: a free one."""
    import uvicorn

    from attnlab.marking.app import create_app
    from attnlab.marking.audit import check_chain

    guides = seed_rubrics(MarkStore(gradebook), start)
    port = port or free_port(host)
    chain = check_chain(gradebook)
    say(f"attnlab mark: audit log: {chain.text()}" if chain.holds else f"attnlab mark: WARNING: {chain.text()}")
    if guides:
        say(f"attnlab mark: rubrics of {', '.join(sorted({lab for lab, _ in guides}))} from their bundles")
    if host != LOCAL_HOST:
        say(f"attnlab mark: listening on {host}, not only on this machine: anyone with the URL can mark")
    say(f"attnlab mark: marking {gradebook.target}; open this URL (it carries the token), Ctrl-C to stop:\n"
        f"    http://{LOCAL_HOST if host in ('0.0.0.0', LOCAL_HOST) else host}:{port}/?token={token}")
    uvicorn.run(create_app(gradebook, token, guides, hosts=hosts(host, port), roster=course_roster(start)),
                host=host, port=port, log_level="warning")
