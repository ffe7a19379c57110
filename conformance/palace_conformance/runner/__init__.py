"""The conformance runner: runs scenario fixtures against a bridge host and says where it departs.

A run goes through stages, one sub-package each, layered (import-linter checks it: a stage
imports only the stages listed after it):

* :mod:`.commands`: the command line (``run``, ``replay``, ``baseline``, ``diff``, ``matrix``,
  ``profile``): argparse only, the engines are imported when a command runs;
* :mod:`.compare`: drift between bridges and the bridges x scenarios matrix;
* :mod:`.reports`: console, Markdown, JUnit, repro bundles and their redaction and replay;
* :mod:`.execution`: one run's private world (temp dir, shims, fake, lock holder), the
  driver-protocol client, one scenario on one transport, many in parallel, warm starts, a bridge
  profile applied at the run's edges;
* :mod:`.verdict`: expectations to check records, conformance levels, cross-transport parity,
  expected-failure baselines.

:mod:`.results` is the typed result model every stage shares; :mod:`.profile` reads bridge
profiles and :mod:`.profiling` drafts one by watching a bridge (``profile init``);
:mod:`.selection`, :mod:`.usage`, :mod:`.interrupts` and :mod:`.jobs` are what the commands and
engines share about user input; :mod:`.pytest_plugin` runs the catalogue as pytest items. Kept
import-free, like every sub-package's ``__init__``: importing the package must cost nothing.
"""
