"""The workload's events as files, written once and read by Juggler and every peer.

Why files: the peers run in their own processes (a JVM for Esper, PyFlink's JVM for
Flink), and "equal results on the same events" is only a claim worth making if every
engine reads the same bytes. Numbers are written as Python's `repr`, the shortest text
that parses back to the same double in Python and Java alike.

    events.csv       every event in arrival order: stream,key,ts,position,col1,col2,...
    <stream>.csv     that stream's events (Flink reads one table per stream): key,ts,position,...
    schema.tsv       one line per stream: name<TAB>col1,col2,... (the column order above)

Columns are numbers (S and J have no others); the peers read them as doubles.
"""

from __future__ import annotations

import csv
import itertools
from dataclasses import dataclass
from pathlib import Path

from bench.peers.epl import KEY, POSITION
from bench.workloads import Workload
from juggler.engine.events import Event


@dataclass(frozen=True)
class EventFiles:
    directory: Path
    columns: dict[str, tuple[str, ...]]

    @classmethod
    def at(cls, directory: Path) -> "EventFiles":
        """The files `export` wrote into `directory` (read back in another process)."""
        columns = {}
        for line in (directory / "schema.tsv").read_text().splitlines():
            stream, cols = line.split("\t")
            columns[stream] = tuple(cols.split(",")) if cols else ()
        return cls(directory, columns)

    @property
    def arrival(self) -> Path:
        return self.directory / "events.csv"

    @property
    def schema(self) -> Path:
        return self.directory / "schema.tsv"

    def stream(self, name: str) -> Path:
        return self.directory / f"{name}.csv"


def export(workload: Workload, count: int, directory: Path) -> EventFiles:
    """Write the first `count` events of `workload` into `directory`."""
    columns = {s: tuple(cols) for s, cols in workload.catalog.items()}
    for stream, cols in columns.items():
        if KEY in cols or POSITION in cols:
            raise ValueError(f"stream {stream} has a column named {KEY} or {POSITION}, "
                             "which the peers use for the key and the position")
    directory.mkdir(parents=True, exist_ok=True)
    with (directory / "schema.tsv").open("w") as f:
        for stream, cols in columns.items():
            f.write(f"{stream}\t{','.join(cols)}\n")
    handles = {s: (directory / f"{s}.csv").open("w", newline="") for s in columns}
    try:
        per_stream = {s: csv.writer(h) for s, h in handles.items()}
        with (directory / "events.csv").open("w", newline="") as f:
            arrival = csv.writer(f)
            for event in itertools.islice(workload.events(), count):
                row = [event.key, event.ts, event.position,
                       *(repr(event.data[c]) for c in columns[event.stream])]
                arrival.writerow([event.stream, *row])
                per_stream[event.stream].writerow(row)
    finally:
        for h in handles.values():
            h.close()
    return EventFiles(directory, columns)


def read(files: EventFiles) -> list[Event]:
    """The events of `events.csv`, as the Juggler engine takes them."""
    out = []
    with files.arrival.open(newline="") as f:
        for stream, key, ts, position, *values in csv.reader(f):
            cols = files.columns[stream]
            out.append(Event(stream, key, int(ts), dict(zip(cols, map(float, values))),
                             int(position)))
    return out
