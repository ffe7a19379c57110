"""Judging runs: expectations to check records (:mod:`.judge`), normalised traces for comparison
(:mod:`.normalise`), cross-transport parity (:mod:`.parity`) and expected-failure baselines
(:mod:`.baseline`)."""
