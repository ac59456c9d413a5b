"""What an ``infercrane`` command exits with: 0 done, 1 failed (or refused), 3 a plan with changes
pending (``plan --detailed-exitcode``). CLI layer.
"""

from __future__ import annotations

from typing import Final

EXIT_OK: Final = 0
EXIT_FAILED: Final = 1
EXIT_CHANGES_PENDING: Final = 3
