"""The one error base of the harness: what the campaign loop catches when a candidate cannot be built or judged.

Each subclass says how the loop records it: ``kind`` is the error verdict's kind (``error: compile``, ``error:
crash``, ...; its code is ``evo.core.records.error_code(kind)``), ``gate`` the gate the verdict names (None: none), and
``fatal`` whether the process can go on measuring (a crashed CUDA context cannot: the attempt is recorded, then the
exception passes on). Anything that is not a HarnessError is a bug of evo: recorded as ``error: harness`` and
raised.
"""

from __future__ import annotations


class HarnessError(Exception):
    """A candidate could not be built or judged; the campaign records ``error: <kind>`` and goes on."""

    kind: str = "harness"
    gate: str | None = None
    fatal: bool = False  # the process's device state is lost: record the attempt, then re-raise

    def reason(self) -> str:
        """What the attempt's verdict says (one line where the message has several)."""
        if self.fatal:
            first = str(self).splitlines()[0] if str(self) else ""
            return f"{type(self).__name__}: {first}"
        return str(self)


class BuildError(HarnessError):
    """A compiler (NVRTC, nvcc) rejected the source; the message is the first error line of its log."""

    kind, gate = "compile", "static"

    def __init__(self, message: str, log: str = ""):
        super().__init__(message)
        self.log = log
