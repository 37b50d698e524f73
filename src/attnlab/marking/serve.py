"""``attnlab mark OUT``: serve the marking application on a gradebook, as Jupyter serves a notebook server.

It listens on 127.0.0.1 (this machine only) unless told otherwise, on a free port unless given one, with a new
random token that the printed URL carries. Each lab's rubric comes from its hidden bundle where one is found
(``autograder/<lab>/`` in the course repository); items already in the gradebook keep their (edited) points.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

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
    read = getattr(bundles, "written_questions", None)  # the build side's reader (issue 29); absent in older kits
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


class MarkingUsageError(ValueError):
    """``attnlab mark`` cannot start: a gradebook that is not there, a port that is taken, the extra not installed."""


def run_marking(target, *, host: str, port: int, start=None) -> int:
    """Open the gradebook at ``target`` (it must exist) and ``serve`` it with a new token; 0 after Ctrl-C."""
    from attnlab.grading.outputs.gradebook import GradebookError, open_gradebook

    if not 0 <= port <= 65535:
        raise MarkingUsageError(f"--port {port} is not a port: pass 1 to 65535, or 0 for a free one")
    try:
        from attnlab.marking.security import new_token  # Starlette: the marking extra

        with open_gradebook(target, create=False) as book:
            serve(book, host=host, port=port, token=new_token(), start=start)
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

    guides = seed_rubrics(MarkStore(gradebook), start)
    port = port or free_port(host)
    if guides:
        say(f"attnlab mark: rubrics of {', '.join(sorted({lab for lab, _ in guides}))} from their bundles")
    if host != LOCAL_HOST:
        say(f"attnlab mark: listening on {host}, not only on this machine: anyone with the URL can mark")
    say(f"attnlab mark: marking {gradebook.target}; open this URL (it carries the token), Ctrl-C to stop:\n"
        f"    http://{LOCAL_HOST if host in ('0.0.0.0', LOCAL_HOST) else host}:{port}/?token={token}")
    uvicorn.run(create_app(gradebook, token, guides), host=host, port=port, log_level="warning")
