"""Turning a genome into machine code and measuring it: build, the GPU and recorded backends, the isolated worker.

Every way a candidate can fail to be built or judged raises a :class:`HarnessError` (harness/errors.py): the
one exception type the campaign loop catches.
"""

from harness.errors import HarnessError

__all__ = ["HarnessError"]
