"""Draft a model file from PyTorch (``costgraph import``, issue 28 item 1).

:func:`~costgraph.drafting.api.draft_model` is the entry point; torch and transformers are imported
only when it runs (the ``torch`` extra). Modules: ``probe`` (probe configurations, sizes read back as
config symbols), ``facts`` (the traced module tree as plain data), ``trace`` (hooks on the meta
forward), ``blocks`` (std blocks recognised), ``writer`` (a layer's dataflow as statements),
``model_file`` (the whole file), ``api`` (the typed result and the checks against PyTorch).
"""
