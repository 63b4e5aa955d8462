"""Declarative chains: YAML/JSON declarations, the transformer registry, the schema.

::

    from agui_pipes.config import load_chain

    make_chain = load_chain(Path("chain.yaml"))   # validated now, pointed ConfigError if not
    chain = make_chain()                          # a fresh TransformerChain per run

The declaration format is documented in docs/yaml-reference.md (generated from
the options models in ``agui_pipes.config.options``) and the plugin protocol in
docs/writing-transformers.md.
"""

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
