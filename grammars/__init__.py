"""Data package: installed as costgraph.grammars (see pyproject.toml)."""
