"""Whether tests can mount file systems in a private mount namespace (``unshare -m``), and if
not, why, in words that fit who runs them: a full disk or a read-only folder is made real with
a small tmpfs there."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

PROBE = ["unshare", "-m", "sh", "-c", "mount -t tmpfs none /mnt"]


@functools.cache
def mount_problem() -> str | None:
    """None when ``unshare -m`` can mount a tmpfs here; else the skip reason: what failed
    and what it means for this user (root in a container or chroot that forbids new
    namespaces is not "needs root")."""
    if shutil.which("unshare") is None:
        return "needs a private mount namespace: unshare (util-linux) is not installed"
    probe = subprocess.run(PROBE, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if probe.returncode == 0:
        return None
    said = (probe.stderr.strip().splitlines() or [f"exit {probe.returncode}"])[-1]
    if os.geteuid() == 0:
        who = ("running as root, but this container or chroot does not allow a new mount "
               "namespace (no CAP_SYS_ADMIN, or a seccomp filter)")
    else:
        who = "`unshare -m` needs root (the tests mount a tmpfs); run them as root"
    return f"needs a private mount namespace: {who}: {said}"
