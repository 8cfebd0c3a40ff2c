"""Simulated reviewers for the load bench (Locust, run headless by bench/load_bench.py).

Each Locust user is one reviewer of the bench's database, signed in with a session cookie the bench made for them.
A round of work: the review queue (one of the filters and sorts reviewers use), the same as htmx asks for it (the
results partial), then the page of one of the reviewer's own candidates; every `edit_every`-th round also an edit of
that candidate's instruction as the browser makes it: the editor (htmx), a claim, the save. Each candidate is one
reviewer's, so edits never conflict: a refused edit is an error.

Configured by the JSON file LOAD_BENCH_CONFIG names: {"reviewers": [{"name", "session", "candidates": [pk, ...]}],
"cookie", "queue_urls", "edit_every" (0: no edits), "wait": [min, max], "samples"}. Every request is one JSON line
in "samples" ({"t", "name", "ms", "ok", "status", "error"}); every edit the site acknowledged (its redirect to the
saved revision) one more line {"edit": marker, "candidate", "t"}, so that the bench can find each in the database.

    locust -f bench/load/locustfile.py --headless -u 20 -r 20 --run-time 5m --host http://127.0.0.1:PORT
"""

import itertools
import json
import os
import random
import re
import threading
import time

from locust import HttpUser, between, events, task

with open(os.environ["LOAD_BENCH_CONFIG"]) as _fh:
    CONFIG = json.load(_fh)
_samples = open(CONFIG["samples"], "a", buffering=1)
_lock = threading.Lock()
_reviewers = itertools.count()
BASE_REVISION = re.compile(r'name="base_revision" value="(\d+)"')
INSTRUCTION = "Count the fruit in fruit.csv and write the result to summary.txt as '3 apples, 2 pears'."


def _write(line: dict) -> None:
    with _lock:
        _samples.write(json.dumps(line) + "\n")


@events.request.add_listener
def _record(
    request_type, name, response_time, response_length, response=None, exception=None, start_time=None, **kwargs
):
    status = getattr(response, "status_code", None)
    _write(
        {
            "t": round(start_time or time.time(), 3),
            "name": name,
            "ms": round(response_time, 2),
            "ok": exception is None,
            "status": status,
            "error": str(exception)[:300] if exception else "",
        }
    )


class Reviewer(HttpUser):
    wait_time = between(*CONFIG.get("wait", [0.5, 2.0]))

    def on_start(self):
        index = next(_reviewers) % len(CONFIG["reviewers"])
        self.me = CONFIG["reviewers"][index]
        self.index = index
        self.rng = random.Random(index)
        self.rounds = 0
        self.edits = 0
        self.client.cookies.set(CONFIG["cookie"], self.me["session"])

    def _get(self, url: str, name: str, htmx: bool = False):
        headers = {"HX-Request": "true"} if htmx else {}
        with self.client.get(url, name=name, headers=headers, catch_response=True, allow_redirects=False) as response:
            if response.status_code != 200:
                response.failure(f"HTTP {response.status_code}")
            return response

    def _post(self, url: str, data: dict, name: str, **extra):
        headers = {"X-CSRFToken": self.client.cookies.get("csrftoken", ""), **extra}
        return self.client.post(url, data=data, name=name, headers=headers, catch_response=True, allow_redirects=False)

    @task
    def review_round(self):
        self.rounds += 1
        url = self.rng.choice(CONFIG["queue_urls"])
        self._get(url, "queue")
        self._get(url, "queue (htmx)", htmx=True)
        candidate = self.rng.choice(self.me["candidates"])
        self._get(f"/review/candidates/{candidate}/", "candidate")
        every = CONFIG.get("edit_every") or 0
        if every and self.rounds % every == 0:
            self.edit(candidate)

    def edit(self, candidate: int) -> None:
        editor = self._get(f"/review/candidates/{candidate}/unit/?field=instruction&mode=edit", "editor", htmx=True)
        found = BASE_REVISION.search(editor.text or "") if editor.status_code == 200 else None
        if not found:
            return  # the editor's failure is recorded; nothing to save on
        with self._post(f"/review/candidates/{candidate}/claim/", {}, "claim") as response:
            if response.status_code != 302:
                response.failure(f"HTTP {response.status_code}")
                return
        self.edits += 1
        marker = f"lb-{self.index}-{self.edits}"
        data = {
            "field": "instruction",
            "content": f"{INSTRUCTION}\n\n(reviewed: {marker})",
            "action": "edit",
            "base_revision": found.group(1),
            "reason": marker,
        }
        with self._post(f"/review/candidates/{candidate}/edit/", data, "edit") as response:
            if response.status_code == 302 and "saved=" in response.headers.get("location", ""):
                _write({"edit": marker, "candidate": candidate, "t": round(time.time(), 3)})
            else:
                response.failure(f"HTTP {response.status_code}: {response.text[:200]}")
