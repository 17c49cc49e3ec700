"""The operator's Rust core as Python sees it: what `juggler.engine` and the worker call.

The one place that says what crosses the boundary, for editors and type checkers, since
an extension module carries no annotations of its own; a unit test holds it to the
built module (mypy's stubtest), so it cannot drift from the binding.
"""

from collections.abc import Callable, Hashable, Sequence
from typing import Any, Literal, Protocol, TypeAlias, final

from juggler.engine.predicate_specs import EqConstant as _EqConstant

__all__ = ["DecodedEvent", "EventDecoder", "Operator", "result_json"]

_Value: TypeAlias = int | float | str | bool
"""An event's column value as the operator stores it."""

_Position: TypeAlias = Hashable
"""Where an event entered: a line number offline, `(topic, partition, offset)` on Kafka."""

class _EventLike(Protocol):
    """What the operator reads of an event (`juggler.engine.events.Event` or
    `DecodedEvent`)."""

    @property
    def stream(self) -> str: ...
    @property
    def key(self) -> str: ...
    @property
    def ts(self) -> int: ...
    @property
    def data(self) -> dict[str, _Value]: ...
    @property
    def position(self) -> _Position: ...

class _AttributeSpec(Protocol):
    """A predicate on one column."""

    @property
    def id(self) -> int: ...
    @property
    def stream(self) -> int: ...
    @property
    def slot(self) -> int: ...

class _PairSpec(Protocol):
    """A predicate `left - factor * right op constant`: columns as (stream id, slot),
    the factor as a double and as an int when it is one within 64 bits."""

    @property
    def id(self) -> int: ...
    @property
    def left(self) -> tuple[int, int]: ...
    @property
    def right(self) -> tuple[int, int]: ...
    @property
    def factor(self) -> float: ...
    @property
    def int_factor(self) -> int | None: ...

class _Bound(Protocol):
    """`>= threshold` (`lower`) or `<= threshold`, as a double and for ints."""

    @property
    def lower(self) -> bool: ...
    @property
    def threshold(self) -> float: ...
    @property
    def int_threshold(self) -> int: ...

class _Equal(Protocol):
    """`= constant` (`eq`) or `!= constant`."""

    @property
    def eq(self) -> bool: ...
    @property
    def constant(self) -> _EqConstant: ...

class _RangeSpec(_AttributeSpec, _Bound, Protocol):
    """`juggler.engine.predicate_specs.RangeSpec`."""

    @property
    def kind(self) -> Literal["range"]: ...

class _EqSpec(_AttributeSpec, _Equal, Protocol):
    """`juggler.engine.predicate_specs.EqSpec`."""

    @property
    def kind(self) -> Literal["eq"]: ...

class _PairRangeSpec(_PairSpec, _Bound, Protocol):
    """`juggler.engine.predicate_specs.PairRangeSpec`."""

    @property
    def kind(self) -> Literal["pair_range"]: ...

class _PairEqSpec(_PairSpec, _Equal, Protocol):
    """`juggler.engine.predicate_specs.PairEqSpec`."""

    @property
    def kind(self) -> Literal["pair_eq"]: ...

_PredicateSpec: TypeAlias = _RangeSpec | _EqSpec | _PairRangeSpec | _PairEqSpec
"""A predicate compiled for `Operator.register`: the binding reads these fields by name
(`juggler.engine.predicate_specs` builds them)."""

_Selected: TypeAlias = list[tuple[str, str, str]]
"""The selected columns as (label "S.col", stream, column); None selects everything."""

_CompiledQuery: TypeAlias = tuple[str, list[str], int, list[_PredicateSpec], _Selected | None]
"""`Operator.register`'s arguments as one tuple: id, streams, MAXWINDOW, predicates,
selection."""

_ListRow: TypeAlias = tuple[Literal["upper", "lower", "eq"], str, str | None, float | None, int]
"""A predicate list: family, left column, right column, factor, predicates in it."""

_EncodedResult: TypeAlias = tuple[str, bytes]
"""(query id, Avro body of `juggler.Result`)."""

@final
class Operator:
    """Every registered query over one shared state (WES/JES), per key."""

    def __new__(
        cls,
        retention: int,
        lateness: int,
        result_cls: Callable[..., Any],
        exact: Callable[[int, _Value, _Value | None], bool],
        order: str,
        period: int,
    ) -> Operator: ...
    horizon: int
    def slot(self, stream: str, column: str) -> tuple[int, int]: ...
    def register(
        self,
        query_id: str,
        streams: list[str],
        window: int,
        preds: list[_PredicateSpec],
        select: _Selected | None,
    ) -> int: ...
    def register_many(self, queries: list[_CompiledQuery]) -> list[int]: ...
    def copy_registry(self, other: Operator, batch: list[int]) -> bool: ...
    def deregister(self, bit: int) -> None: ...
    def history(self, bit: int) -> list[Any]: ...
    def process(self, event: _EventLike) -> list[Any] | int: ...
    def process_batch(self, events: Sequence[_EventLike]) -> list[Sequence[Any] | int]: ...
    def process_batch_encoded(
        self, events: Sequence[_EventLike], budget: int
    ) -> list[Sequence[_EncodedResult | Any] | int]: ...
    def snapshot(
        self, key: str
    ) -> tuple[int | None, int | None, list[tuple[str, int, dict[str, _Value], _Position]]] | None: ...
    def restore(
        self, key: str, maxts: int | None, floor: int | None, events: Sequence[_EventLike]
    ) -> None: ...
    def key_bounds(self, key: str) -> tuple[int | None, int | None] | None: ...
    def state_bytes(self) -> int: ...
    def registry_bytes(self) -> int: ...
    def key_count(self) -> int: ...
    def held_events(self) -> dict[str, int]: ...
    def stats(self) -> dict[str, int]: ...
    def lists(self) -> list[_ListRow]: ...
    def ordering(self) -> dict[str, Any]: ...

_StreamSpec: TypeAlias = tuple[str, bytes, list[tuple[str, str]]]
"""(stream name, its schema's single-object header, columns as (name, Avro primitive
type) in schema order)."""

@final
class EventDecoder:
    """Reads stream records of the plain case (the one a correct writer produces)."""

    def __new__(cls, streams: list[_StreamSpec], max_key_bytes: int) -> EventDecoder: ...
    def event(
        self, stream: str, key: object, value: object, topic: str, partition: int, offset: int
    ) -> DecodedEvent | None: ...
    def events(
        self, stream: str, topic: str, partition: int, records: list[Any]
    ) -> list[DecodedEvent | None]: ...

@final
class DecodedEvent:
    """A stream record the decoder read, its values kept in Rust."""

    @property
    def key(self) -> str: ...
    @property
    def ts(self) -> int: ...
    @property
    def stream(self) -> str: ...
    @property
    def data(self) -> dict[str, _Value]: ...
    @property
    def position(self) -> tuple[str, int, int]: ...

def result_json(value: bytes, header: bytes, topic: str, partition: int, offset: int) -> str | None: ...
