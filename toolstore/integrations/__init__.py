"""Adapters for agent SDKs and frameworks, each importable on its own: ``toolstore.integrations.openai``,
``.anthropic``, ``.langgraph``. Each needs its SDK only for what it says (``pip install 'toolstore[openai]'`` ...)."""

from .._agents import aroute_messages, route_messages

__all__ = ["aroute_messages", "route_messages"]

# Shared by .openai and .anthropic, which re-export them: their reprs, tracebacks and help() name this package (where
# pickle finds them too), as toolstore's own names say `toolstore`, not the private module.
for _shared in (route_messages, aroute_messages):
    _shared.__module__ = __name__
del _shared
