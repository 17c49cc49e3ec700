"""The evaluation orders of the three predicate types (thesis 3.4.2).

An order is "adaptive" (the native predicate type manager measures selectivity and
picks the cheapest order, `juggler_native/src/ordering.rs`) or one of the six
permutations of A (attribute), J (join), W (window), kept fixed. Configuration and
metrics name them here so neither needs the native module.
"""

from __future__ import annotations

from itertools import permutations

TYPES = ("A", "J", "W")
STATIC_ORDERS = tuple("".join(p) for p in permutations(TYPES))


def check_order(order: str) -> str:
    """Validate an order setting: "adaptive" or a permutation such as "AJW"."""
    normalized = order if order == "adaptive" else order.upper()
    if normalized != "adaptive" and normalized not in STATIC_ORDERS:
        raise ValueError(f"order must be 'adaptive' or one of {', '.join(STATIC_ORDERS)}, got {order!r}")
    return normalized
