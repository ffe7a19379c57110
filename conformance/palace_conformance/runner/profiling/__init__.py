"""``palace-conformance profile init``: draft a bridge profile by watching the bridge.

:mod:`.observe` runs the short observation sessions, :mod:`.matching` holds the name heuristics,
:mod:`.derive` turns observations into a draft, :mod:`.draft` puts them together. :mod:`.detect`
reuses the sessions and the inference for a run nobody described: the capabilities it is judged
with when no profile claims any and the host's list is a placeholder.
"""
