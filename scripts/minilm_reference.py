"""Fixed texts and a small retrieval set used to check the shipped local embedder against sentence-transformers.

:func:`write_reference` embeds them with the reference model and writes ``tests/data/minilm_reference.npz``;
``scripts/build_local_model.py`` calls it. The arrays in the file:

- ``texts`` (str) and ``vectors`` (float32, ``(len(texts), 384)``): varied single texts;
- ``queries`` / ``query_vectors`` and ``documents`` / ``document_vectors``: the retrieval set, where query ``i``
  is meant to find document ``i``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

LONG_TEXT = " ".join(
    [
        "The deployment service exposes operations for creating, scaling, pausing and deleting application"
        " deployments across several regions, with audit logging, quota checks and approval workflows.",
    ]
    * 4
    + [
        "Each operation validates its arguments, reports progress as structured events and returns an"
        " identifier that later calls can use to poll status, fetch logs or roll the change back.",
    ]
    * 4
    + ["Finally, the tail of this text talks about bananas, which only matters if truncation is broken."] * 3
)

TEXTS: list[str] = [
    # Tool descriptions.
    "get_weather: Get the current weather and a 3-day forecast for a city.",
    "send_email(to, subject, body): Send an email message through the user's configured mail account.",
    "create_calendar_event: Create an event in the user's calendar with a title, start time, end time and guests.",
    "search_flights: Find available flights between two airports on a given date, with prices.",
    "github.create_issue - Open a new issue in a GitHub repository with a title, body and labels.",
    "sql_query: Run a read-only SQL query against the analytics warehouse and return rows as JSON.",
    "translate_text: Translate text from one language to another.",
    "resize_image(path, width, height) -> path of the resized PNG",
    "stripe_refund: Refund all or part of a charge. Requires the charge id; amount in cents is optional.",
    "kubectl_scale: Change the number of replicas of a Kubernetes deployment.",
    "read_file: Return the contents of a file in the workspace, optionally a line range.",
    "slack_post_message: Post a message to a Slack channel or direct conversation.",
    # Short user requests.
    "what's the weather in Paris tomorrow?",
    "email Bob that the meeting moved to 3pm",
    "book me a flight to Tokyo next Friday",
    "refund order 1234",
    "how many users signed up last week",
    "make this picture smaller",
    "scale the api deployment to 5 pods",
    "open a bug about the login page crashing",
    "translate 'good morning' into Spanish",
    "show me lines 10 to 40 of main.py",
    # Unicode, odd and tiny texts.
    "Wie wird das Wetter morgen in München?",
    "明日の東京の天気は？",
    "Envoyer un e-mail à Zoë à propos du café ☕",
    "Рассчитать налог на доход",
    "🙂🚀🔥",
    "naïve café façade résumé",
    "a",
    " ",
    "",
    "?",
    "OK",
    "x" * 300,
    # Longer texts, one beyond the 256-token limit.
    "Use this tool when the user wants to know about shipping: it returns carrier, tracking number, estimated"
    " delivery date and the current location of a parcel. Do not use it for returns or refunds.",
    "Lists all open pull requests in a repository, filtered by author, label or base branch, sorted by last update,"
    " including review status, CI checks and mergeability for each pull request.",
    LONG_TEXT,
    "The quick brown fox jumps over the lazy dog.",
    "DELETE FROM users WHERE id = 42; -- careful",
    "def add(a: int, b: int) -> int:\n    return a + b",
]

QUERIES: list[str] = [
    "will it rain in Berlin this weekend",
    "send an email to Alice with the quarterly report attached",
    "put a dentist appointment on my agenda for Monday 9am",
    "cheapest plane ticket from Boston to Denver",
    "file a bug in our repo about the broken signup form",
    "run a SQL query counting the rows of the orders table",
    "say 'thank you very much' in Japanese",
    "give my customer their money back for charge ch_123",
    "bump the web service to ten replicas",
    "read the file config.yaml and show me its text",
    "post a message in the Slack channel #ops",
    "where is my package right now",
]

DOCUMENTS: list[str] = [
    "get_weather: Get the current weather and forecast for a location.",
    "send_email: Send an email to a recipient with a subject and body.",
    "create_calendar_event: Add an event to the user's calendar at a given date and time.",
    "search_flights: Search airline flights between two cities and compare fares.",
    "github_create_issue: Create an issue in a GitHub repository.",
    "run_sql: Execute a SQL query on the analytics database and return the result rows.",
    "translate_text: Translate a piece of text into a target language.",
    "issue_refund: Refund a payment charge to the customer, fully or partially.",
    "scale_deployment: Set the replica count of a Kubernetes deployment.",
    "read_file: Read a file from the workspace and return its text.",
    "post_slack_message: Post a message to a Slack channel.",
    "track_shipment: Get the tracking status and location of a parcel from its tracking number.",
]


def embed(model: Any, texts: list[str]) -> np.ndarray:
    """Embed ``texts`` with a sentence-transformers ``model``: float32, rows L2-normalised."""
    vectors = model.encode(texts, batch_size=16, normalize_embeddings=True, convert_to_numpy=True)
    return np.asarray(vectors, dtype=np.float32)


def write_reference(model: Any, path: Path) -> dict[str, np.ndarray]:
    """Embed every reference text with ``model``, write them all to ``path`` (npz) and return the arrays."""
    arrays = {
        "texts": np.array(TEXTS, dtype=str),
        "vectors": embed(model, TEXTS),
        "queries": np.array(QUERIES, dtype=str),
        "query_vectors": embed(model, QUERIES),
        "documents": np.array(DOCUMENTS, dtype=str),
        "document_vectors": embed(model, DOCUMENTS),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)
    return arrays
