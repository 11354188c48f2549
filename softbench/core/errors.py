"""softbench's own error types. Every failure a user can cause or meet ends up here, so the CLI can turn
it into one clear message and one exit code in a single place (cli.main)."""


class SoftbenchError(Exception):
    """Base class. `hint` says what to do instead; `exit_code` is what the CLI returns."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


class UsageError(SoftbenchError):
    """Bad options, shapes or files given by the user."""

    exit_code = 2


class UnsupportedError(SoftbenchError):
    """The machine or backend cannot do what was asked (e.g. FP8 through FA4 on sm_90)."""

    exit_code = 3


class PatchError(SoftbenchError):
    """The kernel source does not match what the patch was written for: the patch refuses (fail closed)."""

    exit_code = 4


class MeasurementError(SoftbenchError):
    """A measurement could not be completed (worker crashed, NVML failed, ...). The session is kept, partial."""

    exit_code = 5


class SealError(SoftbenchError):
    """A sealed file does not verify, or sealing would overwrite different content."""

    exit_code = 6
