"""A Responses namespace of two tools, shared by the packing and CLI tests of budgets counted per format."""

from __future__ import annotations

SCHEMA = {"type": "object", "properties": {"query": {"type": "string", "description": "What to look for."}}}
CRM = {  # a Responses namespace: its description goes to the model once, around its tools
    "type": "namespace",
    "name": "crm",
    "description": "Customer records: leads, accounts and their history, kept by the sales team.",
    "tools": [
        {"type": "function", "name": "search_customers", "description": "Search customers.", "parameters": SCHEMA},
        {"type": "function", "name": "create_lead", "description": "Create a sales lead.", "parameters": SCHEMA},
    ],
}
