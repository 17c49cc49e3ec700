"""The native decoder (`Codec.native_decoder`, services/juggler_native/src/decode.rs)
against the Python codec: on the records it takes it gives the events `event_from`
gives, which the operator evaluates to the same results and late decisions; it takes
no record `event_from` refuses; and a task dead-letters exactly what it did without it.

The schemas are the repository's plus `X`, a stream with every primitive a stream
column can have (int, float, string too) and `ts` not first."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from juggler.codec import framing
from juggler.codec.avro import MAX_KEY_BYTES, Codec, CodecError, default_schemas_dir
from juggler.engine.events import EngineConfig, Event, LateEvent
from juggler.engine.rust_core import DecodedEvent
from juggler.engine.native_engine import NativeEngine
from juggler.language import compile_query
from juggler.runtime.task import PartitionTask, Record, RoundCounts
from juggler.runtime.transactions import Outbox
from juggler.runtime.worker import JugglerWorker
from test_task_results import FakeWorker

X_SCHEMA = {"type": "record", "name": "X", "namespace": "juggler.stream", "fields": [
    {"name": "n", "type": "int"}, {"name": "ts", "type": "long"}, {"name": "f", "type": "float"},
    {"name": "ok", "type": "boolean"}, {"name": "name", "type": "string"}]}

QUERIES = {
    "q1": "Select H.alert From B, H, K, T Window T.ts > B.ts MaxWindow 4sec "
          "Where H.beatrate = 52 and B.temp > H.vib and B.pressure > T.fluct",
    "xh": "SELECT * FROM X, H MAXWINDOW 5 s WHERE X.f < H.beatrate",
    "x": "SELECT X.name, X.n FROM X WHERE X.n > 3",
    "kt": "SELECT * FROM K, T MAXWINDOW 2 s",
}

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TOPIC, PARTITION = "juggler.stream.S", 3


@pytest.fixture(scope="module")
def codec(tmp_path_factory: pytest.TempPathFactory) -> Codec:
    schemas = tmp_path_factory.mktemp("schemas")
    for path in default_schemas_dir().glob("*.avsc"):
        shutil.copy(path, schemas)
    (schemas / "X.avsc").write_text(json.dumps(X_SCHEMA))
    return Codec(schemas, registry_url="")


def fields_of(codec: Codec, stream: str) -> list[tuple[str, str]]:
    return [(f["name"], f["type"]) for f in codec.schema(stream)["fields"]]


def value_of(avro_type: str, narrow: bool) -> st.SearchStrategy[Any]:
    """A value of one column; `narrow` draws from a few, so events join and compare equal."""
    if narrow:
        return {"int": st.sampled_from([-1, 0, 4, 7]), "long": st.sampled_from([0, 5, 2**40]),
                "float": st.sampled_from([0.0, -0.0, 0.5, 52.0]),
                "double": st.sampled_from([0.0, -0.0, 1.5, 52.0, 1e300]),
                "boolean": st.booleans(), "string": st.sampled_from(["", "a", "é"])}[avro_type]
    return {"int": st.integers(-2**31, 2**31 - 1), "long": st.integers(-2**63, 2**63 - 1),
            "float": st.floats(width=32, allow_nan=False, allow_infinity=False),
            "double": st.floats(allow_nan=False, allow_infinity=False),
            "boolean": st.booleans(), "string": st.text()}[avro_type]


def records(codec: Codec, narrow: bool = False) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
    """(stream, record) for any stream of `codec`."""
    def record(stream: str) -> st.SearchStrategy[tuple[str, dict[str, Any]]]:
        fields = {name: value_of(t, narrow) for name, t in fields_of(codec, stream)}
        if narrow:
            fields["ts"] = st.integers(0, 6000)
        return st.tuples(st.just(stream), st.fixed_dictionaries(fields))
    return st.sampled_from(codec.stream_names()).flatmap(record)


KEYS = st.text(st.characters(blacklist_categories=["Cs"]), max_size=20)


def typed(value: Any) -> Any:
    """A value with its type, so 1 != 1.0 != True and 0.0 != -0.0."""
    if isinstance(value, dict):
        return [(k, typed(v)) for k, v in value.items()]
    return type(value).__name__, repr(value)


def as_tuple(event: Any) -> tuple[Any, ...]:
    return (typed(event.stream), typed(event.key), typed(event.ts), typed(event.data),
            typed(event.position))


def both(codec: Codec, stream: str, key: bytes | None, value: bytes | None, offset: int = 7
         ) -> tuple[DecodedEvent | None, Event | CodecError]:
    native = codec.native_decoder.event(stream, key, value, TOPIC, PARTITION, offset)
    try:
        python: Event | CodecError = codec.event_from(stream, key, value, (TOPIC, PARTITION, offset))
    except CodecError as exc:
        python = exc
    return native, python


def check_agrees(codec: Codec, stream: str, key: bytes | None, value: bytes | None) -> bool:
    """The property on any input: native takes it only if the codec does, and then
    gives the same event. True when native took it."""
    native, python = both(codec, stream, key, value)
    if isinstance(python, CodecError):
        assert native is None, f"native took what the codec refuses: {python.reason}"
        return False
    if native is not None:
        assert as_tuple(native) == as_tuple(python)
    return native is not None


# -- valid records ---------------------------------------------------------------------


@SETTINGS
@given(data=st.data(), key=KEYS)
def test_valid_records_decode_to_the_codec_events(codec: Codec, data: st.DataObject, key: str) -> None:
    stream, record = data.draw(records(codec))
    value = codec.encode(stream, record)
    assert check_agrees(codec, stream, key.encode(), value), "a plain record went to Python"


def test_every_stream_of_the_repository_has_the_fast_path(codec: Codec) -> None:
    for stream in codec.stream_names():
        record = {name: {"int": 1, "long": 2, "float": 0.5, "double": 1.5, "boolean": True,
                         "string": "s"}[t] for name, t in fields_of(codec, stream)}
        native, python = both(codec, stream, b"p1", codec.encode(stream, record))
        assert isinstance(native, DecodedEvent) and as_tuple(native) == as_tuple(python)
        assert repr(native).startswith(f"DecodedEvent(stream='{stream}', key='p1'")


def run_engine(codec: Codec, events: list[Any]) -> tuple[list[Any], list[Any], list[Any]]:
    """What an engine with `QUERIES` makes of `events`: `process_batch_encoded`'s
    answers, `process_batch`'s (on a second engine), then each key's snapshot."""
    outputs = []
    for encoded in (True, False):
        engine = NativeEngine(EngineConfig(allowed_lateness=500))
        for qid, text in QUERIES.items():
            engine.register(compile_query(qid, text, codec.catalog()))
        out = (engine.process_batch_encoded(events, 1_000_000) if encoded
               else engine.process_batch(events))
        outputs.append([o.reason if isinstance(o, LateEvent)
                        else [r if isinstance(r, tuple) else r.to_json() for r in o] for o in out])
    snapshots = []
    for key in sorted({e.key for e in events}):
        snap = engine.snapshot(key)
        assert snap is not None
        snapshots.append((snap.maxts, snap.floor, [as_tuple(e) for e in snap.events]))
    return outputs[0], outputs[1], snapshots


def decoded_both_ways(codec: Codec, batch: list[tuple[str, str, dict[str, Any]]]
                      ) -> tuple[list[DecodedEvent], list[Event]]:
    natives, pythons = [], []
    for offset, (key, stream, record) in enumerate(batch):
        native, python = both(codec, stream, key.encode(), codec.encode(stream, record), offset)
        assert native is not None and isinstance(python, Event)
        natives.append(native)
        pythons.append(python)
    return natives, pythons


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_decoded_events_give_the_engine_results_of_python_events(codec: Codec, data: st.DataObject) -> None:
    batch = data.draw(st.lists(st.tuples(st.sampled_from(["p1", "p2", "é"]), records(codec, narrow=True)),
                               min_size=1, max_size=40))
    natives, pythons = decoded_both_ways(codec, [(k, s, r) for k, (s, r) in batch])
    assert run_engine(codec, natives) == run_engine(codec, pythons)


def test_a_batch_with_results_and_a_late_event(codec: Codec) -> None:
    batch = [("p1", "B", {"ts": 900, "pressure": 0.0, "temp": 2.0, "alert": True}),
             ("p1", "X", {"n": 5, "ts": 1000, "f": 0.5, "ok": True, "name": "é"}),
             ("p1", "H", {"ts": 1100, "beatrate": 52.0, "vib": 1.0, "alert": False}),
             ("p1", "K", {"ts": 1200, "fluid": 2.0}),
             ("p1", "T", {"ts": 1300, "fluct": -1.0, "degree": 36.6, "incr": 0.0}),
             ("p1", "X", {"n": 9, "ts": 100, "f": 0.5, "ok": False, "name": ""})]  # late
    natives, pythons = decoded_both_ways(codec, batch)
    encoded, results, _ = got = run_engine(codec, natives)
    assert got == run_engine(codec, pythons)
    assert [len(r) if isinstance(r, list) else "late" for r in encoded] == [0, 1, 1, 0, 2, "late"]
    assert [r["query"] for r in results[4]] == ["q1", "kt"]
    assert results[4][1]["row"] == {"K.fluid": 2.0, "T.fluct": -1.0, "T.degree": 36.6, "T.incr": 0.0}


# -- malformed records -----------------------------------------------------------------


X_PLAIN = {"n": 1, "ts": 5, "f": 0.5, "ok": True, "name": "abc"}
H_PLAIN = {"ts": 5, "beatrate": 52.0, "vib": 1.5, "alert": False}


def malformed(codec: Codec) -> dict[str, tuple[str, bytes | None, bytes | None]]:
    """Named bad inputs as (stream, key, value)."""
    x, h = codec.encode("X", X_PLAIN), codec.encode("H", H_PLAIN)
    header = framing.SINGLE_OBJECT_HEADER
    return {
        "no key": ("H", None, h),
        "key not UTF-8": ("H", b"p\xff", h),
        "key a lone surrogate": ("H", "\ud800".encode("utf-8", "surrogatepass"), h),
        "key too long": ("H", b"k" * (MAX_KEY_BYTES + 1), h),
        "null value": ("H", b"p1", None),
        "empty value": ("H", b"p1", b""),
        "garbage": ("H", b"p1", b"garbage"),
        "truncated": ("H", b"p1", h[:-1]),
        "header only": ("H", b"p1", h[:header]),
        "trailing byte": ("H", b"p1", h + b"\x00"),
        "another stream's header": ("H", b"p1", codec.encode("K", {"ts": 5, "fluid": 1.0})),
        "unknown fingerprint": ("H", b"p1", h[:2] + bytes([h[2] ^ 1]) + h[3:]),
        "registry framing": ("H", b"p1", framing.confluent(1, h[header:])),
        "NaN double": ("H", b"p1", codec.encode("H", {**H_PLAIN, "vib": math.nan}, trusted=True)),
        "inf double": ("H", b"p1", codec.encode("H", {**H_PLAIN, "beatrate": math.inf}, trusted=True)),
        "-inf float": ("X", b"p1", codec.encode("X", {**X_PLAIN, "f": -math.inf}, trusted=True)),
        "string not UTF-8": ("X", b"p1", x[:-3] + b"a\xc3\x28"),
        "string a surrogate": ("X", b"p1", x[:-3] + b"\xed\xa0\x80"),
        "string longer than the body": ("X", b"p1", x[:-4] + b"\x08abc"),
        "negative string length": ("X", b"p1", x[:-4] + b"\x01abc"),
    }


def lenient(codec: Codec) -> dict[str, tuple[str, bytes, bytes]]:
    """Encodings no correct writer produces that fastavro still reads: native leaves
    them to the codec, which decodes them as before."""
    h = codec.encode("H", H_PLAIN)
    header = framing.SINGLE_OBJECT_HEADER
    ts_at = header  # H's first field is ts, 5: the one byte 0x0a
    return {
        "ts not minimal": ("H", b"p1", h[:ts_at] + b"\x8a\x00" + h[ts_at + 1:]),
        "boolean 2": ("H", b"p1", h[:-1] + b"\x02"),
        "int beyond 32 bits": ("X", b"p1", codec.encode("X", {**X_PLAIN, "n": 2**40}, trusted=True)),
    }


def test_malformed_records_are_left_to_the_codec_which_refuses_them(codec: Codec) -> None:
    for name, (stream, key, value) in malformed(codec).items():
        native, python = both(codec, stream, key, value)
        assert isinstance(python, CodecError), name
        assert native is None, name


def test_lenient_encodings_are_left_to_the_codec_which_reads_them(codec: Codec) -> None:
    for name, (stream, key, value) in lenient(codec).items():
        native, python = both(codec, stream, key, value)
        assert isinstance(python, Event), name
        assert native is None, name


def test_an_empty_key_and_a_key_of_the_largest_size_are_taken(codec: Codec) -> None:
    h = codec.encode("H", H_PLAIN)
    for key in (b"", "é".encode() * (MAX_KEY_BYTES // 2)):
        assert check_agrees(codec, "H", key, h)


MUTATIONS = st.one_of(
    st.tuples(st.just("truncate"), st.integers(0, 64)),
    st.tuples(st.just("append"), st.binary(min_size=1, max_size=4)),
    st.tuples(st.just("flip"), st.integers(0, 64), st.integers(1, 255)),
    st.tuples(st.just("insert"), st.integers(0, 64), st.binary(min_size=1, max_size=2)),
    st.tuples(st.just("replace"), st.binary(max_size=40)),
)


def mutate(value: bytes, mutation: tuple[Any, ...]) -> bytes:
    kind, *args = mutation
    if kind == "truncate":
        return value[:args[0] % len(value)]
    if kind == "append":
        return value + args[0]
    if kind == "flip":
        at = args[0] % len(value)
        return value[:at] + bytes([value[at] ^ args[1]]) + value[at + 1:]
    if kind == "insert":
        at = args[0] % (len(value) + 1)
        return value[:at] + args[1] + value[at:]
    return args[0]


@SETTINGS
@given(data=st.data(), key=st.one_of(KEYS.map(str.encode), st.binary(max_size=8), st.none()),
       mutation=MUTATIONS)
def test_mutated_records_are_taken_only_as_the_codec_takes_them(
        codec: Codec, data: st.DataObject, key: bytes | None, mutation: tuple[Any, ...]) -> None:
    stream, record = data.draw(records(codec))
    check_agrees(codec, stream, key, mutate(codec.encode(stream, record), mutation))



# -- a fetched group at a time ---------------------------------------------------------


def one_by_one(codec: Codec, stream: str, records: list[Record]) -> list[Any]:
    """What `stream_event` makes of each record, a refusal as its error."""
    out: list[Any] = []
    for r in records:
        try:
            out.append(codec.stream_event(stream, r.key, r.value, TOPIC, PARTITION, r.offset))
        except CodecError as exc:
            out.append(exc)
    return out


def described(event: Any) -> Any:
    if isinstance(event, CodecError):
        return type(event).__name__, event.kind, event.reason
    return type(event).__name__, as_tuple(event)


def check_group(codec: Codec, stream: str, inputs: list[tuple[bytes | None, bytes | None]]
                ) -> list[Any]:
    """The batch entry points against per-record decoding on one group; what
    `stream_events` gave."""
    records = [Record(TOPIC, PARTITION, 100 + 3 * i, key, value, 0)
               for i, (key, value) in enumerate(inputs)]
    native = codec.native_decoder.events(stream, TOPIC, PARTITION, records)
    singles = [codec.native_decoder.event(stream, r.key, r.value, TOPIC, PARTITION, r.offset)
               for r in records]
    assert [None if n is None else as_tuple(n) for n in native] == \
        [None if n is None else as_tuple(n) for n in singles]
    got = codec.stream_events(stream, TOPIC, PARTITION, records)
    assert [described(e) for e in got] == [described(e) for e in one_by_one(codec, stream, records)]
    return got


GROUP_KEYS = st.one_of(KEYS.map(str.encode), st.none(), st.binary(max_size=6),
                       st.just(b"k" * (MAX_KEY_BYTES + 1)), st.just(b"k" * MAX_KEY_BYTES))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_group_decodes_as_its_records_one_by_one(codec: Codec, data: st.DataObject) -> None:
    stream = data.draw(st.sampled_from(codec.stream_names()))
    fields = st.fixed_dictionaries({name: value_of(t, False) for name, t in fields_of(codec, stream)})
    value = st.one_of(fields.map(lambda r: codec.encode(stream, r)),
                      st.tuples(fields, MUTATIONS).map(lambda rm: mutate(codec.encode(stream, rm[0]), rm[1])),
                      st.none())
    check_group(codec, stream, data.draw(st.lists(st.tuples(GROUP_KEYS, value), max_size=30)))


def test_a_mixed_group_keeps_each_record_in_its_place(codec: Codec) -> None:
    plain = {"H": codec.encode("H", H_PLAIN), "X": codec.encode("X", X_PLAIN)}
    for stream in plain:
        odd = [(k, v) for s, k, v in [*malformed(codec).values(), *lenient(codec).values()]
               if s == stream]
        inputs = [item for bad in odd for item in ((b"p1", plain[stream]), bad)]
        got = check_group(codec, stream, inputs)
        assert [type(e).__name__ for e in got[::2]] == ["DecodedEvent"] * len(odd)
        assert not any(isinstance(e, DecodedEvent) for e in got[1::2])
        assert [e.position[2] for e in got if not isinstance(e, CodecError)] == \
            [100 + 3 * i for i, e in enumerate(got) if not isinstance(e, CodecError)]


def test_interleaved_partitions_reach_each_task_in_offset_order(codec: Codec) -> None:
    worker = JugglerWorker.__new__(JugglerWorker)
    fake = FakeWorker()
    fake.codec, fake.streams = codec, ("H", "X")
    worker.names, worker.control, worker._epoch = fake.names, None, 4
    worker.stream_of_topic = {fake.names.stream(s): s for s in fake.streams}
    worker.tasks = {p: PartitionTask(fake, p) for p in (0, 1)}
    sent: dict[tuple[int, str], list[tuple[int, str]]] = {}
    messages = []
    for i in range(24):  # partitions and streams interleaved; keys and ts fall as offsets rise
        p, stream, key = i % 2, "HX"[i // 2 % 2], f"k{99 - i}"
        value = codec.encode(stream, {**(H_PLAIN if stream == "H" else X_PLAIN), "ts": 5000 - i})
        messages.append(message(fake.names.stream(stream), p, 50 + i, key.encode(),
                                b"garbage" if i == 9 else value))
        sent.setdefault((p, stream), []).append((50 + i, key))
    worker._route(messages)
    for (p, stream), expected in sent.items():
        buffer = worker.tasks[p].order.inputs[stream].buffer
        assert [(pending.offset, pending.item[0].key.decode()) for pending in buffer] == expected
        for pending in buffer:
            record, event = pending.item
            assert pending.epoch == 4
            if isinstance(event, CodecError):
                assert (record.offset, pending.ts) == (59, None)
            else:
                assert (event.key, event.ts, event.position) == \
                    (record.key.decode(), pending.ts, (record.topic, p, record.offset))
    assert all(task.order.newest_epoch == 4 for task in worker.tasks.values())


def message(topic: str, partition: int, offset: int, key: bytes, value: bytes) -> Any:
    """A fetched message as confluent-kafka gives it: each field behind a method."""
    fields = {"topic": topic, "partition": partition, "offset": offset, "key": key,
              "value": value, "error": None, "timestamp": (1, 0), "headers": None}
    return SimpleNamespace(**{name: (lambda v=v: v) for name, v in fields.items()})


# -- the task --------------------------------------------------------------------------


class NoDecoder:
    """A native decoder that takes nothing: the task as it was before it."""

    def events(self, stream: str, topic: str, partition: int, records: list[Record]) -> list[None]:
        return [None] * len(records)


def task_outputs(codec: Codec, inputs: list[tuple[str, bytes | None, bytes | None]]
                 ) -> tuple[list[Any], RoundCounts, list[Any], list[Any]]:
    """A task's outbox, counts and snapshots after `add_many` (a group per stream),
    then `_events` and `_finish` (what `run` does with records in arrival order) over
    `inputs`."""
    worker = FakeWorker()
    worker.codec, worker.streams = codec, codec.stream_names()
    task = PartitionTask(worker, 0)
    for qid, text in QUERIES.items():
        task.engine.register(compile_query(qid, text, codec.catalog()))
    taken: list[Any] = []
    task.order.extend = lambda stream, pendings, now, appended=None: taken.extend(
        (stream, *pending.item, pending.ts) for pending in pendings)
    per_stream: dict[str, list[Record]] = {}
    for offset, (stream, key, value) in enumerate(inputs):
        per_stream.setdefault(stream, []).append(
            Record(worker.names.stream(stream), 0, offset, key, value, 0))
    for stream, group in per_stream.items():
        task.add_many(stream, group, 1, 0.0)
    taken.sort(key=lambda item: item[1].offset)  # back in input order, as `run` would take them
    for _, _, event, ts in taken:
        assert ts == (None if isinstance(event, CodecError) else event.ts)
    outbox, counts, dirty = Outbox(), RoundCounts(), dict[str, None]()
    task._events([item[:3] for item in taken], outbox, counts, dirty)
    task._finish(outbox, dirty)
    snapshots = [(s.maxts, s.floor, [as_tuple(e) for e in s.events])
                 for key in sorted({e.key for _, _, e, _ in taken if not isinstance(e, CodecError)})
                 if (s := task.engine.snapshot(key)) is not None]
    kinds = [type(e).__name__ for _, _, e, _ in taken]
    messages = [*outbox.messages, *outbox.latest.values()]
    return [messages, outbox.offsets, counts, snapshots], counts, kinds


def test_the_task_dead_letters_and_publishes_what_it_did_without_the_native_decoder(codec: Codec) -> None:
    plain = [("p1", "B", {"ts": 900, "pressure": 0.0, "temp": 2.0, "alert": True}),
             ("p1", "H", {"ts": 1100, "beatrate": 52.0, "vib": 1.0, "alert": False}),
             ("p2", "X", {"n": 5, "ts": 1000, "f": 0.5, "ok": True, "name": "é"}),
             ("p1", "K", {"ts": 1200, "fluid": 2.0}),
             ("p1", "T", {"ts": 1300, "fluct": -1.0, "degree": 36.6, "incr": 0.0}),
             ("p1", "H", {"ts": 10, "beatrate": 52.0, "vib": 1.0, "alert": False})]  # late
    inputs = [(stream, key.encode(), codec.encode(stream, record)) for key, stream, record in plain]
    inputs[:0] = [*malformed(codec).values(), *lenient(codec).values()]
    before = Codec(codec.schemas_dir, registry_url="")
    before.__dict__["native_decoder"] = NoDecoder()  # the cached_property's slot
    got, counts, kinds = task_outputs(codec, inputs)
    expected, _, old_kinds = task_outputs(before, inputs)
    assert got == expected
    assert kinds.count("DecodedEvent") == len(plain) and "DecodedEvent" not in old_kinds
    assert kinds.count("Event") == len(lenient(codec))
    assert sum(counts.dead_letters.values()) == len(malformed(codec)) + 1 and counts.late == {"H": 1}
    assert counts.results_out["q1"] >= 1 and counts.results_out["kt"] == 1
