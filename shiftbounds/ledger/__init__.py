"""The claims ledger: every claim of the two papers the shipped results bear on, decided from the
per-seed files by one set of rules (:mod:`~shiftbounds.ledger.rules`), one function per kind of claim
(:mod:`~shiftbounds.ledger.decide`), and a check that recomputes the shipped summary tables
(:mod:`~shiftbounds.ledger.check`). The claims themselves are data: ``experiments/claims.yaml``."""
