"""Telling people: the console (:mod:`.console`), a PR summary (:mod:`.markdown`), JUnit
(:mod:`.junit`), normalised traces (:mod:`.trace`), repro bundles (:mod:`.bundle`), their
redaction (:mod:`.redact`) and replay (:mod:`.replay`), and what ``--report-dir`` writes
(:mod:`.report_dir`)."""
