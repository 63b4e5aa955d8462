"""The Relay (agui_pipes.relay): batches, bypass and hooks, equal to the event-by-event path."""
