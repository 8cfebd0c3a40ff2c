"""CSV that a spreadsheet opens as data: every CSV ClawGym writes goes through here.

Spreadsheets read a cell whose text starts with `=`, `+`, `-` or `@` as a formula (and some strip a leading tab or
carriage return first), so text that came from an agent, a model or an import (`=HYPERLINK("http://…","click")`,
`=cmd|' /C calc'!A0`) would run or leak data in the reader's spreadsheet. Such text is written with a leading `'`,
which the spreadsheet shows as text (OWASP's "CSV injection" advice). Numbers are ClawGym's own and stay numbers: a
negative score is written as -0.5, not '-0.5.

    writer = SafeDictWriter(buffer, fieldnames=COLUMNS)
    writer.writeheader()
    writer.writerow(row)

Standard library only, so any app may import it.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def safe_cell(value):
    """The value as a CSV cell: None empty, text that could start a formula behind a `'`, anything else as it is."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


class SafeDictWriter(csv.DictWriter):
    """csv.DictWriter whose rows are neutralised by safe_cell (its writeheader writes through writerow too).

    Rows end in CRLF (RFC 4180), never in a caller's choice: the csv module quotes a cell holding a line break only
    when the break is part of the line terminator, so with "\\n" alone a carriage return in a cell would split the
    row for a spreadsheet.
    """

    def __init__(self, handle, fieldnames, **options):
        if "lineterminator" in options:
            raise TypeError("SafeDictWriter always ends rows in CRLF")
        super().__init__(handle, fieldnames, lineterminator="\r\n", **options)

    def writerow(self, rowdict: Mapping):
        return super().writerow({key: safe_cell(value) for key, value in rowdict.items()})

    def writerows(self, rowdicts: Iterable[Mapping]):
        for row in rowdicts:
            self.writerow(row)
