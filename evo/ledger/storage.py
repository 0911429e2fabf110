"""A campaign's storage chosen in one place, by its URL: :func:`open_ledger`.

``memory:`` is a :class:`~evo.ledger.memory_ledger.MemoryLedger` (one process, nothing kept: the search benchmark);
every other URL (``sqlite:///...``, ``postgresql://...``) an Optuna study in that database,
:class:`~evo.ledger.ledger.Ledger`. Both are the loop's :class:`~evo.core.protocols.Storage`. Called by the campaign
loop when it is given no storage, and by the commands that read a campaign's ledger (status, log, export, ideas).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, overload

from evo.core.family import Knob
from evo.core.protocols import Storage
from evo.ledger.errors import LedgerError
from evo.ledger.ledger import Ledger
from evo.ledger.memory_ledger import MemoryLedger
from evo.ledger.storage_url import is_memory_url


@overload
def open_ledger(url: str, campaign: str, knobs: Sequence[Knob], *, readonly: Literal[True]) -> Ledger: ...


@overload
def open_ledger(
    url: str,
    campaign: str,
    knobs: Sequence[Knob],
    *,
    shared: bool = False,
    limit: int | None = None,
    readonly: Literal[False] = False,
) -> Storage: ...


def open_ledger(
    url: str,
    campaign: str,
    knobs: Sequence[Knob],
    *,
    shared: bool = False,
    limit: int | None = None,
    readonly: bool = False,
) -> Storage | Ledger:
    """The storage ``url`` names, holding campaign ``campaign``; a LedgerError (one line) where it cannot be opened.

    ``shared``: several processes run the campaign (``evo worker``): asks reserve their genome and a share of the
    attempt budget ``limit``. ``readonly``: an existing campaign's ledger, opened so that nothing can be written
    (what the reading commands take; a ledger in memory has nothing to read).
    """
    if is_memory_url(url):
        if readonly:
            raise LedgerError(f"storage {url!r} is held in memory by the process that runs it: nothing to read")
        if shared:
            raise LedgerError(f"storage {url!r} is held in memory by one process: workers cannot share it")
        return MemoryLedger()
    led = Ledger(url, campaign, knobs, shared=shared, readonly=readonly)
    if shared:
        led.limit = limit
    return led
