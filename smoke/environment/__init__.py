"""The environment a row runs in and the folders the gate owns: building it (``build``), who installs from where
(``installer``), the loader environment of its processes (``loaderenv``), the default download (``download``),
following the child (``follow``), and the folders the gate makes, marked and locked (``folders``)."""
