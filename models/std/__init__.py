"""Data package: installed as costgraph.models.std (see pyproject.toml)."""
