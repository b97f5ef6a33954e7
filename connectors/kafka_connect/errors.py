"""The error of a record whose bytes do not fit its converter; every converter and codec raises it."""


class ConversionError(ValueError):
    """A record's bytes do not fit the converter (a poison record, not a bug)."""
