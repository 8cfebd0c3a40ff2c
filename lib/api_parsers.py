"""The API's JSON parser: DRF's, with JSON nested past Python's recursion limit answered 400, not 500.

json.loads raises RecursionError (not ValueError) on a few thousand nested brackets, which DRF's parser lets through
as a server error; anyone can send one (a body without credentials may be 64 KiB, enough for 30,000 levels).
"""

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None
