"""Comparing bridges: where results come from (:mod:`.sources`), drift between two bridges
(:mod:`.diff`) and the bridges x scenarios matrix (:mod:`.matrix`)."""
