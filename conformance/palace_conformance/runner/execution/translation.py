"""A run's translation between the scenarios' names and the bridge's, as one object.

Without a profile (or for a scenario whose subject is the fake) the translation is the identity:
the scenario runs as written and every reply is judged as it came. With one, each method hands
the work to :mod:`.profile_edges` (the names, channels and envelopes) and :mod:`.pace` (the
knobs the bridge lacks). :class:`TranslatedDriver` wraps the driver client in it, so the run
asks for an op in the catalogue's names and reads the reply in them, whichever bridge answers:
the run never asks whether there is a profile.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from palace_conformance.runner.execution import pace, profile_edges
from palace_conformance.runner.execution.driver import DriverClient, DriverFailure, Reply
from palace_conformance.runner.execution.world import World
from palace_conformance.runner.profile import Profile
from palace_conformance.runner.results import StepRecord
from palace_conformance.runner.verdict.startup import EXTRA_TOOLS_NOTE
from palace_conformance.scenarios.model import Scenario


class Translation:
    """The identity: a bridge that names everything as the seed does."""

    #: the tools a ``"catalogue"`` expectation stands for; None: the whole catalogue
    catalogue: list[dict[str, Any]] | None = None
    #: where the bridge reports a palace error (profile ``errors.channel``); None: the seed's
    errors_channel: str | None = None
    #: the capabilities a profile claims, judged in place of the host's; None: the host's
    claimed_capabilities: tuple[str, ...] | None = None

    def __init__(self) -> None:
        self.extra_tools: set[str] = set()  # tools beyond the catalogue that a profile allows

    def adapt(self, scenario: Scenario,
              transport: str) -> tuple[Scenario, pace.Paced, str | None]:
        """The scenario as this bridge can be given it, at the bridge's pace (:meth:`paced`: the
        same object, built once), and why it cannot be given it (or None)."""
        return scenario, pace.Paced(scenario), None

    def paced(self, scenario: Scenario) -> pace.Paced:
        """The scenario with the pace values the bridge lacks dropped (pace.py)."""
        return pace.Paced(scenario)

    def prepare(self, world: World) -> str | None:
        """The bridge's knobs, files and programs put in the world; why it cannot run, or None."""
        return None

    def outgoing(self, op: str, request: dict[str, Any]) -> dict[str, Any]:
        """A driver request with every tool it calls in the bridge's names."""
        return request

    def result(self, op: str, result: Any) -> Any:
        """A reply's result as the scenarios judge it."""
        return result

    def effects(self, effects: list[dict[str, Any]],
                system_prompt: tuple[str, str] | None = None) -> list[dict[str, Any]]:
        """Effects as the scenarios name them."""
        return effects

    def tools(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Registered tools in catalogue names; the extras a profile allows set aside."""
        return tools

    def set_aside_read_retries(self, scenario: Scenario, transport: str,
                               steps: list[StepRecord], records: list[dict[str, Any]],
                               offsets: list[int]) -> list[str]:
        """The reads the bridge retried, shown as the crash they were; one note each."""
        return []

    def other_servers(self, records: list[dict[str, Any]],
                      offsets: list[int] | None = None) -> list[dict[str, Any]]:
        """The records of the servers other than the full one, taken out of ``records``."""
        return []

    def notes(self, aside: Sequence[Mapping[str, Any]], alive: int) -> list[str]:
        """What the translation set aside, one line each (other servers, extra tools)."""
        return []


class ProfileTranslation(Translation):
    """A bridge that differs from the seed as its profile says (runner/profile.py)."""

    def __init__(self, profile: Profile) -> None:
        super().__init__()
        self.profile = profile
        self.catalogue = profile_edges.offered_catalogue(profile)
        self.errors_channel = profile.errors_channel
        self.claimed_capabilities = profile.capabilities

    def adapt(self, scenario: Scenario,
              transport: str) -> tuple[Scenario, pace.Paced, str | None]:
        edited, why = profile_edges.edited(self.profile, scenario, transport)
        if why:
            return scenario, pace.Paced(scenario), why
        paced = pace.pace(self.profile, scenario, edited)  # the one build of the edited data
        return paced.scenario, paced, profile_edges.unoffered(self.profile, paced.scenario,
                                                              transport)

    def paced(self, scenario: Scenario) -> pace.Paced:
        return pace.pace(self.profile, scenario)

    def prepare(self, world: World) -> str | None:
        return profile_edges.prepare(self.profile, world)

    def outgoing(self, op: str, request: dict[str, Any]) -> dict[str, Any]:
        return profile_edges.outgoing_request(self.profile, op, request)

    def result(self, op: str, result: Any) -> Any:
        return profile_edges.incoming_result(self.profile, op, result)

    def effects(self, effects: list[dict[str, Any]],
                system_prompt: tuple[str, str] | None = None) -> list[dict[str, Any]]:
        return profile_edges.incoming_effects(self.profile, effects, system_prompt)

    def tools(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        shown, extras = profile_edges.incoming_tools(
            self.profile, [tool for tool in tools if isinstance(tool, dict)])
        self.extra_tools.update(extras)
        return shown

    def set_aside_read_retries(self, scenario: Scenario, transport: str,
                               steps: list[StepRecord], records: list[dict[str, Any]],
                               offsets: list[int]) -> list[str]:
        return profile_edges.set_aside_read_retries(self.profile, scenario, transport, steps,
                                                    records, offsets)

    def other_servers(self, records: list[dict[str, Any]],
                      offsets: list[int] | None = None) -> list[dict[str, Any]]:
        return profile_edges.other_servers(self.profile, records, offsets)

    def notes(self, aside: Sequence[Mapping[str, Any]], alive: int) -> list[str]:
        notes = []
        if aside:
            notes.append(profile_edges.servers_note(self.profile, [dict(r) for r in aside],
                                                    alive))
        if self.extra_tools:
            notes.append(EXTRA_TOOLS_NOTE + ", ".join(sorted(self.extra_tools)))
        return notes


def translation_for(profile: Profile | None, subject: str = "bridge") -> Translation:
    """A fresh translation for one run: the profile's for a bridge, the identity without one or
    when the fake itself is the subject."""
    if profile is None or subject == "fake":
        return Translation()
    return ProfileTranslation(profile)


def system_prompt(op: str, request: Mapping[str, Any], result: Any) -> tuple[str, str] | None:
    """(the system prompt the event carried, the one the bridge returned) for
    ``before_agent_start``: where a bridge that wakes the agent through it left the wake-up."""
    if op != "event" or request.get("name") != "before_agent_start":
        return None
    returned = result.get("system_prompt") if isinstance(result, dict) else None
    if not isinstance(returned, str):
        return None
    payload = request.get("payload")
    given = payload.get("systemPrompt") if isinstance(payload, dict) else None
    return (given if isinstance(given, str) else ""), returned


class TranslatedDriver:
    """The driver client as the scenarios see it: a request goes out in the bridge's names
    (:meth:`outgoing`), its reply comes back in the catalogue's (result, effects and, for
    ``list_tools``, the tools). The host's lifecycle is the client's own."""

    def __init__(self, client: DriverClient, translation: Translation) -> None:
        self.client = client
        self.translation = translation

    def outgoing(self, op: str, fields: dict[str, Any]) -> dict[str, Any]:
        """The request for ``op`` as it goes to the bridge."""
        return self.translation.outgoing(op, fields)

    def request(self, op: str, sent: dict[str, Any], *, deadline_ms: float) -> Reply:
        """Send ``sent`` (an :meth:`outgoing` request); the reply as the scenarios judge it."""
        reply = self.client.request(op, sent, deadline_ms=deadline_ms)
        reply.result = self.translation.result(op, reply.result)
        reply.effects = self.translation.effects(list(reply.effects),
                                                 system_prompt(op, sent, reply.result))
        if op == "list_tools" and isinstance(reply.result, list):
            reply.result = self.translation.tools(reply.result)
        return reply

    @property
    def dead(self) -> DriverFailure | None:
        return self.client.dead

    def start(self) -> DriverClient:
        return self.client.start()

    def hello(self, deadline_ms: float) -> dict[str, Any]:
        return self.client.hello(deadline_ms)

    def wait_ended(self, op: str, deadline_ms: float) -> float:
        return self.client.wait_ended(op, deadline_ms)

    def stderr_text(self) -> str:
        return self.client.stderr_text()

    def close(self) -> int | None:
        return self.client.close()
