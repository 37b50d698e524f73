"""The answer-groups page of `attnlab mark` for a large class: the grouping alone and the whole page, and whether
another marker's request waits for it.

    python benchmarks/marking_groups.py [--answers 1000] [--runs 3]

The answers are drawn (seed 0) as a class writes them: a few arguments, each said in many ways (each answer takes
a random part of one argument's words, up to four words of its own from a 3,000-word vocabulary and a measured number),
and 5% empty. Prints the median of ``--runs`` of ``answer_groups`` and of the page through Starlette's test client on
a SQLite gradebook, then the slowest time of a small page (the labs page) requested while the groups page renders,
and each as a ratio to an anchor timed in the same run (sorting 10^6 drawn floats, median of ``--runs``), so runs on a
loaded machine compare.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path

ARGUMENTS = [
    "the variance of q dot k grows like d because each term has unit variance so the sum of d terms has variance d",
    "without the scaling the softmax saturates the largest logit takes all the weight and the gradients vanish",
    "dividing by the square root of d keeps the logits at unit variance whatever the dimension",
    "i measured the variance for several dimensions and it was close to the dimension every time",
    "large dot products push the softmax into regions where its gradient is almost zero so training stalls",
]


def class_answers(n: int, seed: int = 0) -> dict[str, str]:
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(3000)]
    answers = {}
    for i in range(n):
        if rng.random() < 0.05:
            answers[f"s{i:04d}.ipynb"] = ""
            continue
        words = rng.choice(ARGUMENTS).split()
        kept = [w for w in words if rng.random() < 0.7] + rng.sample(vocabulary, rng.randint(0, 4))
        rng.shuffle(kept)
        answers[f"s{i:04d}.ipynb"] = " ".join(kept) + f" measured {rng.uniform(10, 100):.1f}"
    return answers


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--answers", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from starlette.testclient import TestClient

    from attnlab.grading.outputs.gradebook import open_gradebook
    from attnlab.marking.app import create_app
    from attnlab.marking.groups import answer_groups
    from attnlab.marking.store import MarkStore

    anchor = _anchor(args.runs)
    print(f"anchor (sorting 10^6 floats): median {anchor:.3f} s")
    answers = class_answers(args.answers)
    grouping = []
    for _ in range(args.runs):
        start = time.perf_counter()
        groups = answer_groups(answers)
        grouping.append(time.perf_counter() - start)
    print(f"answer_groups, {len(answers)} answers: median {statistics.median(grouping):.3f} s "
          f"(x{statistics.median(grouping) / anchor:.1f} the anchor), {len(groups)} groups")
    with tempfile.TemporaryDirectory() as tmp, open_gradebook(Path(tmp) / "gradebook.db") as gb:
        _record(gb, answers)
        MarkStore(gb).ensure_rubric("lab05", "scaling_variance", [("scaling_variance.0", "Quotes d", 1.0)])
        client = TestClient(create_app(gb, "t", hosts=["testserver"]))
        assert client.get("/?token=t").status_code == 200
        pages = []
        for _ in range(args.runs):
            start = time.perf_counter()
            assert client.get("/l/lab05/q/scaling_variance/groups").status_code == 200
            pages.append(time.perf_counter() - start)
        print(f"groups page: median {statistics.median(pages):.3f} s (x{statistics.median(pages) / anchor:.1f} the anchor)")
        meanwhile = _meanwhile(client)
        print(f"labs page while the groups page renders: slowest {meanwhile:.3f} s (x{meanwhile / anchor:.1f})")


def _anchor(runs: int) -> float:
    """The median time of sorting the same 10^6 drawn floats, ``runs`` times: this machine's speed now."""
    values, times = [random.Random(1).random() for _ in range(1_000_000)], []
    for _ in range(runs):
        start = time.perf_counter()
        sorted(values)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _meanwhile(client) -> float:
    """The slowest of the labs-page requests made while one groups page is being rendered."""
    done, slowest = threading.Event(), 0.0
    thread = threading.Thread(target=lambda: (client.get("/l/lab05/q/scaling_variance/groups"), done.set()))
    thread.start()
    time.sleep(0.02)
    while not done.is_set():
        start = time.perf_counter()
        client.get("/")
        slowest = max(slowest, time.perf_counter() - start)
    thread.join()
    return slowest


def _record(gb, answers: dict[str, str]) -> None:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from marking.classroom import record_student

    for key, text in answers.items():
        record_student(gb, "lab05", key, code={}, written={"scaling_variance": (text, 3.0)})


if __name__ == "__main__":
    main()
