"""etcd: the server binary and process (``binary``, ``process``), the one etcd client of every
service (``store``), the cluster's key layout (``keys``) and watch helpers
(``prefix_follower``, ``controller_locator``)."""
