"""The package's exceptions (no torch needed to import them)."""


class ExportError(Exception):
    """A model stepc cannot import, with the op and the source line to blame."""


class StepcError(RuntimeError):
    """A runtime call failed; the message is the runtime's."""
