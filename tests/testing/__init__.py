"""The testing kit (agui_pipes.testing): builders, assertions, strategies."""
