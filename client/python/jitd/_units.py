"""Byte sizes and durations as jitd's command lines spell them (the C++
client's ParseByteSize / ParseDuration), for evict()'s arguments."""

from __future__ import annotations

import datetime
import re

from .errors import InvalidArgument

_NUMBER_AND_UNIT = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-zA-Z]*)\s*$")
_PREFIXES = "kmgtp"


def parse_byte_size(size: int | str) -> int:
    """Bytes from an int or "1048576", "512K", "512M", "10G", "1T", "1.5G",
    with an optional "B" or "iB" ("10GiB"); powers of 1024."""
    if isinstance(size, bool):
        raise InvalidArgument(f"{size!r} is not a byte size")
    if isinstance(size, int):
        if not 0 <= size < 2**64:
            raise InvalidArgument(f"{size} is not a byte size in 0..2^64-1")
        return size
    match = _NUMBER_AND_UNIT.match(str(size))
    if not match:
        raise InvalidArgument(f"'{size}' is not a byte size (examples: 1048576, 512M, 10G, 1.5GiB)")
    number, unit = match.group(1), match.group(2).lower()
    shift = 0
    if unit and unit != "b":
        if unit[0] not in _PREFIXES or unit[1:] not in ("", "b", "ib"):
            raise InvalidArgument(f"'{size}' is not a byte size (examples: 1048576, 512M, 10G, 1.5GiB)")
        shift = 10 * (_PREFIXES.index(unit[0]) + 1)
    value = int(number) << shift if "." not in number else int(float(number) * (1 << shift))
    if value >= 2**64:
        raise InvalidArgument(f"'{size}' is more than 2^64-1 bytes")
    return value


_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(duration: int | float | str | datetime.timedelta) -> int:
    """Whole seconds from a number of seconds, a timedelta, or "90", "30s",
    "15m", "2h", "7d"."""
    if isinstance(duration, datetime.timedelta):
        return int(duration.total_seconds())
    if isinstance(duration, (int, float)) and not isinstance(duration, bool):
        if duration < 0:
            raise InvalidArgument(f"{duration} is not a duration (negative)")
        return int(duration)
    match = _NUMBER_AND_UNIT.match(str(duration))
    unit = match.group(2).lower() if match else "?"
    if not match or "." in match.group(1) or unit not in _SECONDS:
        raise InvalidArgument(f"'{duration}' is not a duration (examples: 90, 30s, 15m, 2h, 7d)")
    return int(match.group(1)) * _SECONDS[unit]
