"""The wire's codecs (agui_pipes.codecs): decode, encode, SSE/NDJSON framing, the fast path."""
