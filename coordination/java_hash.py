"""Java's int arithmetic where Kafka places things by a hash: String.hashCode and Utils.abs.

Kafka picks a group's ``__consumer_offsets`` partition, a share-partition's
``__share_group_state`` partition and a follower's fetcher by these, so Castle must compute
them bit for bit: Java ints wrap at 32 bits, and Kafka's ``Utils.abs`` is Math.abs with
Integer.MIN_VALUE mapped to 0, not the mask ``x & 0x7fffffff`` of ``Utils.toPositive`` (for
a negative hash the two pick different partitions).
"""

from __future__ import annotations

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1


def java_int(value: int) -> int:
    """``value`` wrapped to a Java int (two's complement, 32 bits)."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value > INT32_MAX else value


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + … + s[n-1] over UTF-16 code units, int32."""
    units = text.encode("utf-16-be", "surrogatepass")  # a non-BMP character is two units
    value = 0
    for index in range(0, len(units), 2):
        value = (value * 31 + (units[index] << 8 | units[index + 1])) & 0xFFFFFFFF
    return java_int(value)


def java_abs(value: int) -> int:
    """Kafka's Utils.abs of a Java int: Math.abs, with Integer.MIN_VALUE (its own negation) 0."""
    return 0 if value == INT32_MIN else abs(value)
