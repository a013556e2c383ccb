"""The engine: the builder that walks a program into the operator graph, the graph itself, its totals per scope, symbols, precisions, counting conventions and activation analysis."""
