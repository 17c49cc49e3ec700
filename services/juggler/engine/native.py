"""The operator's Rust core (services/juggler_native, issue 10), imported in one place.

One operator, not two: the engine needs the extension, so a missing build fails at
import with what to run rather than falling back to a slower copy of the same code.
"""

from __future__ import annotations

try:
    from juggler_native import CandidateFilter, Operator, PairRange, WindowTable
except ImportError as exc:  # pragma: no cover - only without a build
    raise ImportError(
        "juggler_native, the operator's Rust core, is not installed: run bin/setup "
        "(it builds services/juggler_native with maturin; see its README)") from exc

__all__ = ["CandidateFilter", "Operator", "PairRange", "WindowTable", "candidate_filter"]


def candidate_filter(joins, windows, table: WindowTable) -> CandidateFilter:
    """The native filter phases over a plan's join and window checks (`plan.Check`)."""
    def spec(check):
        plist = check.plist
        return (plist, plist.native, plist.users, check.partner_is_left, check.other,
                check.partner_column, check.other_column)
    return CandidateFilter([spec(c) for c in joins], [spec(c) for c in windows], table)
