"""YAML and JSON from outside ClawGym (imported tasks and skills, uploads, model answers), parsed at a cost its size
bounds. Every YAML parse in the project goes through load_yaml; every JSON parse of such input through load_json.

    data = load_yaml(text)                      # yaml.safe_load, bounded: yaml.YAMLError when it cannot be read,
                                                # YAMLRefused (one of them) when it would cost too much
    data = load_yaml(text, max_chars=65_536)    # a tighter bound on the text itself, checked before parsing
    data = load_json(text)                      # json.loads; json.JSONDecodeError for every way it can fail

yaml.safe_load keeps an alias (`*a`) as one more reference to the node its anchor (`&a`) names: cheap to parse, but
every walk of the result (to JSON, into the database, a copy) pays for each reference again, so eight levels of
nine aliases turn 600 bytes into a billion values, and `&x [*x]` is a list that holds itself (a RecursionError for
every walker). load_yaml composes the document itself and counts, as it goes, what a walk of the result will meet
with every alias expanded; it stops, before building more, when that passes MAX_NODES values or aliases add more
than MAX_ALIAS_CHARS characters, when an alias is inside the node it names, or when nodes nest deeper than
MAX_DEPTH. Ordinary anchors (a compose file's `<<: *defaults`) still read. A value PyYAML's constructors cannot make
(a 5,000-digit integer, the date 2020-13-45) is a yaml.YAMLError too, not the ValueError PyYAML lets out.

json.loads raises RecursionError for arrays nested a few thousand deep and ValueError for an integer of more digits
than Python converts; load_json raises json.JSONDecodeError for both, with where it happened, so the callers that
report bad JSON (one task or persona failed, the others go on) report these too.

This module imports no app: every app may use it.
"""

import json
import re
import sys

import yaml
from yaml.composer import Composer
from yaml.constructor import ConstructorError, SafeConstructor
from yaml.events import AliasEvent
from yaml.resolver import Resolver

MAX_CHARS = 256 * 1024  # the text itself; front matter and mock files are far smaller
MAX_NODES = 20_000  # values a walk of the result meets, aliases expanded
MAX_ALIAS_CHARS = 1024 * 1024  # characters the aliases add when the document is written out in full
MAX_DEPTH = 64  # nodes inside nodes
JSON_SHOWN_DEPTH = 200  # where load_json says nesting went too deep (json.loads gives up somewhat deeper)


class YAMLRefused(yaml.MarkedYAMLError):
    """The YAML would cost far more than its size to read or use: aliases expanding past the bounds, an alias inside
    the node it names, nesting too deep, or a text too long. The message says which, and where."""


if yaml.__with_libyaml__:
    from yaml._yaml import CParser

    class _Loader(Composer, CParser, SafeConstructor, Resolver):
        """yaml.CSafeLoader with PyYAML's own composer in place of libyaml's, so that _BoundedLoader can count: libyaml
        still scans and parses (several times faster than PyYAML's Python parser)."""

        def __init__(self, text: str):
            CParser.__init__(self, text)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            Composer.__init__(self)

else:  # PyYAML built without libyaml
    _Loader = yaml.SafeLoader


class _BoundedLoader(_Loader):
    """A safe loader whose composer counts the cost of the result (see the module's docstring)."""

    def __init__(self, text: str):
        super().__init__(text)
        self.nodes = 0  # values met so far, aliases expanded
        self.alias_chars = 0  # characters the aliases met so far stand for
        self.depth = 0
        self.cost: dict[str, tuple[int, int]] = {}  # anchor -> (values, characters) of its node, once complete

    def compose_document(self):
        self.cost = {}  # anchors are per document, as PyYAML's own
        return super().compose_document()

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, AliasEvent):
            anchor = event.anchor
            if anchor in self.anchors and anchor not in self.cost:
                raise YAMLRefused(
                    None,
                    None,
                    f"the alias *{anchor} is inside the node &{anchor} names: it would hold itself",
                    event.start_mark,
                )
            nodes, chars = self.cost.get(anchor, (0, 0))  # an undefined alias: PyYAML says so below
            self._spend(nodes, chars, event.start_mark)
            return super().compose_node(parent, index)
        if self.depth >= MAX_DEPTH:
            raise YAMLRefused(None, None, f"values are nested more than {MAX_DEPTH} deep", event.start_mark)
        nodes_before, chars_before = self.nodes, self.alias_chars
        self._spend(1, 0, event.start_mark)
        self.depth += 1
        node = super().compose_node(parent, index)
        self.depth -= 1
        if event.anchor is not None:
            written = node.end_mark.index - node.start_mark.index
            self.cost[event.anchor] = (self.nodes - nodes_before, written + self.alias_chars - chars_before)
        return node

    def _spend(self, nodes: int, chars: int, mark) -> None:
        self.nodes += nodes
        self.alias_chars += chars
        if self.nodes > MAX_NODES:
            raise YAMLRefused(
                None,
                None,
                f"the document holds more than {MAX_NODES:,} values once its aliases (*name) are expanded",
                mark,
            )
        if self.alias_chars > MAX_ALIAS_CHARS:
            raise YAMLRefused(
                None, None, f"its aliases (*name) stand for more than {MAX_ALIAS_CHARS:,} characters of YAML", mark
            )


def load_yaml(text: str, *, max_chars: int = MAX_CHARS):
    """The one YAML document in `text`, as yaml.safe_load reads it, or yaml.YAMLError (YAMLRefused when the text
    is longer than `max_chars` or would cost too much to use; see the module's docstring)."""
    if len(text) > max_chars:
        raise YAMLRefused(None, None, f"the YAML is {len(text):,} characters, over the {max_chars:,} read here", None)
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    except (ValueError, OverflowError) as exc:  # a constructor's: int("9" * 5000), datetime.date(2020, 13, 45)
        raise ConstructorError(None, None, f"a value cannot be read: {exc}", None) from None
    except RecursionError:  # only when the caller is itself deep in the stack: MAX_DEPTH keeps the composer shallow
        raise YAMLRefused(None, None, "values are nested too deeply to read", None) from None
    finally:
        loader.dispose()


def load_json(text: str):
    """json.loads(text), raising json.JSONDecodeError also for nesting too deep and integers too long."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise json.JSONDecodeError("arrays or objects are nested too deeply", text, _too_deep_at(text)) from None
    except ValueError as exc:  # "Exceeds the limit (4300 digits) for integer string conversion"
        digits = re.search(rf"\d{{{sys.get_int_max_str_digits() + 1},}}", text)
        problem = str(exc).split(";")[0]
        raise json.JSONDecodeError(problem, text, digits.start() if digits else 0) from None


def _too_deep_at(text: str) -> int:
    """Where `text` first nests more than JSON_SHOWN_DEPTH arrays or objects (0 when it does not). Runs only after
    json.loads gave up, so well-formed input never pays for this walk."""
    depth, in_string, escaped = 0, False, False
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > JSON_SHOWN_DEPTH:
                return i
        elif ch in "]}":
            depth -= 1
    return 0
