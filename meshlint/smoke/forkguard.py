"""Preloaded by the supervisor's fork server only: the fork server dies with the supervisor (SIGKILL). No torch.

The fork server already exits at end of file on multiprocessing's alive pipe;
this adds the kernel's parent-death signal, so it goes even when it is busy.
Importing this module anywhere else would tie that process to its parent.
"""

import signal

from meshlint.smoke.lifeline import set_parent_death_signal

set_parent_death_signal(signal.SIGKILL)
