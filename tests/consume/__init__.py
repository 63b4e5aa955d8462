"""Consuming streams: ExpandChunks, Verify, fold/Consumer, history, events lookups."""
