"""``palace-conformance record``: a proxy between a bridge and a palace that turns the traffic it
relays into a draft scenario. ``relay`` moves the bytes, ``draft`` writes the scenario,
``commands`` is the argparse side (it imports neither at import time)."""
