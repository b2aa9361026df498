"""Adapters for agent SDKs and frameworks, each importable on its own: ``toolstore.integrations.openai``,
``.anthropic``, ``.langgraph``. Each needs its SDK only for what it says (``pip install 'toolstore[openai]'`` ...)."""
