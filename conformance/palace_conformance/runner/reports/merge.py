"""``palace-conformance merge``: the shards of one run (``run --shard K/N --json``, one per CI
job) joined into one :class:`~.results.RunResult`, so every report is written as if one job had
run the whole selection.

Only results of one bridge judged at one level join: a file of another bridge or level, a
(scenario, transport) in two files, or a missing shard is refused, because the joined report
would otherwise claim a verdict nobody ran.
"""

from __future__ import annotations

from collections.abc import Sequence

from palace_conformance.contract import TRANSPORTS
from palace_conformance.errors import UntrustedInputError
from palace_conformance.runner.results import PARITY, RunResult

_RANK = {t: i for i, t in enumerate((*TRANSPORTS, PARITY))}


class MergeError(UntrustedInputError, ValueError):
    """Results that cannot be joined; the message is one line naming the file and the fix."""


def bridge_identity(run: RunResult) -> str:
    """What says two results are of the same bridge: the ``--bridge`` spec they ran against
    (results written before it was recorded: the host's own name for its bridge)."""
    if run.bridge:
        return run.bridge
    return f"{run.host.impl} ({run.host.bridge})".strip()


def _shard(value: str) -> tuple[int, int] | None:
    index, _, total = value.partition("/")
    return (int(index), int(total)) if index.isdigit() and total.isdigit() else None


def _check_shards(named: Sequence[tuple[str, RunResult]]) -> None:
    shards = [(name, _shard(run.shard)) for name, run in named]
    given = [(name, shard) for name, shard in shards if shard is not None]
    if not given:
        return
    totals = {shard[1] for _, shard in given}
    if len(totals) > 1 or len(given) != len(shards):
        listed = ", ".join(f"{name} ({run.shard or 'not sharded'})" for name, run in named)
        raise MergeError(f"the results are not shards of one split ({listed}); give the "
                         "results of one 'run --shard K/N' per K, with the same N")
    total = totals.pop()
    seen = sorted(shard[0] for _, shard in given)
    missing = sorted(set(range(1, total + 1)) - set(seen))
    if missing:
        raise MergeError(f"shard {', '.join(f'{k}/{total}' for k in missing)} missing (got "
                         f"{', '.join(f'{k}/{total}' for k in seen)}); give every shard's "
                         "result")


def merge_runs(named: Sequence[tuple[str, RunResult]]) -> RunResult:
    """Join ``(file name, result)`` pairs; :class:`MergeError` when they do not belong
    together."""
    if not named:
        raise MergeError("no result to merge (give the shards' 'run --json' files)")
    first_name, first = named[0]
    owners: dict[tuple[str, str], str] = {}
    for name, run in named:
        if bridge_identity(run) != bridge_identity(first):
            raise MergeError(f"{name} is of bridge {bridge_identity(run)!r}, {first_name} of "
                             f"{bridge_identity(first)!r}; merge one bridge's shards at a time "
                             "(compare bridges with 'palace-conformance matrix --from')")
        if run.level != first.level:
            raise MergeError(f"{name} was judged at the {run.level} level, {first_name} at "
                             f"the {first.level} level; merge runs of one --level")
        if run.slack_factor != first.slack_factor:
            raise MergeError(f"{name} was judged with --slack-factor {run.slack_factor:g}, "
                             f"{first_name} with {first.slack_factor:g}; merge runs of one "
                             "--slack-factor")
        for result in run.results:
            key = (result.scenario, result.transport)
            if key in owners:
                raise MergeError(f"{result.scenario} [{result.transport}] is in both "
                                 f"{owners[key]} and {name}; give each shard once")
            owners[key] = name
    _check_shards(named)
    results = sorted((r for _, run in named for r in run.results),
                     key=lambda r: (r.scenario, _RANK.get(r.transport, 99)))
    stale = list(dict.fromkeys(line for _, run in named for line in run.stale_baseline))
    not_run = sorted({key for _, run in named for key in run.not_run},
                     key=lambda k: (k[0], _RANK.get(k[1], 99)))
    starts = [run.started_at for _, run in named if run.started_at]
    return RunResult(host=first.host, results=results, started_at=min(starts, default=""),
                     duration_ms=max(run.duration_ms for _, run in named),
                     stale_baseline=stale, level=first.level, not_run=not_run,
                     bridge=first.bridge, slack_factor=first.slack_factor,
                     profile=first.profile,
                     start_note=next((run.start_note for _, run in named if run.start_note),
                                     ""))
