"""A recorded call's request, stored as a reference to an earlier call of its session plus what is new.

An agent's requests repeat each other: request k+1 is request k's conversation with the answer and the tool results
appended, and the same system prompt, tools and sampling; a 40-call OpenClaw rollout sent 40 copies of its ~40 KB of
tool schemas and of its growing history (1.9 MB stored for one rollout, `bench/call_storage_bench.py`). So a call
(llm.models.ModelCall) holds

    request_base      an earlier call of the same session (null: none, `request_part` is the whole request)
    request_shared    how many items of the base's conversation list (`messages`, or a Responses `input`) open
                      this request's list
    request_inherited the top-level keys whose value is the base's, taken whole (the tools, the sampling, …)
    request_part      the request itself, its keys in their order, with its list's items after the shared ones
                      and null for an inherited key's value

and the request is rebuilt from the root of its chain forward. The shared part need not be the base's whole list:
OpenClaw ends every request with an internal-context message that the next request replaces, so its calls share the
history before that message.

The base is chosen when the call is recorded, among the latest calls of its session that the recording transaction
can see, by comparing the requests themselves item by item (each item and value as the JSON it writes, so `1`, `1.0`
and `true` never pass for each other), never by trusting that a later call extends an earlier one. An agent cannot make a
call's record other than what it sent: whatever it sends, the rebuilt request is the request, and `rebuild` checks
every step of the chain on every read (a loop, a missing base, a shared count or an inherited key its base lacks). A chain is at most MAX_DEPTH calls long, so a read costs at most that many rows.

The proxy keeps the whole requests of the calls it recorded (RequestCache), so that its next call of the session is
compared with them without reading their chains back; the latest calls are still read from the database (their ids,
and what tells their row from another), and a call it does not hold is rebuilt from its chain.

Plain Python: the rows are given as `Link`s (the model turns its rows into them).
"""

import json
import threading
from collections import OrderedDict
from dataclasses import dataclass

LIST_KEYS = ("messages", "input")  # chat completions' conversation, the Responses API's input items
MAX_DEPTH = 64  # calls in one chain (a deeper session starts a new one with a whole request)
CANDIDATES = 3  # the latest calls of the session compared with a new request
REFERENCE_CHARS = 16  # what the reference costs a row (an id, a count and a short list), in characters
WORTH = 0.5  # a base is used only when what is left to store is at most this share of the request
GOOD = 0.1  # a base leaving at most this share is taken without trying the others


class BrokenChain(ValueError):
    """A call's request does not rebuild: a base missing, a cycle, or parts that do not add up."""


@dataclass(frozen=True)
class Link:
    pk: int
    base: int | None
    shared: int
    inherited: list[str]
    part: dict


def canonical(value) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def same(a, b) -> bool:
    """Whether two JSON values write the same canonical JSON (`canonical(a) == canonical(b)`), without writing it:
    types compared exactly (in Python 1 == 1.0 == True), floats by their text (-0.0 is not 0.0), objects by their
    keys whatever their order."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(value, b[key]) for key, value in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(map(same, a, b))
    if isinstance(a, float):
        return repr(a) == repr(b)
    return a == b


def list_key(request: dict) -> str | None:
    """The request's conversation list: the first of LIST_KEYS it holds as a list."""
    return next((key for key in LIST_KEYS if isinstance(request.get(key), list)), None)


@dataclass(frozen=True)
class Difference:
    shared: int
    inherited: list[str]
    part: dict

    def stored_chars(self) -> int:
        return len(canonical(self.part)) + REFERENCE_CHARS + sum(len(key) + 3 for key in self.inherited)


def difference(request: dict, base: dict) -> Difference:
    """What `request` stores with `base` (a whole request) as its base."""
    key = list_key(request)
    shared = 0
    if key is not None and list_key(base) == key:
        ours, theirs = request[key], base[key]
        limit = min(len(ours), len(theirs))
        while shared < limit and same(ours[shared], theirs[shared]):
            shared += 1
    inherited = [name for name, value in request.items() if name != key and name in base and same(value, base[name])]
    part = {}
    for name, value in request.items():
        if name == key:
            part[name] = value[shared:]
        else:
            part[name] = None if name in inherited else value
    return Difference(shared, inherited, part)


def best_difference(request: dict, bases: dict[int, dict], whole: int) -> tuple[int | None, Difference | None]:
    """(base call, difference) storing the least of `request` (`whole` characters of JSON) against one of `bases`
    ({call id: whole request}), or (None, None) when none saves enough (see WORTH). The latest call is tried first,
    and is taken at once when what is left is under GOOD of the request (an agent's next call: nearly always)."""
    if not isinstance(request, dict) or not bases:
        return None, None
    best, best_difference_, best_chars = None, None, 0
    for pk in sorted(bases, reverse=True):
        if not isinstance(bases[pk], dict):
            continue
        candidate = difference(request, bases[pk])
        chars = candidate.stored_chars()  # writes the part's JSON: once a candidate
        if best_difference_ is None or chars < best_chars:
            best, best_difference_, best_chars = pk, candidate, chars
        if best_chars <= GOOD * whole:
            break
    if best_difference_ is None or best_chars > WORTH * whole:
        return None, None
    return best, best_difference_


def chain_of(links: dict[int, Link], pk: int, known: dict[int, dict] | None = None) -> list[Link]:
    """Call `pk`'s chain, from it back to its root, or back to the first call already in `known`."""
    chain, seen = [], set()
    at: int | None = pk
    while at is not None and not (known and at in known):
        if at in seen:
            raise BrokenChain(f"call #{pk}: its request chain loops at #{at}")
        if at not in links:
            raise BrokenChain(f"call #{pk}: base #{at} of its request is not in its chain")
        seen.add(at)
        chain.append(links[at])
        at = links[at].base
    return chain


def rebuild(links: dict[int, Link], pk: int, known: dict[int, dict] | None = None, copy: bool = True) -> dict:
    """Call `pk`'s whole request, rebuilt from the root of its chain forward: a new dict, or with copy=False one that
    shares its values with `links` and `known` (to read, never to change or hand out). `known` ({call id: whole
    request}) holds requests already rebuilt, and gets each one rebuilt here: rebuilding a session's calls in order
    costs one step a call."""
    known = {} if known is None else known
    chain = chain_of(links, pk, known)
    start = chain[-1].base if chain else pk  # the call the walk stopped at: known, or none before the root
    request = known.get(start) if start is not None else None
    for link in reversed(chain):
        request = _apply(link, request)
        known[link.pk] = request
    return _copy(known[pk]) if copy else known[pk]


def depth(links: dict[int, Link], pk: int) -> int:
    return len(chain_of(links, pk))


def _apply(link: Link, base: dict | None) -> dict:
    if link.base is None:
        if link.shared or link.inherited:
            raise BrokenChain(f"call #{link.pk}: shares part of a base it does not have")
        return link.part
    if not isinstance(link.part, dict) or not isinstance(base, dict):
        raise BrokenChain(f"call #{link.pk}: its request or its base's is not an object")
    key = list_key(link.part)
    if link.shared and (key is None or list_key(base) != key or len(base[key]) < link.shared):
        raise BrokenChain(f"call #{link.pk}: shares {link.shared} items of a base list that has fewer")
    request = {}
    for name, value in link.part.items():
        if name in link.inherited:
            if name not in base:
                raise BrokenChain(f"call #{link.pk}: inherits {name!r}, which its base does not have")
            request[name] = base[name]
        elif name == key:
            request[name] = base[key][: link.shared] + value if link.shared else value
        else:
            request[name] = value
    if any(name not in link.part for name in link.inherited):
        raise BrokenChain(f"call #{link.pk}: inherits a key its request does not name")
    return request


def _copy(request):
    """A request to hand out: shared lists and values are never aliased between two rebuilt requests."""
    return json.loads(json.dumps(request))


class RequestCache:
    """Whole requests of recorded calls by call id, kept by a process to compare its next calls of their sessions with
    (ModelCall.objects.record), and shared by its threads. A row's request never changes once written, so an entry
    stays true of its row; each is kept with the row's stamp (its session, API, creation time and length), which the
    reader checks against the row it read, so an id used again by another row (one rolled back) is a miss, never
    another call's request. Bounded by the characters of the requests it holds, the least recently used dropped first.
    The requests are shared, to read only: never changed, never handed out."""

    def __init__(self, max_chars: int):
        self.max_chars = max_chars
        self._entries: OrderedDict[int, tuple[tuple, dict, int, int]] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def get(self, pk: int, stamp: tuple) -> tuple[dict, int] | None:
        """(request, depth of its chain) of call `pk` when held with this stamp, else None."""
        with self._lock:
            entry = self._entries.get(pk)
            if entry is None or entry[0] != stamp:
                return None
            self._entries.move_to_end(pk)
            return entry[1], entry[2]

    def put(self, pk: int, stamp: tuple, request: dict, depth: int, chars: int) -> None:
        """Keep call `pk`'s whole request (`chars` characters of JSON), the depth of its chain and its row's stamp."""
        if chars > self.max_chars:
            return
        with self._lock:
            old = self._entries.pop(pk, None)
            if old is not None:
                self._chars -= old[3]
            self._entries[pk] = (stamp, request, depth, chars)
            self._chars += chars
            while self._chars > self.max_chars:
                _, (_, _, _, dropped) = self._entries.popitem(last=False)
                self._chars -= dropped

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def chars(self) -> int:
        return self._chars
