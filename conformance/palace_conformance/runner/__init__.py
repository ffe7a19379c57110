"""The conformance runner: runs scenario fixtures against a bridge host and says where it departs.

A run goes through stages, one sub-package each; a stage imports only the stages before it:

* :mod:`.commands`: the command line (``run``, ``replay``, ``baseline``, ``diff``, ``matrix``):
  argparse only, the engines are imported when a command runs;
* :mod:`.execution`: one run's private world (temp dir, shims, fake, lock holder), the
  driver-protocol client, one scenario on one transport, many in parallel, warm starts;
* :mod:`.verdict`: expectations to check records, cross-transport parity, expected-failure
  baselines;
* :mod:`.reports`: console, Markdown, JUnit, repro bundles and their redaction and replay;
* :mod:`.compare`: drift between bridges and the bridges x scenarios matrix.

:mod:`.results` is the typed result model every stage shares; :mod:`.pytest_plugin` runs the
catalogue as pytest items. Kept import-free, like every sub-package's ``__init__``: importing the
package must cost nothing.
"""
