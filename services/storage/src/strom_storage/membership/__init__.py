"""How a storage node takes part in a cluster: registration under a lease, and the partitions
it hosts as the controller's metadata in etcd says (``assignment`` is the pure part,
``cluster_link`` the etcd side)."""
