"""A recorded call's prompt token ids, stored as a reference to an earlier call of its session plus what is new.

An agent's calls repeat each other: call k's prompt is (mostly) call k-1's prompt and answer followed by the tool
results, so a 40-call rollout at 64K context would store 40 prompts of up to 64K ids, about 2.5M, for about one
prompt's worth of distinct ids. So a call's tokens row (llm.models.ModelCallTokens) holds

    prompt_base         an earlier row of the same session (null: none)
    prompt_base_length  how many ids of the base's prompt followed by its completion open this prompt
    prompt_suffix_ids   the prompt's ids after those (all of them when there is no base)
    prompt_length       the whole prompt's length, checked on every rebuild

and the prompt is `(base prompt + base completion)[:prompt_base_length] + prompt_suffix_ids`, the base's own prompt
rebuilt the same way. The shared part need not be the base's whole sequence: OpenClaw ends every request with an
internal-context message that the next request replaces with the answer, so its calls share the history before that
message and only it differs.

The base is chosen when the row is written, among the rows of the session that this transaction can see (committed
ones: a call of the same session still in flight is simply not a candidate), by comparing ids, never by trusting
that a later call extends an earlier one. The longest shared prefix wins; it must be at least half of the new
prompt, since a short shared head (the system prompt before a compaction) would tie the row to a chain it gains
little from, and every rebuild of the row reads its chain.

Plain Python: the rows are given as `Link`s (the model turns its rows into them).
"""

from dataclasses import dataclass


class BrokenChain(ValueError):
    """A row's chain does not rebuild: a base missing, a cycle, or lengths that do not add up."""


@dataclass(frozen=True)
class Link:
    pk: int
    base: int | None
    base_length: int
    suffix: list[int]
    prompt_length: int
    completion: list[int]


def shared_length(a: list[int], b: list[int]) -> int:
    """How many ids `a` and `b` share at their start. Compared in slices (in C), halving the window each step, so a
    64K-id prompt costs about two passes over it, not a Python loop over each id."""
    low, high = 0, min(len(a), len(b))
    if a[:high] == b[:high]:
        return high
    while high - low > 1:  # a[:low] == b[:low] and a[:high] != b[:high]
        middle = (low + high) // 2
        if a[low:middle] == b[low:middle]:
            low = middle
        else:
            high = middle
    return low


def sequence(links: dict[int, Link], pk: int) -> list[int]:
    """Row `pk`'s prompt ids followed by its completion ids, rebuilt from the root of its chain forward (a loop, so a
    chain of any depth rebuilds; each step cuts and extends one list in place)."""
    chain, seen = [], set()
    at: int | None = pk
    while at is not None:
        if at in seen:
            raise BrokenChain(f"token row #{pk}: its chain loops at #{at}")
        if at not in links:
            raise BrokenChain(f"token row #{pk}: base #{at} is not in its chain")
        seen.add(at)
        chain.append(links[at])
        at = links[at].base
    ids: list[int] = []
    for link in reversed(chain):
        if link.base_length > len(ids) or (link.base is None and link.base_length):
            raise BrokenChain(f"token row #{link.pk}: shares {link.base_length} ids of a base that has {len(ids)}")
        del ids[link.base_length :]
        ids += link.suffix
        if len(ids) != link.prompt_length:
            raise BrokenChain(f"token row #{link.pk}: rebuilt {len(ids)} prompt ids, recorded {link.prompt_length}")
        ids += link.completion
    return ids


def prompt_of(links: dict[int, Link], pk: int) -> list[int]:
    """Row `pk`'s whole prompt ids."""
    ids = sequence(links, pk)
    del ids[links[pk].prompt_length :]
    return ids


def worth_a_base(shared: int, prompt_length: int) -> bool:
    return shared > 0 and 2 * shared >= prompt_length
