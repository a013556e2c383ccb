"""costgraph's version, in a module of its own so that any module can name it
(generated code, reports, ``--version``) without importing the package's
``__init__`` (and, through it, the API it exposes)."""

__version__ = "0.1.0"
