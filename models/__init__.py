"""Data package: installed as costgraph.models (see pyproject.toml)."""
