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
    # What type checkers see; `_EXPORTS` below is what runs (a test keeps them equal).
    from ._bounds import MAX_CHAIN_BYTES as MAX_CHAIN_BYTES
    from ._bounds import MAX_CHAIN_DEPTH as MAX_CHAIN_DEPTH
    from ._bounds import MAX_CHAIN_NODES as MAX_CHAIN_NODES
    from ._bounds import MAX_CHAIN_STAGES as MAX_CHAIN_STAGES
    from ._errors import ConfigError as ConfigError
    from ._loader import ChainSource as ChainSource
    from ._loader import LoadedChain as LoadedChain
    from ._loader import StageDeclaration as StageDeclaration
    from ._loader import load_chain as load_chain
    from ._registry import PLUGIN_GROUP as PLUGIN_GROUP
    from ._registry import PluginWarning as PluginWarning
    from ._registry import Registry as Registry
    from ._registry import TransformerSpec as TransformerSpec
    from ._registry import default_registry as default_registry
    from ._schema import chain_schema as chain_schema
else:
    from .._lazy import attach as _attach

    _EXPORTS = {
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
    }
    __getattr__, __dir__ = _attach(__name__, _EXPORTS)
    __all__ = [*_EXPORTS]
