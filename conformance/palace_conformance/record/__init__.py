"""``palace-conformance record``: a proxy between a bridge and a palace that turns the traffic it
relays into a draft scenario. ``relay`` moves the bytes over stdio, ``proxy`` over HTTP (a
reverse proxy for a bridge in remote mode), ``draft`` writes the scenario from either;
its command line is :mod:`palace_conformance.commands.record`."""
