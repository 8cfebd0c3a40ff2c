"""The synthesis tests' helpers: the scripted generator and judge endpoints (`make_endpoints`), batches written in
known states (`make_batch`, `running_batch`), and below them a scripted model for the pipeline tests
(`ScriptedPipeline`): one OpenAI-compatible model on loopback (llm.testing.scripted_upstream) answering each stage by
the purpose its call names ("synthesis:<stage>", the X-ClawGym-Purpose header llm.client sends).

Each generated task plays a case, handed out in the order the generate calls arrive (items run in index order
with --here), and carried in the instruction as "[case:<name>]" so that later stages know which task they see:

- "good": a solvable task (sum sales.csv per region into totals.json), a checker that is sane, its solution 1.0;
- "lenient": round 1's checker pays for sales.csv being there (over-lenient); round 2's is the good one;
- "broken": every round's checker crashes on the solution and pays nothing: rejected after 3 rounds;
- "network": the task downloads exchange rates from the web: rejected at generate;
- "badjson_once": the first generate answer is not JSON, the repair turn's is;
- "badjson_always": neither answer is JSON: the item fails at generate;
- "badfiles_once": the first files answer has a CSV with a ragged row, the regeneration is fine;
- "rubric": a good task whose rubric stage writes one rule.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from decimal import Decimal

from llm.models import ModelEndpoint
from llm.testing import Reply, scripted_endpoint
from synthesis.batch_plan import batch_config, config_hash
from synthesis.models import SynthesisBatch, SynthesisItem
from tasks.lazy_workspaces import LLM_PURPOSE as LAZY_PURPOSE

# A worker id on this host whose process does not exist: jobs.runner.worker_gone says it is gone.
DEAD_WORKER = f"{socket.gethostname()}:4190001:1"

PASS = {"verdict": "pass", "reason": ""}


def make_endpoints(upstream) -> tuple[ModelEndpoint, ModelEndpoint]:
    """The generator "gen" and the judge "judge", both the scripted model on loopback."""
    common = {"timeout_seconds": 30, "max_retries": 0, "price_input_per_mtok": 1, "price_output_per_mtok": 2}
    return (
        scripted_endpoint(upstream, "gen", roles=["generator"], **common),
        scripted_endpoint(upstream, "judge", roles=["judge"], **common),
    )


def make_batch(generator, judge, *, status=SynthesisBatch.Status.RUNNING, items=(), preview=False, seed=3):
    """A batch written directly, with items given as (status, stage, stage_results, reason)."""
    config = batch_config(
        route="persona",
        count=len(items) or 1,
        generator=generator,
        judge=judge,
        seed=seed,
        preview=preview,
        options={},
        qa_thresholds={},
    )
    batch = SynthesisBatch.objects.create(
        route="persona",
        requested=len(items) or 1,
        preview=preview,
        generator=generator,
        judge=judge,
        seed=seed,
        config=config,
        config_hash=config_hash(config),
        status=status,
        cost=Decimal("0.0125"),
        input_tokens=1000,
        output_tokens=250,
    )
    for index, (item_status, stage, results, reason) in enumerate(items):
        SynthesisItem.objects.create(
            batch=batch,
            index=index,
            status=item_status,
            stage=stage,
            stage_results=results,
            reason=reason,
            seed={"persona": {"id": 1, "text": "a nurse"}},
        )
    return batch


def running_batch(endpoints):
    generator, judge = endpoints
    return make_batch(
        generator,
        judge,
        items=[
            (
                "rejected",
                "generate",
                {"generate": {"verdict": "fail", "reason": "needs the network"}},
                "generate: needs the network",
            ),
            ("pending", "files", {"generate": PASS}, ""),
            ("running", "verify", {"generate": PASS, "files": PASS}, ""),
        ],
    )


# --- the scripted pipeline ----------------------------------------------------------------------------------------

CASE = re.compile(r"\[case:([a-z_]+)\]")

SALES_CSV = "region,amount\nnorth,10\nsouth,5\nnorth,7\neast,3\n"
TOTALS = {"north": 17, "south": 5, "east": 3}

GOOD_CHECK = """import json
import os

checks = {"totals_complete": 0, "totals_correct": 0}
expected = {"north": 17, "south": 5, "east": 3}
try:
    with open("totals.json") as fh:
        found = json.load(fh)
except (OSError, ValueError):
    found = None
if isinstance(found, dict) and set(found) == set(expected):
    checks["totals_complete"] = 1
    if all(float(found[k]) == v for k, v in expected.items()):
        checks["totals_correct"] = 1
print(json.dumps(checks))
"""

# Pays for an input file being there: over-lenient on the initial and scaffold workspaces.
LENIENT_CHECK = GOOD_CHECK.replace(
    'checks = {"totals_complete": 0, "totals_correct": 0}',
    'checks = {"totals_complete": 0, "totals_correct": 0, "input_present": int(os.path.exists("sales.csv"))}',
)

# Expects a key the solution never writes: the solution scores 0.5, never 1.0.
BROKEN_CHECK = GOOD_CHECK.replace('"east": 3}\ntry', '"east": 3, "west": 1}\ntry')


def task(case: str, n: int) -> dict:
    question = (
        f"Please read `sales.csv` (columns region,amount) and write `totals.json`, a JSON object mapping each "
        f"region to the sum of its amounts. Request {n}. [case:{case}]"
    )
    if case == "network":
        question = (
            "Download today's exchange rates from https://rates.example.com/today.json, convert the amounts in "
            f"`sales.csv` to euros and write `totals.json`. Request {n}. [case:{case}]"
        )
    return {
        "question": question,
        "scenario": "A small shop owner tallies sales.",
        "expected_behavior": "totals.json holds north 17, south 5, east 3.",
        "required_operations": ["read a CSV file", "aggregate numbers", "write a JSON file"],
        "input_files": [{"path": "sales.csv", "type": "csv", "content_spec": "region,amount rows"}],
        "output_files": ["totals.json"],
        "difficulty": 2,
        "needs_network": False,
    }


def stage_of(purpose: str) -> str:
    """The synthesis stage a call's purpose names ("synthesis:files" → "files"), "?" for any other call."""
    return purpose.removeprefix("synthesis:") if purpose.startswith("synthesis:") else "?"


class ScriptedPipeline:
    """The responder: `upstream.responder = ScriptedPipeline(["good", "lenient", ...])`."""

    def __init__(self, cases: list[str], default: str = "good"):
        self.cases = list(cases)
        self.default = default
        self.handed = 0
        self.seen: list[tuple[str, str]] = []  # (stage, case) of every request
        self._lock = threading.Lock()
        # hold(stage, marker): the request of that stage whose prompt holds the marker waits for release()
        self._hold: tuple[str, str] | None = None
        self.reached = threading.Event()
        self._released = threading.Event()

    def hold(self, stage: str, marker: str) -> None:
        self._hold = (stage, marker)

    def release(self) -> None:
        self._released.set()

    by_purpose = True  # llm.testing.ScriptedUpstream calls it with the request's purpose

    def __call__(self, body: dict, purpose: str = "") -> Reply:
        messages = body.get("messages") or []
        if purpose == LAZY_PURPOSE:  # the sanity check's LLM-written lazy workspace (tasks.lazy_workspaces): no work
            return Reply.text(json.dumps({"files": [], "delete": [], "final_message": "All done."}))
        stage = stage_of(purpose)
        text = "\n".join(m["content"] or "" for m in messages)
        repair = messages[-1]["role"] == "user" and messages[-1]["content"].startswith("Your answer could not be used")
        if stage == "generate":
            return self._generate(repair, messages)
        case = (CASE.search(text) or [None, self.default])[1]
        with self._lock:
            self.seen.append((stage, case))
        if self._hold and self._hold[0] == stage and self._hold[1] in text and not self.reached.is_set():
            self.reached.set()
            self._released.wait(timeout=120)  # blocks the scripted server: nothing else is asked meanwhile
        answer = getattr(self, f"_{stage}")(case, messages)
        return Reply.text(answer if isinstance(answer, str) else json.dumps(answer))

    def _generate(self, repair: bool, messages: list[dict]) -> Reply:
        with self._lock:
            if repair:  # the case of the answer being repaired: the one handed out last
                case = self.cases[self.handed - 1] if 0 < self.handed <= len(self.cases) else self.default
            else:
                case = self.cases[self.handed] if self.handed < len(self.cases) else self.default
                self.handed += 1
            n = self.handed
            self.seen.append(("generate", case))
        if case == "badjson_always" or (case == "badjson_once" and not repair):
            return Reply.text("Here is your task: {question: totals, not quite JSON")
        return Reply.text(json.dumps(task(case, n)))

    def _files(self, case: str, messages: list[dict]):
        first = not any(m["content"].startswith("These files are not valid") for m in messages if m["role"] == "user")
        csv = SALES_CSV
        if case == "badfiles_once" and first:
            csv = SALES_CSV + "west,1,extra\n"
        return {"files": [{"path": "sales.csv", "content": csv}]}

    def _verify(self, case: str, messages: list[dict]):
        round_number = 1 + sum(1 for m in messages if m["role"] == "user" and m["content"].startswith("Round "))
        check = GOOD_CHECK
        if case == "lenient" and round_number == 1:
            check = LENIENT_CHECK
        elif case == "broken":
            check = BROKEN_CHECK
        return {"check_py": check, "solution_files": [{"path": "totals.json", "content": json.dumps(TOTALS)}]}

    def _rubric(self, case: str, messages: list[dict]):
        if case != "rubric":
            return {"needed": False, "reason": "the checker covers every requirement", "rules": []}
        scores = {"0": "unreadable", "0.25": "hard to read", "0.5": "readable", "0.75": "tidy", "1": "tidy, sorted"}
        rule = {"name": "readable totals", "target_file": "totals.json", "scores": scores, "weight": 1}
        return {"needed": True, "reason": "layout is qualitative", "rules": [rule]}

    def stages_seen(self) -> list[str]:
        return [stage for stage, _ in self.seen]
