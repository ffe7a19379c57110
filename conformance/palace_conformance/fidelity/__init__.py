"""``palace-conformance fidelity``: the same scripted sessions against the real mempalace and the
fake, every observation compared under declared normalisation rules (docs/real-server.md).

script.json says what is sent (stable probe ids, sections, transport, palace state), rules.json
what may differ and why; targets.py starts either server, execute.py records what each answers,
normalise.py applies the rules and compare.py reports every other difference.
"""
