"""Against other implementations: the official TS client, conformance corpus, real producers."""
