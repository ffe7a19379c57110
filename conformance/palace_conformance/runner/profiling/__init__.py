"""``palace-conformance profile init``: draft a bridge profile by watching the bridge.

:mod:`.observe` runs the short observation sessions, :mod:`.matching` holds the name heuristics,
:mod:`.derive` turns observations into a draft, :mod:`.draft` puts them together.
"""
