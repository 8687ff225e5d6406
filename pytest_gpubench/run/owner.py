"""Who made a temporary folder, so that a later run can remove the folders of runs killed
outright (SIGKILL, the OOM killer) and only those.

A pid says whether a process lives only on the machine, boot and pid namespace it was read
in: two machines of one host name sharing a temporary folder (NFS), the same machine after a
reboot, or two containers sharing a host's temporary folder would each read another's live
pid as dead. :func:`identity` tells them apart (the host name, /etc/machine-id, the kernel's
boot id and the pid namespace), and a folder of another identity is always kept: a leaked
folder costs disk, a removed live one a run. So folders of an earlier boot stay (a reboot
clears most temporary folders), as do those an earlier release named. Where the system has
none of these (not Linux), the host name alone tells owners apart.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
from pathlib import Path

_SOURCES = (Path("/etc/machine-id"), Path("/proc/sys/kernel/random/boot_id"))


def identity() -> str:
    """This machine, boot and pid namespace, safe in a file name: the host name, then a
    short digest of the rest where the system has it."""
    name = re.sub(r"[^A-Za-z0-9]+", "-", socket.gethostname()).strip("-") or "host"
    parts = []
    for source in _SOURCES:
        try:
            parts.append(source.read_text().strip())
        except OSError:
            parts.append("")
    try:
        parts.append(os.readlink("/proc/self/ns/pid"))  # pid:[4026531836]
    except OSError:
        parts.append("")
    if not any(parts):
        return name
    return f"{name}-{hashlib.sha256(chr(0).join(parts).encode()).hexdigest()[:12]}"


def alive(pid: int) -> bool:
    """Whether process ``pid`` of this identity exists (another user's counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # another user's process: alive, not ours to judge
    return True
