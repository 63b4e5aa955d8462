"""What the built-in stages share, kept apart so ``agui_pipes.transformers`` holds only stages.

Each module here holds one piece of protocol knowledge or bookkeeping that two or
more stages (or a stage and its command-line or server counterpart) need: the
client's chunk lanes, who owns a message, pruning by JSON Pointers, the Repair
report types, and so on. Nothing here is public: stages re-export what users see.

Layering: this package sits beside and below the stages. It builds on the
protocol model and the pipeline core (``_chunks``, ``_patch``, ``_construct``,
``_transformer`` ...) and never imports a stage module, the wire
(``codecs``, ``relay``, ``_fastpath``) or anything that sits on top (``server``,
``store``, ``driver``, ``config``, the CLI) at module level.
"""
