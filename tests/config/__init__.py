"""Chain files (agui_pipes.config): loading, schema, registry, plugins, bounds."""
