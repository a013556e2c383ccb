"""Symbolic analysis of costgraph's closed forms: budgets solved for a
dimension (:mod:`.solve`), derivatives and elasticities (:mod:`.sensitivity`),
leading terms when some dimensions dominate (:mod:`.leading`), the difference
of two models or configurations (:mod:`.diff`), and compute-optimal model
size and tokens for a FLOP budget (:mod:`.optimal`).

Each reads SymPy expressions made by the engine (``Model.costs``,
``Model.train``) and returns SymPy objects; none parses text.
"""
