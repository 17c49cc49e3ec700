"""The operator's Rust core (services/juggler_native), imported in one place.

One operator, not two: the engine needs the extension, so a missing build fails at
import with what to run rather than falling back to a slower copy of the same code.
"""

from __future__ import annotations

try:
    from juggler_native import DecodedEvent, EventDecoder, Operator, result_json
except ImportError as exc:  # pragma: no cover - only without a build
    raise ImportError(
        "juggler_native, the operator's Rust core, is not installed: run bin/setup "
        "(it builds services/juggler_native with maturin; see its README)") from exc

__all__ = ["DecodedEvent", "EventDecoder", "Operator", "result_json"]
