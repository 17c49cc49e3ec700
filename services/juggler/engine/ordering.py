"""The predicate type manager: measured selectivity decides the evaluation order.

Thesis 3.4.2 evaluates the three predicate types (Attribute, Join, Window) most
selective first, so candidate combinations die as early as possible. Selectivity is
measured the same way whatever the current order, on a sample of events, so that a
type evaluated last is still measured:

- A: the share of sampled tuples that satisfy the attribute predicates of at least
  one candidate query;
- J: the share of a partner stream's held events that join-first retrieval visits:
  each join list probes its JES for the candidate queries it serves, and the queries
  no join list serves are left to value-index scans or the WES (read from index
  positions and bucket sizes, not by visiting events); it may exceed 1;
- W: the share of those events inside the WES time range the candidate queries allow.

A partner a JES probe found is filtered for that probe's queries only, which are few
where queries use different lists, so its filter pass rates and list probes are
measured on their own, on a few partners spread over each probe's range.

Selectivities alone cannot tell that an attribute filter costs one cached bitmask AND
while a join filter probes several predicate lists, so the order is the one the
thesis's cost model (chapter 5.1) rates cheapest for the measured selectivities and
probe counts. Counts decay at every re-measure so the order follows drift without chasing noise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import permutations

TYPES = ("A", "J", "W")
# Range shares ("J", "W"), filter pass rates of sampled candidates ("Ac", "Jc", "Wc"),
# of partners a JES probe found, for the queries that probe serves ("Aj", "Jj", "Wj"),
# the same once the tuple's attributes pruned the queries ("...|A"), and how often a
# JES can serve retrieval at all ("Jok"; otherwise join-first falls back to the WES).
MEASURES = ("A", "J", "W", "J|A", "W|A", "Ac", "Jc", "Wc", "Jc|A", "Wc|A", "Aj", "Jj", "Wj",
            "Aj|A", "Jj|A", "Wj|A", "Jok")
# Lists probed per candidate: by a WES candidate ("J", "W") and by a JES one ("Jj", "Wj").
PROBED = ("J", "W", "J|A", "W|A", "Jj", "Wj", "Jj|A", "Wj|A")
STATIC_ORDERS = tuple("".join(p) for p in permutations(TYPES))


def check_order(order: str) -> str:
    """Validate an order setting: "adaptive" or a permutation such as "AJW"."""
    normalized = order if order == "adaptive" else order.upper()
    if normalized != "adaptive" and normalized not in STATIC_ORDERS:
        raise ValueError(f"order must be 'adaptive' or one of {', '.join(STATIC_ORDERS)}, got {order!r}")
    return normalized


def _zeros() -> dict[str, float]:
    return dict.fromkeys(MEASURES, 0.0)


@dataclass
class PredicateTypeManager:
    """Counts comparisons, measures selectivity per predicate type, keeps the order."""

    setting: str = "adaptive"
    period: int = 128
    sample_every: int = 16
    decay: float = 0.75  # weight old counts keep at each re-measure; longer memory than a drift cycle's swings
    min_samples: int = 8  # new sampled tuples a re-measure waits for
    hysteresis: float = 0.9  # a new order must look this much cheaper to replace the current one
    order: str = "AJW"
    reorders: int = 0
    comparisons: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TYPES, 0))
    selectivity: dict[str, float] = field(default_factory=lambda: dict.fromkeys(MEASURES, 1.0))
    probes: dict[str, float] = field(default_factory=lambda: dict.fromkeys(MEASURES, 1.0))
    partners: float = 0.0
    _seen: dict[str, float] = field(default_factory=_zeros)
    _passed: dict[str, float] = field(default_factory=_zeros)
    _probe_sum: dict[str, float] = field(default_factory=_zeros)
    _partner_sum: float = 0.0
    _expansions: float = 0.0
    _fresh: int = 0  # sampled tuples since the last re-measure

    def __post_init__(self) -> None:
        self.setting = check_order(self.setting)
        # Only an adaptive order measures (one event in `sample_every`): a static
        # order has nothing to learn.
        self.adaptive = self.setting == "adaptive"
        if not self.adaptive:
            self.order = self.setting

    def observe(self, kind: str, seen: int, passed: int) -> None:
        if kind == "A":
            self._fresh += 1
        self._seen[kind] += seen
        self._passed[kind] += passed

    def observe_expansion(self, partners: int, probes: dict[str, int]) -> None:
        """One sampled partner stream: its size and what filtering a partner costs,
        for all candidate queries and for those left after the attribute filter."""
        self._expansions += 1
        self._partner_sum += partners
        for kind, count in probes.items():
            self._probe_sum[kind] += count

    def remeasure(self) -> None:
        """Called every `period` events by an adaptive operator: turns the samples into
        selectivities and possibly reorders, once enough new samples came in."""
        if self._fresh < self.min_samples:
            return
        self._fresh = 0
        for kind in MEASURES:
            if self._seen[kind] >= 1:
                self.selectivity[kind] = self._passed[kind] / self._seen[kind]
            self._seen[kind] *= self.decay
            self._passed[kind] *= self.decay
        if self._expansions >= 1:
            self.partners = self._partner_sum / self._expansions
            for kind in PROBED:
                self.probes[kind] = self._probe_sum[kind] / self._expansions
                self._probe_sum[kind] *= self.decay
            self._partner_sum *= self.decay
            self._expansions *= self.decay
        order = min(STATIC_ORDERS, key=lambda o: (self.cost(o), o != self.order))
        if order != self.order and self.cost(order) < self.hysteresis * self.cost(self.order):
            self.order = order
            self.reorders += 1

    def cost(self, order: str) -> float:
        """Expected comparisons for one tuple and one partner stream under `order`.

        The first of J/W retrieves `partners * range share` candidates (one probe plus
        one per candidate); each candidate then runs the phases in order, paying a
        phase's probes only if the earlier phases let it through (for JES candidates,
        only those inside the time range, with the pass rates and probe counts of the
        queries their probe serves). Attribute first also filters the tuple itself
        before retrieval, which narrows the queries and so the ranges and the lists
        probed.
        """
        m = self.selectivity
        pruned = order[0] == "A"
        given = "|A" if pruned else ""
        join_first = order.index("J") < order.index("W")
        usable = m["Jok"] if join_first else 0.0
        share = {"J": m["J" + given], "W": m["W" + given]}
        # pass rate of each filter among the retrieved candidates, and lists probed
        by_window = {"A": m["Ac"], "J": m["Jc" + given], "W": m["Wc" + given]}
        # a JES probe visits partners of any age; only those inside the time range
        # (the WES share) are filtered, and the window filter then passes more of them
        by_join = {"A": m["Aj" + given], "J": m["Jj" + given],
                   "W": min(1.0, m["Wj" + given] / max(share["W"], 1e-9))}
        window_probes = {"J": self.probes["J" + given], "W": self.probes["W" + given]}
        join_probes = {"J": self.probes["Jj" + given], "W": self.probes["Wj" + given]}
        total = 1.0 if pruned else 0.0
        reach = m["A"] if pruned else 1.0
        for weight, retrieved, passing, probes, timely in (
                (usable, share["J"], by_join, join_probes, share["W"]),
                (1.0 - usable, share["W"], by_window, window_probes, 1.0)):
            if weight <= 0:
                continue
            candidates = self.partners * retrieved
            per_candidate, through = 0.0, 1.0
            for phase in order:
                if phase == "A":
                    per_candidate += through * (1.0 if pruned else 2.0)
                    through *= passing["A"] * (1.0 if pruned else m["A"])
                else:
                    per_candidate += through * probes[phase]
                    through *= passing[phase]
            total += weight * reach * (1.0 + candidates * (1.0 + timely * per_candidate))
        return total

    @property
    def total_comparisons(self) -> int:
        return sum(self.comparisons.values())
