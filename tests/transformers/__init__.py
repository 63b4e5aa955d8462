"""The built-in stages (agui_pipes.transformers), one module or more per stage."""
