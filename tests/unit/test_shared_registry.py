"""Engines of one process that register the same queries copy one registry instead of
each building its own (`juggler.engine.shared_registry`): each must still answer every
event as an engine that registered the queries itself."""

from __future__ import annotations

import random

import pytest

from juggler.engine.events import EngineConfig, Event
from juggler.engine.native_engine import NativeEngine
from juggler.engine.shared_registry import SharedRegistries
from juggler.language import ColumnType, compile_query
from juggler.language.model import Query

CATALOG = {"B": {"x": ColumnType.NUMBER, "z": ColumnType.NUMBER},
           "H": {"y": ColumnType.NUMBER, "s": ColumnType.STRING}}
CONFIG = EngineConfig(retention=50)


def queries(rng: random.Random, prefix: str, n: int) -> list[Query]:
    """Thresholds, equalities and joins over both streams, sharing lists."""
    texts = [
        lambda: f"SELECT * FROM B WHERE B.x > {rng.randrange(20)}",
        lambda: f"SELECT B.z FROM B WHERE B.z <= {rng.randrange(20)} AND B.x != {rng.randrange(5)}",
        lambda: f"SELECT * FROM H WHERE H.s = 's{rng.randrange(3)}'",
        lambda: (f"SELECT * FROM B, H MAXWINDOW {rng.randrange(1, 40)} ms "
                 f"WHERE B.x < H.y + {rng.randrange(-5, 5)}"),
    ]
    return [compile_query(f"{prefix}{i}", rng.choice(texts)(), CATALOG) for i in range(n)]


def events(rng: random.Random, start: int, n: int) -> list[Event]:
    out = []
    for i in range(n):
        if rng.random() < 0.5:
            data = {"x": rng.randrange(20), "z": rng.randrange(20)}
            out.append(Event("B", f"k{rng.randrange(3)}", start + i, data, start + i))
        else:
            data = {"y": rng.randrange(20), "s": f"s{rng.randrange(3)}"}
            out.append(Event("H", f"k{rng.randrange(3)}", start + i, data, start + i))
    return out


def answers(engine: NativeEngine, batch: list[Event]) -> list[list[tuple]]:
    return [[(r.query, r.key, r.ts, tuple(r.sources.items()), tuple(r.row.items())) for r in out]
            for out in engine.process_batch(batch)]


@pytest.fixture
def copies(monkeypatch: pytest.MonkeyPatch) -> list[NativeEngine]:
    """The engines that took a copy, in order."""
    took: list[NativeEngine] = []
    copy = NativeEngine._copy

    def counted(self: NativeEngine, source: NativeEngine, batch: list[Query]) -> bool:
        done = copy(self, source, batch)
        if done:
            took.append(self)
        return done

    monkeypatch.setattr(NativeEngine, "_copy", counted)
    return took


@pytest.mark.parametrize("seed", range(4))
def test_engines_that_copy_a_registry_answer_as_one_that_built_its_own(
        seed: int, copies: list[NativeEngine]) -> None:
    rng = random.Random(seed)
    registries = SharedRegistries()
    shared = [NativeEngine(CONFIG, registries) for _ in range(3)]
    alone = NativeEngine(CONFIG)
    everyone = [*shared, alone]
    registered: list[str] = []
    ts = 0
    for step in range(6):
        batch = queries(rng, f"s{step}q", rng.choice([1, 40, 150]))
        for engine in everyone:
            engine.register_many(batch)
        registered += [q.id for q in batch]
        for gone in rng.sample(registered, len(registered) // 10):
            registered.remove(gone)
            for engine in everyone:
                engine.deregister(gone)
        evs = events(rng, ts, 60)
        ts += 60
        expected = answers(alone, evs)
        assert sum(map(len, expected)) > 0
        for engine in shared:
            assert answers(engine, evs) == expected
    assert copies, "some batch was copied"
    assert all(engine in shared[1:] for engine in copies)
    for engine in shared:
        assert engine.queries == alone.queries
        assert engine.predicate_lists() == alone.predicate_lists()
        assert engine.horizon == alone.horizon


def test_an_engine_whose_events_named_columns_in_another_order_builds_its_own(
        copies: list[NativeEngine]) -> None:
    """Its columns are numbered otherwise, so it cannot take the other's numbers."""
    registries = SharedRegistries()
    first, second = NativeEngine(CONFIG, registries), NativeEngine(CONFIG, registries)
    alone = NativeEngine(CONFIG)
    first.process(Event("B", "k", 0, {"x": 1, "z": 2}, 0))
    for engine in (second, alone):
        engine.process(Event("B", "k", 0, {"z": 2, "x": 1}, 0))
    batch = queries(random.Random(9), "q", 100)
    for engine in (first, second, alone):
        engine.register_many(batch)
    assert not copies
    evs = events(random.Random(10), 1, 80)
    assert answers(second, evs) == answers(alone, evs)


def test_a_few_queries_after_many_are_built_not_copied(copies: list[NativeEngine]) -> None:
    """Copying everything for a few new queries would make each registration cost as
    much as everything registered."""
    registries = SharedRegistries()
    engines = [NativeEngine(CONFIG, registries) for _ in range(2)]
    rng = random.Random(3)
    many, few = queries(rng, "m", 200), queries(rng, "f", 2)
    for batch in (many, few):
        for engine in engines:
            engine.register_many(batch)
    assert copies == [engines[1]]
