"""The Faust codecs and records for the worker's output (`juggler.faust.records`): the
bytes the worker writes (through the same functions it writes them with) decode into
typed records with the right values, by codec name, by record class and through
Faust's serializer registry as a topic uses it; the records encode back to the same
bytes; a result's identity is the engine's; `Repeats` drops repeats within its bounds.
"""

from __future__ import annotations

import pytest

faust = pytest.importorskip("faust")

from faust.exceptions import ValueDecodeError  # noqa: E402
from faust.serializers import Registry, codecs  # noqa: E402

from juggler.codec.avro import (RESULT, Codec, DecodeError, SchemaViolation,  # noqa: E402
                                result_record)
from juggler.codec.bounded import dead_letter, encode_result_bounded  # noqa: E402
from juggler.codec.result_body import result_body  # noqa: E402
from juggler.engine import events  # noqa: E402
from juggler.faust.records import (COMMAND_STATUS_CODEC, DEAD_LETTER_CODEC,  # noqa: E402
                                   RESULT_CODEC, CommandStatus, DeadLetter, Position,
                                   Repeats, Result)
from juggler.wire import commands  # noqa: E402

TOPIC = "p.juggler.results"
ENGINE_RESULT = events.Result(
    "fig58", "patient-7", 5500,
    {"B": ("p.juggler.stream.B", 2, 3), "H": ("p.juggler.stream.H", 2, 4),
     "T": ("p.juggler.stream.T", 0, 12)},
    {"B.pressure": 88.0, "B.alert": False, "H.alert": True, "T.incr": 0.5,
     "T.note": "über", "T.count": 7, "T.none": None})


@pytest.fixture(scope="module")
def codec() -> Codec:
    return Codec()


def worker_bytes(codec: Codec, result: events.Result) -> list[bytes]:
    """A result as the worker writes it: a history result through the bounded encoder,
    an ordinary one as a body written by `result_body` after the topic's header."""
    record = result_record(result)
    bounded, omitted = encode_result_bounded(codec, record, topic=TOPIC,
                                             key=result.key.encode(), max_bytes=1_000_000,
                                             trusted=True)
    assert not omitted
    return [bounded, codec.header(RESULT, TOPIC) + result_body(record)]


def test_the_workers_result_bytes_decode_into_a_result(codec: Codec) -> None:
    for data in worker_bytes(codec, ENGINE_RESULT):
        for result in (codecs.loads(RESULT_CODEC, data), Result.loads(data)):
            assert isinstance(result, Result)
            assert (result.query, result.key, result.ts) == ("fig58", "patient-7", 5500)
            assert result.sources == {"B": Position("p.juggler.stream.B", 2, 3),
                                      "H": Position("p.juggler.stream.H", 2, 4),
                                      "T": Position("p.juggler.stream.T", 0, 12)}
            assert result.row == ENGINE_RESULT.row
            assert [type(v) for v in result.row.values()] == \
                [float, bool, bool, float, str, int, type(None)]
            assert result.dumps() == data  # a Faust app writes the worker's bytes


def test_a_result_encodes_back_to_the_same_bytes(codec: Codec) -> None:
    data = codec.encode(RESULT, result_record(ENGINE_RESULT))
    result = Result.loads(data)
    assert codecs.dumps(RESULT_CODEC, result) == data
    assert result.dumps() == data  # the record's own serializer is the codec
    # Faust hands a model's representation (a mapping, nested records in it) to the
    # codec; a plain mapping of the Avro record's fields is taken too
    assert codecs.dumps(RESULT_CODEC, result.to_representation()) == data
    assert codecs.dumps(RESULT_CODEC, result_record(ENGINE_RESULT)) == data
    assert codecs.dumps(RESULT_CODEC, {**result_record(ENGINE_RESULT),
                                       "__faust": {"ns": "x"}}) == data
    assert Result.loads(result.dumps()) == result


def test_a_topic_reads_and_writes_results_through_fausts_registry(codec: Codec) -> None:
    """What `app.topic(..., value_type=Result, value_serializer=RESULT_CODEC)` does with
    a message, and what `topic.send(value=result)` writes, whatever the topic's own
    value serializer (the record names its codec)."""
    data = codec.encode(RESULT, result_record(ENGINE_RESULT))
    registry = Registry(key_serializer="raw", value_serializer="json")
    typed = registry.loads_value(Result, data, serializer=RESULT_CODEC)
    untyped = registry.loads_value(None, data, serializer=RESULT_CODEC)
    assert typed == untyped == Result.loads(data)
    assert registry.dumps_value(Result, typed) == data
    assert registry.dumps_value(None, typed, serializer="json") == data
    with pytest.raises(ValueDecodeError, match="single-object|magic|Avro"):
        registry.loads_value(Result, b"not avro at all", serializer=RESULT_CODEC)


def test_identity_is_the_engine_results(codec: Codec) -> None:
    for data in worker_bytes(codec, ENGINE_RESULT):
        result = Result.loads(data)
        assert result.identity() == ENGINE_RESULT.identity()
        assert result.to_engine() == ENGINE_RESULT
        assert hash(result.identity()) == hash(ENGINE_RESULT.identity())


def test_dead_letters_decode_and_encode(codec: Codec) -> None:
    key, data = dead_letter(codec, topic="p.juggler.stream.H", partition=1, offset=31,
                            key=b"p1", value=b"\x00\x01", kind="late",
                            reason="late: ts 11800 < maxts 12000", max_bytes=1_000_000)
    letter = codecs.loads(DEAD_LETTER_CODEC, data)
    assert isinstance(letter, DeadLetter) and key == b"p1"
    assert letter.asdict() == {"key": b"p1", "value": b"\x00\x01", "key_size": 2,
                               "value_size": 2, "topic": "p.juggler.stream.H",
                               "partition": 1, "offset": 31, "kind": "late",
                               "reason": "late: ts 11800 < maxts 12000"}
    assert letter.dumps() == data and DeadLetter.loads(data) == letter


def test_command_statuses_decode_and_encode(codec: Codec) -> None:
    written = commands.CommandStatus("q2", commands.REGISTER, commands.LIVE, "", 17, 1, 4)
    data = written.encode(codec)
    status = codecs.loads(COMMAND_STATUS_CODEC, data)
    assert isinstance(status, CommandStatus)
    assert (status.id, status.action, status.status, status.command_offset,
            status.partition, status.partitions) == ("q2", "REGISTER", "LIVE", 17, 1, 4)
    assert status.live and not status.accepted
    assert status.to_control() == written
    assert status.dumps() == data and CommandStatus.loads(data) == status


def test_the_project_codecs_refusals_come_through(codec: Codec) -> None:
    result_bytes = codec.encode(RESULT, result_record(ENGINE_RESULT))
    with pytest.raises(DecodeError):
        codecs.loads(RESULT_CODEC, result_bytes[:-3])
    with pytest.raises(SchemaViolation):  # another record's bytes
        codecs.loads(DEAD_LETTER_CODEC, result_bytes)
    with pytest.raises(TypeError, match="expected a Result"):
        codecs.dumps(RESULT_CODEC, [1, 2])
    with pytest.raises(TypeError, match="expected a Result"):
        codecs.dumps(RESULT_CODEC, CommandStatus("q", "REGISTER", "ACCEPTED", "", 1))


def result(query: str = "q", key: str = "k", offset: int = 0) -> Result:
    return Result(query=query, key=key, ts=offset, row={"H.alert": True},
                  sources={"H": Position("t", 0, offset)})


def test_repeats_drops_a_result_seen_before() -> None:
    repeats = Repeats()
    assert repeats.first(result(offset=1))
    assert repeats.first(result(offset=2))
    assert not repeats.first(result(offset=1))  # the same identity, another object
    assert not repeats.first(Result.loads(result(offset=2).dumps()))  # and decoded again
    assert repeats.first(result(query="other", offset=1))  # another query's result
    assert repeats.first(result(key="k2", offset=1))
    assert repeats.dropped == 2


def test_repeats_is_bounded_per_key_and_in_keys() -> None:
    repeats = Repeats(per_key=2, keys=2)
    assert all(repeats.first(result(offset=o)) for o in (1, 2, 3))
    assert repeats.first(result(offset=1)), "pushed out of k's window by 2 and 3"
    assert not repeats.first(result(offset=3))
    assert repeats.first(result(key="a", offset=9))
    assert not repeats.first(result(offset=3)), "k is the more recently seen key"
    assert repeats.first(result(key="b", offset=9))  # forgets "a", the least recent
    assert repeats.first(result(key="a", offset=9))
    assert not repeats.first(result(key="b", offset=9))
    with pytest.raises(ValueError):
        Repeats(per_key=0)
