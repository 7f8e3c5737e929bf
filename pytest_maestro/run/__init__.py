"""The run as a whole: what it knows and decides about its phases (``RunState``, the circuit
breaker), what the controller records in the session state, and the ``Orchestrator`` that composes
one run of a plan."""
