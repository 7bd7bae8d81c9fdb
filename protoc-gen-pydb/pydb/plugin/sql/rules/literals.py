"""How PostgreSQL reads a string literal as a value of a type: what the analyzer can tell offline
about '...' written where an integer, interval, date, uuid, json or boolean is expected."""

from __future__ import annotations

import datetime
import json
import re


def is_int(value: str) -> bool:
    try:
        int(value.strip())
    except ValueError:
        return False
    return True


def is_number(value: str) -> bool:
    try:
        float(value.strip())
    except ValueError:
        return False
    return True


#: What Postgres reads as a boolean (case-insensitively, any unique prefix of true/false/yes/no too).
BOOLEAN_INPUTS = frozenset(
    {"t", "f", "true", "false", "yes", "no", "on", "off", "1", "0", "y", "n", "tr", "tru", "fa", "fal", "fals", "ye"}
)


_INTERVAL_WORDS = frozenset(
    (  # noqa: SIM905 (a word list)
        "microsecond microseconds us usec usecs millisecond milliseconds ms msec msecs second seconds s sec secs "
        "minute minutes m min mins hour hours h hr hrs day days d week weeks w month months mon mons year years y "
        "yr yrs decade decades century centuries millennium millennia ago"
    ).split()
)


def is_interval(value: str) -> bool:
    """Whether Postgres reads `value` as an interval: `1 day 2 hours`, `-3 min ago`,
    `01:02:03`, `@ 1 year`, or ISO 8601 `P1DT2H`. Unit words are checked (`2 minuts` is not)."""
    text = value.strip().lower()
    if re.fullmatch(r"[+-]?p(\d+(\.\d+)?[ymwd])*(t(\d+(\.\d+)?[hms])*)?", text):
        return text not in ("p", "+p", "-p")
    tokens = re.findall(r"[+-]?\d+(?::\d+){0,2}(?:\.\d+)?|[a-z]+|@|,|\S", text)
    if not tokens:
        return False
    for tok in tokens:
        if tok.isalpha():
            if tok not in _INTERVAL_WORDS:
                return False
        elif tok not in ("@", ",") and not re.fullmatch(r"[+-]?\d+(?::\d+){0,2}(?:\.\d+)?", tok):
            return False
    return True


def is_date_like(value: str) -> bool:
    """False only for what is plainly a bad date: `YYYY-MM-DD...` with an impossible day or
    month. Every other spelling (`now`, `Jan 1 2020`, ...) is left to Postgres."""
    m = re.match(r"\s*(\d{4})-(\d{1,2})-(\d{1,2})(?!\d)", value)
    if m is None:
        return True
    try:
        datetime.date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    except ValueError:
        return False
    return True


def is_json(value: str) -> bool:
    try:
        json.loads(value)
    except ValueError:
        return False
    return True


def is_uuid(value: str) -> bool:
    import uuid

    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


#: Date/time inputs Postgres takes that hold no digit.
_SPECIAL_TEMPORAL = frozenset({"now", "today", "tomorrow", "yesterday", "infinity", "-infinity", "epoch", "allballs"})


_MONTHS = re.compile(r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b|\d\s*(am|pm)\b")


def is_temporal(value: str) -> bool:
    """Whether `value` may be date/time input. Postgres reads many formats ('2024-01-02',
    '1/2/2024', '10:00', 'Jan 2 2024', '20240102', 'today'); beyond the special words each
    has a digit and a separator (- / : .), a month name, am/pm, or is a run of digits. That is
    what this checks: it flags `'queued'`, `''` or `'1 day'`, never a real date."""
    text = value.strip().lower()
    if text in _SPECIAL_TEMPORAL:
        return True
    if not any(ch.isdigit() for ch in text):
        return False
    julian = text.startswith("j") and text[1:].isdigit()  # 'J2451187'
    return any(sep in text for sep in "-/:.") or _MONTHS.search(text) is not None or text.isdigit() or julian
