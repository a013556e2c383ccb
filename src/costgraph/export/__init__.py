"""Exports: reports, generated code, graph pictures, plots, schemas."""
