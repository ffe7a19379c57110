"""Declared normalisation rules (rules.json): what may differ between two honest runs and why.

Four kinds, applied in this order to every string and value of an observation:

- ``world``: the session's own paths (HOME, palace, mine source, the launchers' directory)
  become ``<HOME>``, ``<PALACE>``, ``<SOURCE>``, ``<BIN>``;
- ``pattern``: a regular expression replaced in every string, object keys included (ids, PIDs,
  ports, timestamps);
- ``keys``: the value under any of the named object keys is replaced (scores, clocks);
- ``unordered``: a list under one of the named keys whose every item is an object carrying
  one of ``item_keys`` is sorted (a ranking's order, not its members);
- ``selection``: a list under one of the named keys whose every item is an object carrying
  one of ``item_keys`` keeps its length and each item's keys, every value masked (which rows a
  ranker picks, not how many nor their shape);
- ``ties-at-cut``: a list under one of the named keys, as long as its ``cut`` and every item
  scored under its one ``item_keys`` key: the rows scored as the lowest (the tie the cut ran
  through) have their ``identity_keys`` masked (which of equally near rows an index returned
  last, not their text or count). It reads the raw scores, so it runs before the others.

A rule masks a value, never a whole answer: a tool that answers differently still differs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from palace_conformance.errors import UntrustedInputError

RULES_FILE = Path(__file__).with_name("rules.json")
KINDS = ("world", "pattern", "keys", "unordered", "selection", "ties-at-cut")


class RulesError(UntrustedInputError):
    """The rules file is not valid; one line naming the rule and the problem."""


@dataclass(frozen=True)
class Rule:
    """One declared rule: its id, what it masks and why (both shown in reports)."""

    id: str
    kind: str
    masks: str
    why: str
    pattern: re.Pattern[str] | None = None
    replacement: str = ""
    keys: frozenset[str] = frozenset()
    item_keys: frozenset[str] = frozenset()
    identity_keys: frozenset[str] = frozenset()
    cut: int = 0


def parse_rules(data: Mapping[str, Any]) -> list[Rule]:
    rules: list[Rule] = []
    for index, raw in enumerate(data.get("rules", [])):
        rule_id = raw.get("id") or f"#{index}"
        kind = raw.get("kind")
        if kind not in KINDS:
            raise RulesError(f"rule {rule_id}: kind must be one of {', '.join(KINDS)}")
        if not raw.get("masks") or not raw.get("why"):
            raise RulesError(f"rule {rule_id}: every rule says what it masks and why "
                             "('masks' and 'why')")
        pattern = None
        if kind == "pattern":
            try:
                pattern = re.compile(raw["pattern"])
            except (KeyError, re.error) as exc:
                raise RulesError(f"rule {rule_id}: bad or missing 'pattern' ({exc})") from None
        if kind in ("keys", "unordered", "selection", "ties-at-cut") and not raw.get("keys"):
            raise RulesError(f"rule {rule_id}: a {kind} rule names its 'keys'")
        if kind in ("unordered", "selection", "ties-at-cut") and not raw.get("item_keys"):
            raise RulesError(f"rule {rule_id}: an {kind} rule names its 'item_keys'")
        if kind == "ties-at-cut" and not _ties_at_cut_fields(raw):
            raise RulesError(f"rule {rule_id}: a ties-at-cut rule names one score in "
                             "'item_keys', its 'identity_keys' and a whole 'cut' >= 1")
        rules.append(Rule(id=rule_id, kind=kind, masks=raw["masks"], why=raw["why"],
                          pattern=pattern, replacement=raw.get("replacement", "<MASKED>"),
                          keys=frozenset(raw.get("keys", [])),
                          item_keys=frozenset(raw.get("item_keys", [])),
                          identity_keys=frozenset(raw.get("identity_keys", [])),
                          cut=int(raw.get("cut", 0))))
    ids = [rule.id for rule in rules]
    if len(set(ids)) != len(ids):
        raise RulesError("rule ids must be unique")
    return rules


def _ties_at_cut_fields(raw: Mapping[str, Any]) -> bool:
    cut = raw.get("cut")
    return (len(raw.get("item_keys", [])) == 1 and bool(raw.get("identity_keys"))
            and isinstance(cut, int) and not isinstance(cut, bool) and cut >= 1)


def load_rules(path: Path = RULES_FILE) -> list[Rule]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RulesError(f"cannot read the rules file {path}: {exc}") from None
    return parse_rules(data)


class Normaliser:
    """Applies the rules to one observation; ``fired`` collects the ids of rules that changed
    something (a point explained by rules names them)."""

    def __init__(self, rules: list[Rule], world: Mapping[str, str] | None = None) -> None:
        self.rules = rules
        # longest path first: the palace sits inside the world root
        self.world = sorted(((name, path) for name, path in (world or {}).items() if path),
                            key=lambda item: -len(item[1]))
        self.fired: set[str] = set()

    def _string(self, text: str) -> str:
        for rule in self.rules:
            before = text
            if rule.kind == "world":
                for name, path in self.world:
                    text = text.replace(path, name)
            elif rule.kind == "pattern" and rule.pattern is not None:
                text = rule.pattern.sub(rule.replacement, text)
            if text != before:
                self.fired.add(rule.id)
        return text

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self._string(value)
        if isinstance(value, list):
            return [self.value(item) for item in value]
        if isinstance(value, dict):
            out: dict[str, Any] = {}
            for key, item in value.items():
                # a key can be a value too (mesh_peers keys its profiles by replica id)
                shown = self._string(key) if isinstance(key, str) else key
                rule = next((r for r in self.rules if r.kind == "keys" and key in r.keys), None)
                if rule is not None and item is not None and not isinstance(item, (dict, list)):
                    if item != rule.replacement:
                        self.fired.add(rule.id)
                    out[shown] = rule.replacement
                else:
                    out[shown] = self._ranked(key, self.value(self._untied(key, item)))
            return out
        return value

    def _untied(self, key: Any, value: Any) -> Any:
        """A full list under a ``ties-at-cut`` rule's key with the identities of its
        lowest-scored rows masked; anything else as it is."""
        for rule in self.rules:
            if (rule.kind != "ties-at-cut" or key not in rule.keys
                    or not isinstance(value, list) or len(value) != rule.cut):
                continue
            (score,) = rule.item_keys
            scores = [item.get(score) if isinstance(item, dict) else None for item in value]
            numbers = [s for s in scores if isinstance(s, (int, float)) and not isinstance(s, bool)]
            if len(numbers) != len(value):
                continue
            lowest = min(numbers)
            masked = [{k: (rule.replacement if k in rule.identity_keys and s == lowest else v)
                       for k, v in item.items()} for item, s in zip(value, scores, strict=True)]
            if masked != value:
                self.fired.add(rule.id)
            return masked
        return value


    def _ranked(self, key: Any, value: Any) -> Any:
        """A ranked list under an ``unordered`` rule's key, sorted (under a ``selection``
        rule's key, its items' values masked); anything else as it is."""
        for rule in self.rules:
            if (rule.kind in ("unordered", "selection") and key in rule.keys
                    and isinstance(value, list) and value
                    and all(isinstance(item, dict) and rule.item_keys & item.keys()
                            for item in value)):
                if rule.kind == "selection":
                    masked = [{k: rule.replacement for k in sorted(item)} for item in value]
                    if masked != value:
                        self.fired.add(rule.id)
                    return masked
                ordered = sorted(value, key=lambda item: json.dumps(item, sort_keys=True))
                if ordered != value:
                    self.fired.add(rule.id)
                return ordered
        return value


def normalise(observation: Any, rules: list[Rule],
              world: Mapping[str, str] | None = None) -> tuple[Any, set[str]]:
    """The observation with every rule applied, and the ids of the rules that changed it."""
    normaliser = Normaliser(rules, world)
    return normaliser.value(observation), normaliser.fired
