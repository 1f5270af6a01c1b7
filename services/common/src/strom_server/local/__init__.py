"""Local clusters and their supervision: ``strom cluster up`` (``cluster``), the process
``supervisor`` and ``process_keeper``, the ``restart_policy``, the ``control_socket`` and
``cluster_state`` file, what other terminals do (``cluster_control``), the docker-compose
generator (``compose_file``) and ``free_ports`` for tests and benchmarks."""
