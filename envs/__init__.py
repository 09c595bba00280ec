"""The catalogue of environments: one self-contained folder each, found by name (`wander.core.registry`)."""
