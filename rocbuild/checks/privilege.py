"""Commands in advice that need root, written the way they run on this host.

rocbuild never runs sudo (the host is left alone: docs/architecture.md, Contracts), but its
fixes often need root: installing a package, a swapfile, a group. Advice that says ``sudo
apt-get …`` to root on a minimal Debian without sudo cannot be pasted; ``as_root`` writes the
command as is for root, after ``sudo`` where sudo is installed, and through ``su -c``
otherwise. Reads the effective uid and PATH only; runs nothing.
"""

from __future__ import annotations

import os
import shlex
import shutil


def how() -> str:
    """'root' (run as is), 'sudo' or 'su', for this process on this host."""
    return "root" if os.geteuid() == 0 else "sudo" if shutil.which("sudo") else "su"


def as_root(*commands: str) -> str:
    """One line that runs ``commands`` (in order, each only if the one before succeeded)
    with root's rights here."""
    way = how()
    if way == "root":
        return " && ".join(commands)
    if way == "sudo":
        return " && ".join(f"sudo {c}" for c in commands)
    return "su -c " + shlex.quote(" && ".join(commands))


def pipe_to_root(producer: str, command: str) -> str:
    """``producer | command`` where only ``command`` needs root (``echo high | sudo tee …``)."""
    way = how()
    if way == "su":
        return "su -c " + shlex.quote(f"{producer} | {command}")
    return f"{producer} | {as_root(command)}"


def apt_install(*packages: str) -> str:
    return as_root("apt-get install -y " + " ".join(packages))
