"""The simulated backend: plausible, deterministic entries from a persona, offline.

Given the same request it always writes the same entry: its random choices
are seeded by the client_key. It reads the prompt context's records it is given
and builds on it, as a real agent would:

* **recur** (about half the time): it returns to the theme of a recent entry
  in the context and cites that entry in ``signals.continuity_refs``, so
  chains of continuity form;
* **drift**: it moves from a recent entry's theme to a neighbouring one the
  persona lists in ``drifts_to`` (still citing the entry it drifted from);
* **new**: it picks a theme the context does not show, weighted by the
  persona's interests, whose weights rise and fall over a few weeks.

Novelty follows the mode: low when recurring, middling when drifting, high
for something new.
"""

from __future__ import annotations

import hashlib
import math
import random
from datetime import datetime
from typing import Any, Final

from journal import ContextRecord
from runner.backends.base import ReflectionRequest
from runner.backends.usage import Usage, estimate_tokens
from runner.errors import BackendError
from runner.settings.persona import Interest, Persona

__all__ = ["SimulatedBackend"]

_DRIFT_PERIOD_DAYS: Final = 24.0
_MODE_WEIGHTS: Final = (("recur", 0.5), ("drift", 0.3), ("new", 0.2))


def _seed(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def _when(record: ContextRecord) -> str:
    """A human 'when' for a context record, e.g. 'Tuesday evening'."""
    try:
        moment = datetime.fromisoformat(record.ts)
    except ValueError:
        return "earlier"
    part = "night" if moment.hour < 5 else "morning" if moment.hour < 12 else "afternoon" if moment.hour < 18 else "evening"
    return f"{moment.strftime('%A')} {part}"


class SimulatedBackend:
    """Writes entries from a persona, building on the context it is given."""

    name = "simulated"

    def __init__(self, persona: Persona) -> None:
        self.persona = persona

    def _weights(self, day: float) -> list[float]:
        """Interest weights on *day*: each theme waxes and wanes on its own phase."""
        weights = []
        for interest in self.persona.interests:
            phase = (_seed(interest.theme) % 1000) / 1000
            weights.append(interest.weight * (1.0 + 0.85 * math.sin(2 * math.pi * (day / _DRIFT_PERIOD_DAYS + phase))))
        return [max(weight, 0.05) for weight in weights]

    def _pick_interest(self, rng: random.Random, day: float, exclude: set[str]) -> Interest:
        candidates = [(i, w) for i, w in zip(self.persona.interests, self._weights(day), strict=True) if i.theme not in exclude]
        if not candidates:
            candidates = list(zip(self.persona.interests, self._weights(day), strict=True))
        return rng.choices([c[0] for c in candidates], weights=[c[1] for c in candidates])[0]

    def reflect(self, request: ReflectionRequest) -> dict[str, Any]:
        """Write the entry fields for *request* (deterministic for a client_key and context)."""
        rng = random.Random(_seed(request.client_key))  # noqa: S311 - seeded so that a slot's entry is reproducible; nothing secret
        try:
            moment = datetime.fromisoformat(request.scheduled)
        except ValueError:
            raise BackendError(self.name, f"scheduled time {request.scheduled!r} is not ISO 8601") from None
        day = moment.toordinal() + moment.hour / 24
        records = [r for r in request.context.records if r.kind != "digest" and self.persona.interest(r.theme)]
        recent = records[-4:]
        mode = rng.choices([m for m, _ in _MODE_WEIGHTS], weights=[w for _, w in _MODE_WEIGHTS])[0] if recent else "new"
        refs: list[str] = []
        anchor: ContextRecord | None = None
        if mode in ("recur", "drift"):
            anchor = rng.choices(recent, weights=[1 + 2 * n for n in range(len(recent))])[0]
            anchor_interest = self.persona.interest(anchor.theme)
            assert anchor_interest is not None  # noqa: S101 - narrows the type: records were filtered to the persona's themes
            refs.append(anchor.id)
            if mode == "drift" and anchor_interest.drifts_to:
                interest = self.persona.interest(rng.choice(anchor_interest.drifts_to)) or anchor_interest
            else:
                mode = "recur"
                interest = anchor_interest
                older = [r for r in records if r.theme == interest.theme and r.id != anchor.id]
                if older and rng.random() < 0.35:
                    refs.append(older[-1].id)
        else:
            interest = self._pick_interest(rng, day, {r.theme for r in records})
        novelty = {"recur": rng.uniform(0.08, 0.35), "drift": rng.uniform(0.4, 0.65), "new": rng.uniform(0.7, 0.95)}[mode]
        focus = rng.choice(interest.focus)
        voice = self._voice(rng, request, mode, interest, focus, anchor)
        mood = anchor.mood if anchor and anchor.mood and rng.random() < 0.4 else rng.choice(self.persona.moods)
        tags = rng.sample(list(interest.tags), k=min(2, len(interest.tags)))
        signals: dict[str, Any] = {"focus": focus, "novelty": round(novelty, 3)}
        if refs:
            signals["continuity_refs"] = refs
        # A deterministic estimate of what a model would have used: what it was given in, what it wrote out.
        given = request.instructions + request.question + request.context.text
        request.report_usage(Usage(estimate_tokens(given), estimate_tokens(voice)), self.name)
        return {"voice": voice, "theme": interest.theme, "tags": tags, "mood": mood, "signals": signals}

    def _voice(
        self, rng: random.Random, request: ReflectionRequest, mode: str, interest: Interest, focus: str, anchor: ContextRecord | None
    ) -> str:
        persona = self.persona
        sentences = []
        if persona.openers and rng.random() < 0.5:
            sentences.append(rng.choice(persona.openers))
        if mode == "recur" and anchor is not None:
            sentences.append(f"Back to {interest.theme}: the thread from {_when(anchor)} is still open, {focus}.")
        elif mode == "drift" and anchor is not None:
            sentences.append(f"What was {anchor.theme} on {_when(anchor)} has slid into {interest.theme}; now it is {focus}.")
        else:
            sentences.append(f"Something new on my mind: {interest.theme}, {focus}.")
        place = rng.choice(persona.places)
        sentences.append(f"{rng.choice(interest.images).capitalize()}, at {place}.")
        if request.kind == "evening":
            other = rng.choice([i for i in persona.interests if i is not interest] or [interest])
            sentences.append(f"The day was mostly {rng.choice(persona.moods)} work around {rng.choice(other.focus)}.")
            sentences.append(f"Tomorrow I want to test {rng.choice(interest.focus)} against {rng.choice(other.images)}.")
        if persona.closers and rng.random() < 0.6:
            sentences.append(rng.choice(persona.closers))
        return " ".join(sentences)
