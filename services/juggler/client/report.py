"""What `juggler query ...` prints, and its exit statuses.

Why separate: the CLI stays a thin layer of options, and the texts are testable
without Kafka.
"""

from __future__ import annotations

import json
from collections import Counter

from juggler.client.control import (DEREGISTERED, NOT_YET, PENDING, REFUSED, REGISTERED,
                                    ControlView, QueryState, Submission)
from juggler.wire.names import CONTROL, RESULTS_PREFIX
from juggler.wire.commands import ACCEPTED, REGISTER

SHOWN = 20
"""Rejected or unconfirmed commands of a batch shown one per line; the rest counted."""
EXIT_ACCEPTED = 0
EXIT_REJECTED = 1
EXIT_NO_STATUS = 3
"""No status within --timeout: the command is in the control topic and takes effect
when a worker reads it, but nobody confirmed it yet (no worker running, or behind)."""


def submission(sub: Submission, *, waited: bool, timeout: float) -> tuple[str, int]:
    """The line to print and the exit status for a sent command."""
    cmd, sent = sub.command, sub.sent
    where = f"{sent.topic} offset {sent.offset}"
    if not waited:
        return f"sent {cmd.action} {cmd.id} ({where}); not waiting for its status", 0
    if sub.status is None:
        return (f"no status for {cmd.action} {cmd.id} ({where}): {timeout:g}s passed without "
                f"an answer; is a worker running? The command stays in the control topic and takes "
                f"effect when a worker reads it", EXIT_NO_STATUS)
    if sub.status.accepted:
        suffix = f": {sub.status.message}" if sub.status.message else ""
        if sub.live is None or sub.everywhere:
            live = f", live in all {sub.live[1]} partitions" if sub.live else ""
            return f"ACCEPTED {cmd.action} {cmd.id} ({where}){suffix}{live}", EXIT_ACCEPTED
        return (f"ACCEPTED {cmd.action} {cmd.id} ({where}){suffix}, but live in only "
                f"{sub.live[0]} of {sub.live[1]} partitions when {timeout:g}s passed without "
                f"progress: is a "
                f"worker running for every partition?", EXIT_NO_STATUS)
    return f"REJECTED {cmd.action} {cmd.id} ({where}): {sub.status.message}", EXIT_REJECTED


def submissions(subs: list[Submission], *, waited: bool, timeout: float) -> tuple[str, int]:
    """The summary of a batch: one line per rejected or unanswered command, then the
    counts; the exit status is the worst of the commands'."""
    lines: list[str] = []
    worst = EXIT_ACCEPTED
    counts = {EXIT_ACCEPTED: 0, EXIT_REJECTED: 0, EXIT_NO_STATUS: 0}
    for sub in subs:
        text, status = submission(sub, waited=waited, timeout=timeout)
        counts[status] += 1
        worst = max(worst, status, key=[EXIT_ACCEPTED, EXIT_REJECTED, EXIT_NO_STATUS].index)
        if status != EXIT_ACCEPTED and len(lines) < SHOWN:
            lines.append(text)
    if not waited:
        return f"sent {len(subs)} commands; not waiting for their statuses", EXIT_ACCEPTED
    partitions = next((s.live[1] for s in subs if s.live), 0)
    lines.append(f"{counts[EXIT_ACCEPTED]} accepted" +
                 (f" and live in all {partitions} partitions" if partitions else "") +
                 f", {counts[EXIT_REJECTED]} rejected, {counts[EXIT_NO_STATUS]} not "
                 f"confirmed ({timeout:g}s passed with no answer)")
    return "\n".join(lines), worst


def query_list(view: ControlView, *, everything: bool = False, as_json: bool = False) -> str:
    """The registered queries; with `everything`, also the ids that are not registered
    (rejected, pending, deregistered), each marked with its state. Without it, a last
    line counts the ids left out, so nothing is hidden silently."""
    queries = list(view.queries.values()) if everything else view.registered()
    if as_json:
        return json.dumps([q.to_json() for q in queries], indent=2)
    left_out = [] if everything else view.not_registered()
    lines = []
    if queries:
        width = max(len("ID"), *(len(q.id) for q in queries))
        state_width = max(len(q.state) for q in queries)
        lines.append(f"{'ID':<{width}}  {'STATE':<{state_width}}  {'LIVE':>5}  "
                     f"{'OFFSET':>6}  TEXT")
        for q in queries:
            lines.append(f"{q.id:<{width}}  {q.state:<{state_width}}  {_live(q):>5}  "
                         f"{q.offset:>6}  {_text(q)}".rstrip())
            if q.message:
                lines.append(f"{'':<{width}}  {q.message}")
            if q.later:
                lines.append(f"{'':<{width}}  later {q.later}")
    else:
        lines.append("no queries registered" if not everything else
                     f"no commands in {CONTROL}")
    if left_out:
        counts = Counter(q.state for q in left_out)
        lines.append(f"({len(left_out)} more {'id is' if len(left_out) == 1 else 'ids are'} "
                     f"not registered: " +
                     ", ".join(f"{counts[s]} {s}" for s in (REFUSED, NOT_YET, DEREGISTERED)
                               if counts[s]) + "; --all lists them)")
    return "\n".join(lines)


def _live(q: QueryState) -> str:
    """In how many partitions a registered query took effect: `4/4` once everywhere."""
    if q.state != REGISTERED or not q.live[1]:
        return "-"
    return f"{q.live[0]}/{q.live[1]}"


def _text(q: QueryState) -> str:
    if q.register is None:
        return f"({q.command.action.lower()})"
    if q.register.text is None:
        return f"(text no longer in {CONTROL}: compacted away)"
    return _one_line(q.register.text or "")


WHY_NOT = {NOT_YET: "pending, not registered yet", REFUSED: "rejected, not registered",
           DEREGISTERED: "deregistered"}


def query_show(state: QueryState | None, query_id: str, *,
               as_json: bool = False) -> tuple[str, int]:
    """One query's text and status; exit status 1 when the id never appeared."""
    if state is None:
        return f"query {query_id} is not in {CONTROL}", 1
    if as_json:
        return json.dumps(state.to_json(), indent=2), 0
    standing = WHY_NOT.get(state.state, state.state)
    if state.state == NOT_YET and state.command.action != REGISTER:
        standing = "pending, not registered"
    status = state.status + (f": {state.message}" if state.message else "")
    if state.status == PENDING:
        status += " (no status for this command yet)"
    lines = [
        f"id:      {state.id}",
        f"state:   {standing} ({state.command.action} at {CONTROL} offset {state.offset})",
        f"status:  {status}",
    ]
    if state.state == REGISTERED and state.live[1]:
        done, of = state.live
        lines.append(f"live:    in {done} of {of} partitions")
    if state.later:
        lines.append(f"later:   {state.later}")
    register = state.register
    if register is not None:
        lines.append(f"history: {'true' if register.history else 'false'}")
        if register.own_topic:
            lines.append(f"results: {RESULTS_PREFIX}{state.id} (its own topic)")
        if register.text is None:
            lines.append(f"text:    (no longer in {CONTROL}: compacted away)")
        else:
            lines.append("text:")
            lines += [f"  {line}" for line in register.text.splitlines()]
    return "\n".join(lines), 0


def _one_line(text: str, limit: int = 70) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 3] + "..."
