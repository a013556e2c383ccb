"""Numbers: exact evaluation of closed forms, integer forms for code and evaluation, units and their printing."""
