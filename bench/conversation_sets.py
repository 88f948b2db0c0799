"""Synthetic two-person conversations with known evidence turns, stored as the held-out harness stores LoCoMo (a training set, not a test).

The learned reranker must not fit the two conversations of the LoCoMo dev
split, so its training script also learns from conversations made here. Each
is a chat between two people over several sessions days apart, in the
layout of ``retrieval_sets.load_locomo`` (``journal``): one ``note`` a turn,
voice ``<speaker> said, "<text>"``, theme ``conversation on <date>``, ``ts``
the session's time plus the turn's index in seconds, ``signals.continuity_refs``
naming the previous turn of the session.

Within the small talk, each session carries a few exchanges about one topic
of a speaker's life, and each exchange is the evidence of one question:

- *asked*: one speaker asks about the topic in the question's words, the other
  answers in other words (the answer is the evidence; it may come a turn
  later, after an interjection, and may run on in a second turn);
- *told*: a speaker says it in the question's words (the evidence matches them);
- *when*: a speaker tells when something happened; the question asks when;
- *two sessions*: the question needs a fact of each of two sessions.

Every topic's words also come up in turns that answer nothing (a remark on
someone else's trip, a question put off), so a question's words point at
more than its evidence. Entry ids are opaque; nothing in an entry names its
question. Everything is deterministic for a seed.
"""

from __future__ import annotations

import hashlib
import random
from datetime import UTC, datetime, timedelta
from typing import Any, Final

NAMES: Final = (
    "Maya",
    "Jonas",
    "Priya",
    "Tomas",
    "Leila",
    "Oskar",
    "Ines",
    "Ravi",
    "Hana",
    "Felix",
    "Nora",
    "Dario",
    "Yuki",
    "Selin",
    "Marek",
    "Ada",
    "Bruno",
    "Chiara",
    "Emil",
    "Freya",
)

#: (topic words for the asker, the question's words, answers in other words, a remark that answers nothing, when-told line).
#: ``{who}`` is the person the question is about; ``{value}`` one of the answer's values.
TOPICS: Final = (
    (
        "How did the pottery class go?",
        "What did {who} make in pottery class?",
        (
            "It went great, I finished a {value} and the teacher put it on the shelf by the window!",
            ("blue bowl", "tall vase", "little teapot"),
        ),
        "My cousin wants to try a pottery class someday.",
        "I signed up for the pottery class",
    ),
    (
        "Did you end up adopting a pet?",
        "What pet did {who} adopt?",
        (
            "Yes! We brought home a {value} from the shelter, she sleeps on my feet every night.",
            ("grey kitten", "old beagle", "rescue rabbit"),
        ),
        "The shelter near us was asking for pet food donations.",
        "we adopted our pet from the shelter",
    ),
    (
        "What book are you reading these days?",
        "What book was {who} reading?",
        ("I just started {value}, I can't put it down on the train.", ("Dune", "Middlemarch", "The Overstory")),
        "I never have time for a book these days.",
        "I finished the book club novel",
    ),
    (
        "Where did you go on your vacation?",
        "Where did {who} go on vacation?",
        ("We spent ten days in {value}, the food alone was worth the flight.", ("Lisbon", "Kyoto", "Oaxaca")),
        "Vacation feels so far away right now.",
        "we got back from vacation",
    ),
    (
        "How is the new job treating you?",
        "What is {who}'s new job?",
        ("I love it, I'm a {value} now and my team is so kind.", ("nurse at the clinic", "sous chef", "junior architect")),
        "Job hunting is exhausting, my brother says.",
        "I started the new job",
    ),
    (
        "What instrument are you learning?",
        "What instrument is {who} learning?",
        ("I picked up the {value}, my fingers hurt but I practise every evening.", ("cello", "banjo", "trumpet")),
        "My neighbour's kid is learning an instrument too, loudly.",
        "I had my first music lesson",
    ),
    (
        "Did you run the race last weekend?",
        "What race did {who} run?",
        ("I did, the {value}, and I finished without walking once!", ("city half marathon", "trail 10k", "charity 5k")),
        "I'd never run a race, my knees would quit.",
        "I ran the race",
    ),
    (
        "What are you growing in your garden?",
        "What is {who} growing in the garden?",
        ("Mostly {value}, the balcony smells wonderful in the morning.", ("tomatoes and basil", "strawberries", "sunflowers")),
        "Our garden is just weeds at this point.",
        "I planted the garden",
    ),
    (
        "What did you cook for the party?",
        "What did {who} cook for the party?",
        ("I made {value} and there wasn't a crumb left by midnight.", ("a huge paella", "lemon tarts", "vegetable lasagna")),
        "I always end up washing dishes at every party.",
        "we threw the party",
    ),
    (
        "Which concert did you see?",
        "Which concert did {who} go to?",
        ("We saw {value} at the open-air stage, I lost my voice singing along.", ("Radiohead", "a jazz trio", "the symphony orchestra")),
        "Concert tickets are so expensive now.",
        "I went to the concert",
    ),
    (
        "How is your painting coming along?",
        "What is {who} painting?",
        (
            "Slowly! It's a {value}, I keep fixing the light on the water.",
            ("harbour at dusk", "portrait of my grandmother", "field of poppies"),
        ),
        "I can't even paint a wall straight.",
        "I started the painting",
    ),
    (
        "What car did you buy in the end?",
        "What car did {who} buy?",
        ("We went with a {value}, it's perfect for the kids' gear.", ("used Volvo wagon", "small electric hatchback", "red pickup")),
        "Car prices are wild, my dad keeps complaining.",
        "we bought the car",
    ),
    (
        "What course are you taking at the college?",
        "What course is {who} taking?",
        ("An evening class in {value}, the homework is harder than I expected.", ("Spanish", "accounting", "astronomy")),
        "The college parking is always full.",
        "I enrolled in the course",
    ),
    (
        "Where did you move to?",
        "Where did {who} move?",
        ("We found a flat in {value}, there's a bakery right downstairs.", ("the old town", "a village by the lake", "the north side")),
        "Moving boxes are still stacked in my hallway from years ago.",
        "we moved",
    ),
    (
        "What did you get for your birthday?",
        "What did {who} get for their birthday?",
        ("My partner surprised me with {value}, I nearly cried.", ("a vintage camera", "a hot air balloon ride", "a record player")),
        "Birthdays make me feel old.",
        "I celebrated my birthday",
    ),
    (
        "How did the volunteering go?",
        "Where does {who} volunteer?",
        ("I help out at the {value} every Saturday, it fills my heart.", ("food bank", "animal rescue", "children's library")),
        "Volunteering is on my list, someday.",
        "I started volunteering",
    ),
    (
        "What game are you playing lately?",
        "What game has {who} been playing?",
        ("I've been hooked on {value}, I stay up way too late.", ("chess online", "a farming sim", "board games with friends")),
        "I was never good at any game.",
        "I started playing the game",
    ),
    (
        "What hike did you do?",
        "Which hike did {who} do?",
        (
            "We climbed {value}, the view from the top was unreal.",
            ("the ridge above the valley", "the volcano trail", "the coastal cliffs"),
        ),
        "My boots are too worn for a hike.",
        "we did the hike",
    ),
)

_SMALL_TALK: Final = (
    "Hey! It's been a while, how are you?",
    "I'm good, busy week but good. You?",
    "Haha, that's so true.",
    "That sounds amazing, I'm happy for you!",
    "Oh wow, really?",
    "I know, right?",
    "Same here, honestly.",
    "Thanks for asking, it means a lot.",
    "Let's catch up again soon.",
    "Take care, talk soon!",
    "The weather has been so grey lately.",
    "I've been sleeping badly, too much coffee maybe.",
    "My sister says hi, by the way.",
    "Work has been a lot this month.",
    "I love that for you.",
    "Anyway, enough about me.",
    "Did you see the news about the bridge?",
    "I'm so tired but in a good way.",
)
_INTERJECTIONS: Final = ("Oh nice, tell me more!", "No way! And?", "Ooh, and how was it?", "Wait, really? Go on.")
_RUN_ON: Final = (
    "Honestly it made my whole month, I keep showing everyone photos.",
    "I didn't expect to enjoy it this much, it's become my favourite part of the week.",
    "It was a bit scary at first but now I'm so glad I did it.",
)
_WHEN: Final = ("yesterday", "last weekend", "last Tuesday", "two days ago")


def _id(conversation: str, session: int, turn: int) -> str:
    """An opaque entry id: no question can be read off it."""
    return "s" + hashlib.sha256(f"{conversation} {session} {turn}".encode()).hexdigest()[:20]


def synthetic_conversations(count: int, *, seed: int = 3, sessions: int = 6) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """*count* conversations (each its own agent ``syn-<n>``): entries in append order and queries ``{agent, query, relevant, category}``."""
    rng = random.Random(seed)
    payloads: list[dict[str, Any]] = []
    queries: list[dict[str, Any]] = []
    for number in range(count):
        agent = f"syn-{number}"
        first, second = rng.sample(NAMES, 2)
        topics = rng.sample(range(len(TOPICS)), min(len(TOPICS), 3 * sessions))
        start = datetime(2023, 1, 1, tzinfo=UTC) + timedelta(days=rng.randrange(300), hours=rng.randrange(9, 20))
        for session in range(sessions):
            when = start + timedelta(days=session * rng.randint(3, 20))
            turns: list[tuple[str, str]] = []  # (speaker, text)
            marks: list[tuple[str, str, list[int]]] = []  # (category, question, evidence turns)

            def say(speaker: str, text: str, turns: list[tuple[str, str]] = turns) -> int:
                turns.append((speaker, text))
                return len(turns) - 1

            for _ in range(rng.randint(2, 4)):
                say(rng.choice((first, second)), rng.choice(_SMALL_TALK))
            for topic in topics[3 * session : 3 * session + 3]:
                ask, question, (answer, values), remark, told = TOPICS[topic]
                asker, teller = rng.sample((first, second), 2)
                value = rng.choice(values)
                kind = rng.choice(("asked", "asked", "asked", "told", "when"))
                if rng.random() < 0.5:  # the topic's words in a turn that answers nothing
                    say(rng.choice((first, second)), remark)
                if kind == "asked":
                    say(asker, ask)
                    if rng.random() < 0.35:
                        say(asker, rng.choice(_INTERJECTIONS))
                    evidence = [say(teller, answer.format(value=value))]
                    if rng.random() < 0.3:
                        evidence.append(say(teller, rng.choice(_RUN_ON)))
                    marks.append(("asked", question.format(who=teller), evidence))
                elif kind == "told":
                    evidence = [say(teller, f"Guess what, {told}! {answer.format(value=value).split(', ', 1)[-1]}")]
                    marks.append(("told", question.format(who=teller), evidence))
                else:
                    evidence = [say(teller, f"Oh, {rng.choice(_WHEN)} {told}, finally!")]
                    marks.append(
                        (
                            "when",
                            f"When did {teller} say {told.replace('I ', 'they ').replace('we ', 'they ').replace(' my ', ' their ').replace(' our ', ' their ')}?",
                            evidence,
                        )
                    )
                    say(asker, rng.choice(_INTERJECTIONS))
                    evidence.append(say(teller, answer.format(value=value)))
                say(rng.choice((first, second)), rng.choice(_SMALL_TALK))
            previous: str | None = None
            ids = []
            for position, (speaker, text) in enumerate(turns):
                entry_id = _id(agent, session, position)
                payload: dict[str, Any] = {
                    "id": entry_id,
                    "kind": "note",
                    "agent": agent,
                    "ts": (when + timedelta(seconds=position)).isoformat(),
                    "theme": f"conversation on {when.strftime('%-d %B, %Y')}",
                    "voice": f'{speaker} said, "{text}"',
                }
                if previous is not None:
                    payload["signals"] = {"continuity_refs": [previous]}
                previous = entry_id
                ids.append(entry_id)
                payloads.append(payload)
            for category, question, evidence in marks:
                queries.append({"agent": agent, "query": question, "category": category, "relevant": {ids[n]: 1.0 for n in evidence}})
        # Two facts of two sessions in one question: the evidence of the first and last session's first exchange.
        first_asked = next(q for q in queries if q["agent"] == agent)
        last_asked = [q for q in queries if q["agent"] == agent][-1]
        queries.append(
            {
                "agent": agent,
                "query": f"{first_asked['query'].rstrip('?')} and {last_asked['query'][0].lower()}{last_asked['query'][1:]}",
                "category": "two sessions",
                "relevant": {**first_asked["relevant"], **last_asked["relevant"]},
            }
        )
    return payloads, queries
