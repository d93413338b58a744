"""The checks: of the wheel file (``tagged``, ``foreign``, ``shipped``, ``policy``, ``resolve``, ``owners``,
``duplicates``, ``imports``; ``macos`` and ``windows`` for those systems' files), of the installed environment
(``installed``), of what the child exported (``exported``); ``pipeline`` gathers a row's in the order they run."""
