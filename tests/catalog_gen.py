"""Generated tool catalogs for tests: seeded, varied vocabulary, identifiers in several styles."""

from __future__ import annotations

import random

from toolstore import Tool

VERBS = (
    "send create delete update list get search find schedule cancel archive export import sync merge close open assign"
).split()
OBJECTS = (
    "email message invoice payment customer ticket issue repository branch calendar event meeting file folder "
    "document page report dashboard alert incident deployment container bucket database table record contact "
    "lead deal order refund subscription channel thread comment review release"
).split()
PROVIDERS = "slack gmail github jira stripe hubspot notion aws dropbox zendesk linear salesforce".split()
FILLER = (
    "the a quickly securely for with from into by using all recent new old pending shared private public team "
    "user account project weekly daily monthly summary details status priority owner label tag remote local "
    "running stopped failed successful large small important urgent optional required default custom"
).split()


def generated_tools(n: int, seed: int = 7) -> list[Tool]:
    rng = random.Random(seed)
    tools = []
    for i in range(n):
        verb, obj, provider = rng.choice(VERBS), rng.choice(OBJECTS), rng.choice(PROVIDERS)
        style = i % 3
        name = (
            f"{verb}_{obj}_{i}"
            if style == 0
            else f"{verb}{obj.capitalize()}{i}"
            if style == 1
            else f"{verb}.{obj}.v{i}"
        )
        words = [rng.choice(FILLER + OBJECTS + VERBS) for _ in range(rng.randint(5, 40))]
        params = {
            "type": "object",
            "properties": {
                f"{rng.choice(OBJECTS)}_id": {"type": "string", "description": " ".join(rng.sample(FILLER, 4))},
                "limit": {"type": "integer", "description": "maximum number of results"},
            },
        }
        tools.append(
            Tool(
                id=f"{provider}.{name}",
                name=name,
                provider=provider,
                description=f"{verb.capitalize()} a {obj} " + " ".join(words),
                parameters=params,
                keywords=tuple(rng.sample(OBJECTS, 2)),
                expansion=" ".join(rng.sample(FILLER, rng.randint(0, 6))),
                categories=(rng.choice(["communication", "developer", "finance", "sales"]),),
            )
        )
    return tools


def generated_queries(n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    return [
        " ".join([rng.choice(VERBS), rng.choice(FILLER), rng.choice(OBJECTS), rng.choice(OBJECTS + FILLER)])
        for _ in range(n)
    ]
