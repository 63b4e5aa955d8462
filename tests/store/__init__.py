"""Event logs (agui_pipes.store): the backends, ids and the run recorder."""
