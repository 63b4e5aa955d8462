"""The inspector (agui_pipes.inspector): its API, model, command and page."""
