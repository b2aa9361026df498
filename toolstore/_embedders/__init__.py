"""Embedders: the abstract interface, a deterministic hashing double, and real models."""
