"""The model language: grammar parsing, syntax errors in the user's words, the AST, the loader (imports, extends, configs), layer patterns, bundled resources and the config.json import."""
