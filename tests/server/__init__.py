"""Serving (agui_pipes.server): the endpoint, the gateway, durable runs, backpressure."""
