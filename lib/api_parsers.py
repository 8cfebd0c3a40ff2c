"""The API's JSON parser: DRF's, with what it would let through as a server error answered 400.

- JSON nested past Python's recursion limit: json.loads raises RecursionError (not ValueError) on a few thousand
  nested brackets; anyone can send one (a body without credentials may be 64 KiB, enough for 30,000 levels).
- A number past the float range (`1e999`, valid JSON, read as infinity) or a lone UTF-16 surrogate: stored in any
  JSON field (a rollout's options, an endpoint's sampling, a batch's config) the database refuses it, so it is
  refused here, with NaN and Infinity, by the same parse the recording proxy uses (lib.strict_json).
"""

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from . import strict_json


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        encoding = parsers.get_encoding(parser_context or {})
        try:
            text = stream.read().decode(encoding)
            return strict_json.loads(text)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None
        except strict_json.NotStorable as exc:
            raise ParseError(f"JSON parse error - the body holds {exc}") from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
