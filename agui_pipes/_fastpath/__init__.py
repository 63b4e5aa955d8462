"""Speed-only machinery: nothing here changes what any entry point outputs.

The reference path (decode, the chain loop, the stages, the encoders) never
imports this package; the entry points use it when it has a plan for a
shape and fall back to the reference path otherwise.
"""
