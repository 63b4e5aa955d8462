"""The pipeline core: the stage contract (``transformer``) and chains of stages (``chain``).

Built on ``agui_pipes._foundation`` and the protocol model; the stages in
``agui_pipes.transformers`` and everything above build on it.
"""
