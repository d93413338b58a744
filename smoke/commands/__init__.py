"""The entry points, one module each: a row's run (``gate``), ``inspect``, the matrix ``summary``, ``compare``
(with its static ``drift``), the ``benchmark``, and ``smoke_test`` (a row run inside a test-infra build job).
``smoke.cli`` parses their command lines and is the edge where each error becomes its one line and exit code."""
