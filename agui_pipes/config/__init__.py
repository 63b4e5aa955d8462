"""Declarative chains: YAML/JSON declarations, the transformer registry, the schema.

::

    from agui_pipes.config import load_chain

    make_chain = load_chain(Path("chain.yaml"))   # validated now, pointed ConfigError if not
    chain = make_chain()                          # a fresh TransformerChain per run

The declaration format is documented in docs/yaml-reference.md (generated from
the options models in ``agui_pipes.config.options``) and the plugin protocol in
docs/writing-transformers.md.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._bounds import MAX_CHAIN_BYTES, MAX_CHAIN_DEPTH, MAX_CHAIN_NODES, MAX_CHAIN_STAGES
    from ._errors import ConfigError
    from ._loader import ChainSource, LoadedChain, StageDeclaration, load_chain
    from ._registry import (
        PLUGIN_GROUP,
        PluginWarning,
        Registry,
        TransformerSpec,
        default_registry,
    )
    from ._schema import chain_schema
else:
    from .._lazy import attach

    __getattr__, __dir__ = attach(
        __name__,
        {
            "MAX_CHAIN_BYTES": "._bounds",
            "MAX_CHAIN_DEPTH": "._bounds",
            "MAX_CHAIN_NODES": "._bounds",
            "MAX_CHAIN_STAGES": "._bounds",
            "ConfigError": "._errors",
            "ChainSource": "._loader",
            "LoadedChain": "._loader",
            "StageDeclaration": "._loader",
            "load_chain": "._loader",
            "PLUGIN_GROUP": "._registry",
            "PluginWarning": "._registry",
            "Registry": "._registry",
            "TransformerSpec": "._registry",
            "default_registry": "._registry",
            "chain_schema": "._schema",
        },
    )

__all__ = [
    "MAX_CHAIN_BYTES",
    "MAX_CHAIN_DEPTH",
    "MAX_CHAIN_NODES",
    "MAX_CHAIN_STAGES",
    "PLUGIN_GROUP",
    "ChainSource",
    "ConfigError",
    "LoadedChain",
    "PluginWarning",
    "Registry",
    "StageDeclaration",
    "TransformerSpec",
    "chain_schema",
    "default_registry",
    "load_chain",
]
