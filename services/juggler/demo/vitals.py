"""Simulated ICU vitals for the thesis's streams (B blood, H heart, K kidney,
T temperature), in event-time order and reproducible for a seed.

Values are whole numbers where the example queries test equality (`H.beatrate = 52`,
`T.fluct = 103`, `T.incr = H.vib`), and each patient goes through episodes of
bradycardia and tachycardia, so every bundled query has something to find within
seconds; most of the time a patient is stable and matches nothing.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

Event = tuple[str, str, int, dict[str, Any]]
"""(stream, key, ts in ms, columns)."""

STREAMS = ("B", "H", "K", "T")
EPISODE_MS = 8_000


class VitalsSimulator:
    def __init__(self, patients: int = 20, seed: int = 7) -> None:
        self.keys = [f"patient-{i:02d}" for i in range(patients)]
        self.rng = random.Random(seed)
        self.condition = {key: "stable" for key in self.keys}
        self.next_episode = 0

    def events(self, start_ts: int, rate: float) -> Iterator[Event]:
        """An endless stream at `rate` events/s of event time: consecutive events are
        1000/rate ms apart (ties broken by order), each for a random patient and stream."""
        step = 1000.0 / rate
        t = float(start_ts)
        while True:
            ts = int(t)
            if ts >= self.next_episode:
                self._new_episodes(ts)
            key = self.rng.choice(self.keys)
            stream = self.rng.choice(STREAMS)
            yield stream, key, ts, self._columns(stream, self.condition[key])
            t += step

    def _new_episodes(self, ts: int) -> None:
        """Every few seconds each patient is stable, bradycardic or tachycardic."""
        for key in self.keys:
            self.condition[key] = self.rng.choices(("stable", "brady", "tachy"),
                                                   weights=(6, 2, 2))[0]
        self.next_episode = ts + EPISODE_MS

    def _columns(self, stream: str, condition: str) -> dict[str, Any]:
        r = self.rng
        if stream == "B":
            return {"pressure": float(r.randint(70, 140) if condition != "tachy"
                                      else r.randint(60, 95)),
                    "temp": round(r.uniform(36.0, 40.0), 1), "alert": r.random() < 0.1}
        if stream == "H":
            beat = {"stable": r.randint(60, 100), "brady": r.randint(45, 56),
                    "tachy": r.randint(110, 140)}[condition]
            return {"beatrate": float(beat), "vib": float(r.randint(0, 100)),
                    "alert": condition != "stable" and r.random() < 0.5}
        if stream == "K":
            return {"fluid": float(r.randint(0, 500))}
        fluct = 103 if r.random() < 0.15 else r.randint(80, 200)
        return {"fluct": float(fluct), "degree": float(r.randint(30, 45)),
                "incr": float(r.randint(0, 100))}
