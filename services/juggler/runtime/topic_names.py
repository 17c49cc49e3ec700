"""The topics one worker uses (semantics section 7), with the deployment's prefix.

The names come from `juggler.wire.names`; `Settings.topic_prefix` is prepended so that
tests (or two deployments) can share a cluster. With the default empty prefix these are
exactly docs/semantics.md's names.
"""

from __future__ import annotations

from dataclasses import dataclass

from juggler.wire import names


@dataclass(frozen=True)
class TopicNames:
    prefix: str = ""

    @property
    def control(self) -> str:
        return self.prefix + names.CONTROL

    @property
    def status(self) -> str:
        return self.prefix + names.CONTROL_STATUS

    @property
    def fanout(self) -> str:
        return self.prefix + names.CONTROL_FANOUT

    @property
    def state(self) -> str:
        return self.prefix + names.STATE

    @property
    def settings(self) -> str:
        return self.prefix + names.SETTINGS

    @property
    def deadletter(self) -> str:
        return self.prefix + names.DEADLETTER

    def stream(self, name: str) -> str:
        return self.prefix + names.stream_topic(name)

    @property
    def all_results(self) -> str:
        return self.prefix + names.RESULTS

    @property
    def own_results_prefix(self) -> str:
        """What every query's own results topic begins with."""
        return self.prefix + names.RESULTS_PREFIX

    def results(self, query_id: str) -> str:
        """The topic of a query registered with its own topic."""
        return self.prefix + names.results_topic(query_id)

    def query_id_problem(self, query_id: str) -> str | None:
        """Why `query_id` cannot name a results topic, or None when it can."""
        try:
            names.validate_query_id(query_id)
        except names.InvalidName as exc:
            return str(exc)
        if len(self.results(query_id)) > names.MAX_TOPIC_LENGTH:
            return (f"query id {query_id[:20]!r}... is too long for the topic prefix "
                    f"{self.prefix!r}")
        return None
