"""The transaction coordinator: transactional ids, their producer ids and epochs, and the
two-phase commit of transactions over partition leaders and group coordinators.

``state`` is the pure state machine, ``records`` the ``__transaction_state`` codec, ``manager``
the API the servicer and the process use, over the hosted ids (``table``), the completion of
ended transactions (``completion``) and the timeouts and expiry (``expiry``); ``markers``
sends WriteTxnMarkers, ``servicer`` is the gRPC TransactionCoordinator service
(docs/coordinator.md).
"""
