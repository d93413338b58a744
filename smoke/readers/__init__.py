"""The readers: the wheel file (``wheel``, and ``wheelcopy`` for a changed copy), its native files (``native``:
ELF, Mach-O, PE through ``elf``, ``macho``, ``pe``), FlatBuffers tables (``tables``), device code
(``devicecode``), and the torch a release pairs with (``pairing``)."""
