"""The params model: params.yaml's sections as typed classes, loading with profiles and env recipes, preflight."""
