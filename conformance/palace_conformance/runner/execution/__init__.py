"""Running scenarios: one run's private world (:mod:`.world`), the driver-protocol client
(:mod:`.driver`), the runner as the fake's own client for ``subject: fake`` scenarios
(:mod:`.fake_client`), one scenario on one transport (:mod:`.execute`), many in parallel
(:mod:`.suite`, :mod:`.jobs`), and warm starts (:mod:`.warm_client`, :mod:`.warm_server`)."""
