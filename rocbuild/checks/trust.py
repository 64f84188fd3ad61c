"""The host's side of model/trust.py: who runs rocbuild, the names of users and groups, and
whether a group's members are all trusted (read from the user and group databases)."""

from __future__ import annotations

import functools
import grp
import os
import pwd
from collections.abc import Mapping

from rocbuild.model.trust import Trust


def _user_name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return f"gid {gid}"


def _members(gid: int) -> set[int] | None:
    """Every uid in group ``gid``: those whose primary group it is and its listed members;
    None when the group or a listed member is unknown."""
    try:
        group = grp.getgrgid(gid)
        listed = {pwd.getpwnam(name).pw_uid for name in group.gr_mem}
    except KeyError:
        return None
    return listed | {user.pw_uid for user in pwd.getpwall() if user.pw_gid == gid}


def host_trust(env: Mapping[str, str]) -> Trust:
    """The trust of this process: the effective user and root; under sudo (root with
    ``SUDO_UID``) the user who called sudo too, as git does, so `sudo rocbuild` in one's own
    project reads its rocbuild.toml."""
    uid = os.geteuid()
    owners = {uid, 0}
    sudo = env.get("SUDO_UID", "")
    if uid == 0 and sudo.isdigit():
        owners.add(int(sudo))
    trusted = frozenset(owners)

    @functools.cache
    def trusted_group(gid: int) -> bool:
        # a group with no members is no user private group (setgid programs use those)
        members = _members(gid)
        return bool(members) and members is not None and members <= trusted

    return Trust(uid=uid, owners=trusted, user_name=_user_name, group_name=_group_name,
                 trusted_group=trusted_group)
