"""The run driver (agui_pipes.driver): agents, context, cancellation, backpressure."""
