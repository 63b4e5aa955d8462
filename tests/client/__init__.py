"""agui_pipes.client against real servers."""
