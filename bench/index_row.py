"""Per-result cost of the results index's `index_row` (a `juggler.Result` message -> the
row with the JSON text the HTTP API serves), without Kafka.

Why: `index_row` is the indexing process's work per result, and it must keep up with a
worker's results on workload K (docs/benchmarks.md).
The results are shaped like K's (a join of two streams, a four-column row); the
median of several runs is printed in microseconds per result.

    PYTHONPATH=services:. python -m bench.index_row [--runs 7] [--n 20000]
"""

from __future__ import annotations

import argparse
import statistics
import time

from confluent_kafka import Message

from juggler.codec.avro import RESULT, Codec
from juggler.wire.names import QUERY_HEADER
from juggler.runtime.results_store import index_row


def messages(codec: Codec, n: int) -> list[Message]:
    """Results as the indexing process's consumer hands them over: confluent_kafka's
    own messages, built here without a broker."""
    out = []
    for i in range(n):
        query = f"q{i % 100}"
        record = {"query": query, "key": f"patient-{i % 5000}", "ts": 1_700_000_000_000 + i,
                  "sources": {"A": {"topic": "juggler.stream.A", "partition": i % 4, "offset": 2 * i},
                              "B": {"topic": "juggler.stream.B", "partition": i % 4, "offset": 2 * i + 1}},
                  "row": {"A.value": i * 0.37, "B.value": i % 1000, "A.unit": "mmol/l",
                          "B.flag": i % 2 == 0}}
        out.append(Message(topic="juggler.results", partition=3, offset=i,
                           value=codec.encode(RESULT, record, trusted=True),
                           headers=[(QUERY_HEADER, query.encode())]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--n", type=int, default=20_000)
    args = parser.parse_args()
    codec = Codec()
    header = codec.single_object_header(RESULT)
    batch = messages(codec, args.n)
    runs = []
    for _ in range(args.runs):
        start = time.perf_counter()
        for m in batch:
            index_row(m, codec, header)
        runs.append((time.perf_counter() - start) / len(batch) * 1e6)
    print(f"index_row: {statistics.median(runs):.2f} us per result (median of {args.runs} runs "
          f"of {args.n}; min {min(runs):.2f}, max {max(runs):.2f})")


if __name__ == "__main__":
    main()
