"""The predicate type manager: measured selectivity decides the evaluation order.

Thesis 3.4.2: the three predicate types (Attribute, Join, Window) are evaluated most
selective first, so candidate combinations die as early as possible. Selectivity is
the share of what a phase receives that survives it, counted over a sliding period
(counts are halved at every re-measure) so the order follows drift in the data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import permutations

TYPES = ("A", "J", "W")
STATIC_ORDERS = tuple("".join(p) for p in permutations(TYPES))


def check_order(order: str) -> str:
    """Validate an order setting: "adaptive" or a permutation such as "AJW"."""
    normalized = order if order == "adaptive" else order.upper()
    if normalized != "adaptive" and normalized not in STATIC_ORDERS:
        raise ValueError(f"order must be 'adaptive' or one of {', '.join(STATIC_ORDERS)}, got {order!r}")
    return normalized


@dataclass
class PredicateTypeManager:
    """Counts comparisons and selectivity per predicate type and keeps the order."""

    setting: str = "adaptive"
    period: int = 128
    order: str = "AJW"
    reorders: int = 0
    comparisons: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TYPES, 0))
    seen: dict[str, float] = field(default_factory=lambda: dict.fromkeys(TYPES, 0.0))
    passed: dict[str, float] = field(default_factory=lambda: dict.fromkeys(TYPES, 0.0))
    selectivity: dict[str, float] = field(default_factory=lambda: dict.fromkeys(TYPES, 1.0))
    _events: int = 0

    def __post_init__(self) -> None:
        self.setting = check_order(self.setting)
        if self.setting != "adaptive":
            self.order = self.setting

    def observe(self, kind: str, seen: int, passed: int) -> None:
        self.seen[kind] += seen
        self.passed[kind] += passed

    def tick(self) -> None:
        """Called once per event; re-measures and possibly reorders every `period`."""
        self._events += 1
        if self._events % self.period:
            return
        for kind in TYPES:
            if self.seen[kind] >= 1:
                self.selectivity[kind] = self.passed[kind] / self.seen[kind]
            self.seen[kind] /= 2
            self.passed[kind] /= 2
        if self.setting == "adaptive":
            order = "".join(sorted(TYPES, key=lambda k: (self.selectivity[k], TYPES.index(k))))
            if order != self.order:
                self.order = order
                self.reorders += 1

    @property
    def total_comparisons(self) -> int:
        return sum(self.comparisons.values())
