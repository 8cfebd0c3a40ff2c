#!/usr/bin/env python3
"""Checker for receipt-filing-manifest: are the inbox receipts filed by the rules, with a correct manifest?

Prints one JSON object of named sub-scores in [0, 1]. Standard library only; a missing or garbled output file
scores 0 on the checks that need it instead of raising.
"""

import csv
import hashlib
import io
import json
from pathlib import Path

WORKSPACE = Path(__file__).resolve().parent.parent
RECEIPTS = WORKSPACE / "receipts"
MANIFEST = RECEIPTS / "manifest.csv"


def digest(text):
    """Hash of a text file's content, blind to line endings and trailing whitespace (an editor may add a newline)."""
    return hashlib.sha256(text.replace("\r\n", "\n").rstrip().encode()).hexdigest()


# sha256 (see digest) of every file the inbox starts with; the checker never trusts the inbox's current content.
INBOX = {
    "inbox/IMG_2201 (1).txt": "be21eeeea9d403fd49085b8866e747ecee677595689c9c885da244180849e132",
    "inbox/IMG_2201.txt": "be21eeeea9d403fd49085b8866e747ecee677595689c9c885da244180849e132",
    "inbox/Scan 2025-01-06.txt": "b0ccb39c952bd5b9b0e002a76f3576f30519469b4599d68f16b98836c9970f72",
    "inbox/notes_to_self.txt": "c8e0a622ce87e913a36cac1c46abf730aa89f26aaee5f559700f86fcd1686aaf",
    "inbox/scan_0412.txt": "a75c67f7986eae0457951f18dc56cc45f860de17c7479b2f3e8192ceb03ff49a",
    "inbox/scan_0413.txt": "f8d18724d6cdeccfb92f8c86bcf1b8fa9e773bf9d92a5cc1175ff45136309ff5",
    "inbox/uber_receipt_march.txt": "8966610af49491382d55e65cf628b197b2f15b0c59fe283ce5b22c429d9c65ee",
}

# source -> (filed_as, date, vendor slug, amount)
FILED = {
    "inbox/scan_0412.txt": ("receipts/2025/2025-02-27_home-depot_42.27.txt", "2025-02-27", "home-depot", 42.27),
    "inbox/scan_0413.txt": ("receipts/2025/2025-03-04_pret_8.45.txt", "2025-03-04", "pret", 8.45),
    "inbox/IMG_2201.txt": ("receipts/2025/2025-03-01_blue-bottle_11.41.txt", "2025-03-01", "blue-bottle", 11.41),
    "inbox/Scan 2025-01-06.txt": ("receipts/2024/2024-12-30_amazon_129.99.txt", "2024-12-30", "amazon", 129.99),
    "inbox/uber_receipt_march.txt": ("receipts/2025/2025-03-02_uber_23.60.txt", "2025-03-02", "uber", 23.60),
}
DUPLICATES = {
    "inbox/IMG_2201 (1).txt": ("receipts/_duplicates/IMG_2201 (1).txt", "2025-03-01", "blue-bottle", 11.41),
}
ALL_ROWS = {**FILED, **DUPLICATES}


def file_digest(relpath):
    try:
        return digest((WORKSPACE / relpath).read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return None


def filed_right(source):
    """Is the receipt from `source` filed at its expected path with its content intact?"""
    return file_digest(FILED[source][0]) == INBOX[source]


def receipt_files():
    """Paths (relative to the workspace) of all files under receipts/, or an empty set."""
    if not RECEIPTS.is_dir():
        return set()
    return {p.relative_to(WORKSPACE).as_posix() for p in RECEIPTS.rglob("*") if p.is_file()}


def norm_path(value):
    value = value.strip().replace("\\", "/")
    while value.startswith("./"):
        value = value[2:]
    return value


def parse_amount(value):
    try:
        return float(value.strip().lstrip("$£€").replace(",", ""))
    except ValueError:
        return None


def manifest_rows():
    """Manifest rows keyed by source path; None if the manifest is missing or lacks the required columns."""
    try:
        text = MANIFEST.read_text(encoding="utf-8-sig", errors="replace")
    except OSError:
        return None
    reader = csv.DictReader(io.StringIO(text))
    if not reader.fieldnames:
        return None
    required = {"source", "filed_as", "date", "vendor", "amount"}
    if not required <= {(name or "").strip().lower() for name in reader.fieldnames}:
        return None
    rows = {}
    for raw in reader:
        row = {(k or "").strip().lower(): (v or "").strip() for k, v in raw.items() if isinstance(v, str)}
        if not any(row.values()):
            continue
        source = norm_path(row.get("source", ""))
        if source in rows:  # a file listed twice is a wrong manifest, not a tie to break
            rows[source] = None
        else:
            rows[source] = row
    return rows


def check_receipts_filed():
    right = sum(1 for src in FILED if filed_right(src))
    return right / len(FILED)


def check_uk_date_read_correctly():
    # Pret is a UK shop: 04/03/2025 is 4 March, not April 3rd.
    return filed_right("inbox/scan_0413.txt") and not any("2025-04-03" in f for f in receipt_files())


def check_order_date_not_scan_date():
    # The Amazon order was placed on 30 Dec 2024; it shipped on 2 Jan and was scanned on 6 Jan.
    return filed_right("inbox/Scan 2025-01-06.txt") and not any("2025-01-0" in f for f in receipt_files())


def check_duplicate_set_aside():
    dup_dest = DUPLICATES["inbox/IMG_2201 (1).txt"][0]
    if file_digest(dup_dest) != INBOX["inbox/IMG_2201 (1).txt"]:
        return 0.0
    blue = INBOX["inbox/IMG_2201.txt"]
    filed_copies = [f for f in receipt_files() if not f.startswith("receipts/_duplicates/") and file_digest(f) == blue]
    return len(filed_copies) == 1


def check_no_stray_files():
    expected = {dest for dest, *_rest in ALL_ROWS.values()} | {"receipts/manifest.csv"}
    return receipt_files() == expected


def check_inbox_untouched():
    # Only meaningful once a receipt was filed (a copy of an inbox receipt somewhere under receipts/): an untouched
    # workspace, or one with only a placeholder manifest, must not earn this point.
    receipts = {INBOX[source] for source in ALL_ROWS}  # not notes_to_self.txt: that is no receipt
    if not any(file_digest(path) in receipts for path in receipt_files()):
        return 0.0
    inbox = WORKSPACE / "inbox"
    present = set()
    if inbox.is_dir():
        present = {p.relative_to(WORKSPACE).as_posix() for p in inbox.rglob("*") if p.is_file()}
    return present == set(INBOX) and all(file_digest(path) == sha for path, sha in INBOX.items())


def check_manifest_paths():
    rows = manifest_rows()
    if not rows:
        return 0.0
    right = sum(
        1
        for src, (dest, *_rest) in ALL_ROWS.items()
        if rows.get(src) and norm_path(rows[src].get("filed_as", "")) == dest
    )
    extra = len(set(rows) - set(ALL_ROWS))
    return max(0, right - extra) / len(ALL_ROWS)


def check_manifest_fields():
    rows = manifest_rows()
    if not rows:
        return 0.0
    right = 0
    for src, (_dest, date, vendor, amount) in ALL_ROWS.items():
        row = rows.get(src)
        if not row:
            continue
        got = parse_amount(row.get("amount", ""))
        if (
            row.get("date") == date
            and row.get("vendor", "").lower() == vendor
            and got is not None
            and abs(got - amount) < 0.005
        ):
            right += 1
    return right / len(ALL_ROWS)


CHECKS = {
    "receipts_filed": check_receipts_filed,
    "uk_date_read_correctly": check_uk_date_read_correctly,
    "order_date_not_scan_date": check_order_date_not_scan_date,
    "duplicate_set_aside": check_duplicate_set_aside,
    "no_stray_files": check_no_stray_files,
    "inbox_untouched": check_inbox_untouched,
    "manifest_paths": check_manifest_paths,
    "manifest_fields": check_manifest_fields,
}


def main():
    scores = {}
    for name, check in CHECKS.items():
        try:
            value = float(check())
        except Exception:  # a garbled output file must cost points, never crash the checker
            value = 0.0
        scores[name] = min(1.0, max(0.0, value))
    print(json.dumps(scores))


if __name__ == "__main__":
    main()
