"""etcd: the server binary and process (``binary``, ``process``), the one etcd client of every
service (``store``), the cluster's key layout (``keys``), watch helpers
(``prefix_follower``, ``controller_locator``) and leases: the one election (``lease_campaign``),
the one registration (``lease_registration``), both through ``held_lease`` (kept alive by
``lease_keeper``'s thread, bounded by ``session_lease``)."""
