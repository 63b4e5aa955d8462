"""Transformers and chains (TransformerChain, routing, sync helpers, aiostream)."""
