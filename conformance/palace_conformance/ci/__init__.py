"""``palace-conformance ci``: the catalogue run as a GitHub Actions step (the repository's
``action.yml`` only calls it): JUnit, the Markdown summary in ``$GITHUB_STEP_SUMMARY``, workflow
annotations per failing check, step outputs and a report directory to upload."""
