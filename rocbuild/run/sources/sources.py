"""Fetch a component's pinned ref: shallow, cached, mirrored, never half-done.

Every git process runs through rocbuild.proc, registered with the run and killed as a group
on interrupt: the commands that can take long (fetch, checkout, submodule update) through
``proc.run_logged`` into the step's log, the quick local ones (init, rev-parse, config,
update-ref) through ``proc.run_capture`` with a timeout. gitpython only reads files of a
repository (the checked-out commit) and starts no git process of its own.

Each repository has a bare cache in ``<workdir>/cache/git/`` that keeps every fetched ref, so a
clean rebuild (or ``--offline``) does not download again. The checkout is assembled in a
``.partial`` folder from the cache and renamed into place only when complete, so a run killed
mid-clone never leaves a checkout that the next run would trust.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocbuild import proc
from rocbuild.errors import BuildFailed
from rocbuild.files import read_regular, write_text_atomic
from rocbuild.model.gitcache import cache_dir, cache_lock, cache_ref, insteadof_args, is_local
from rocbuild.run.sources import patches
from rocbuild.run.sources.patches import LOCAL_GIT_TIMEOUT

_SHA_RE = re.compile(r"^[0-9a-f]{40}$")
# Failures worth another try: the network or the server, not a wrong ref.
_TRANSIENT = re.compile(r"(could not resolve host|connection (timed out|reset|refused)|"
                        r"early eof|the remote end hung up|operation timed out|"
                        r"temporary failure|unable to access|RPC failed|TLS|gnutls|SSL)", re.I)

Logger = Callable[[str], None]
REMOTE_ASK_TIMEOUT = 60.0  # seconds for `git ls-remote` of one tag
MOVED_TAG = "tag moved:"  # how the fetch log says a cached tag names another commit now


@dataclass(frozen=True)
class FetchRequest:
    name: str
    url: str  # after mirror rules
    ref: str
    submodules: bool
    checkout_dir: Path
    cache_root: Path
    mirror: tuple[tuple[str, str], ...] = ()
    offline: bool = False
    attempts: int = 3
    retry_delay: float = 2.0
    # what the last fetch and patch left, to tell the user's own work in the old checkout
    previous_commit: str | None = None
    applied: dict[str, Any] | None = None
    save_root: Path | None = None
    # a new checkout (the first of this component here, or after `clean --sources`): a
    # cached tag is checked against the remote first, since a tag can be moved there
    recheck: bool = False


def _git_env() -> dict[str, str]:
    """The environment of every git process: the C locale (_TRANSIENT reads git's English
    messages), and never a password prompt at 3 a.m. (fail and say so instead)."""
    return {**os.environ, "LC_ALL": "C", "LANGUAGE": "C", "GIT_TERMINAL_PROMPT": "0",
            "GIT_ASKPASS": "true"}


class GitFailed(BuildFailed):
    """A git command failed; the message keeps git's own lines that name the cause."""

    def __init__(self, args: Sequence[str], where: Path, stderr: str) -> None:
        self.stderr = stderr
        cause = git_cause(stderr)
        tip = None
        if "safe.directory" in stderr:
            tip = (f"git refuses a folder owned by another user: run the `git config --global "
                   f"--add safe.directory` line above (or chown {where}), then build again")
        super().__init__(f"git {args[0] if args else ''} failed in {where}:\n{cause}", tip=tip)


def git_cause(stderr: str, limit: int = 12) -> str:
    """git's lines that say what went wrong, not only the last one: "fatal: ... does not
    appear to be a git repository" comes before "Please make sure you have the correct access
    rights", and the dubious-ownership fix is on the lines after its "fatal:"."""
    lines = [line.rstrip() for line in stderr.splitlines() if line.strip()]
    lines = [line for line in lines if not line.startswith(("remote: Counting",
                                                           "remote: Compressing"))]
    return "\n".join(f"  {line.strip()}" for line in lines[:limit]) or "  (git printed nothing)"


def _run(repo_dir: Path, args: Sequence[str], log: Logger,
         registry: proc.ChildRegistry | None) -> None:
    log(f"$ git -C {repo_dir} {' '.join(args)}")
    result = proc.run_logged(["git", *args], cwd=repo_dir, env=_git_env(), on_line=log, tail=200,
                             registry=registry)
    if not result.ok:
        raise GitFailed(args, repo_dir, "\n".join(result.tail))


def _local(repo_dir: Path, args: Sequence[str],
           registry: proc.ChildRegistry | None) -> proc.Captured:
    """A quick local git command (no network) through rocbuild.proc: registered with the
    run, with a timeout. Its result, or returncode 127 when git cannot start."""
    return proc.run_capture(["git", "-C", str(repo_dir), *args], timeout=LOCAL_GIT_TIMEOUT,
                            env=_git_env(), registry=registry)


def _local_ok(repo_dir: Path, args: Sequence[str],
              registry: proc.ChildRegistry | None) -> str:
    """A local git command that must succeed: its output, or GitFailed naming it."""
    done = _local(repo_dir, args, registry)
    if not done.ok:
        said = done.stderr if not done.timed_out else (
            f"{done.stderr}\n(ended after {LOCAL_GIT_TIMEOUT:.0f} s)")
        raise GitFailed(args, repo_dir, said)
    return done.stdout.strip()


@contextlib.contextmanager
def locked_cache(cache: Path, log: Logger, *, shared: bool = False) -> Iterator[None]:
    """Hold the lock of a repository's cache (an flock on ``<cache>.lock`` beside it) while
    it is created, fetched into or updated (exclusive), or fetched from (``shared``):
    components of one upstream repository share the cache, and two `git init`s or `git
    fetch`es into it at once fail ("File exists", "shallow.lock"), while checkouts only read
    it and may fetch from it together, not one after another. The lock is per repository,
    so other repositories fetch meanwhile; the kernel drops it with the process, so a killed
    run leaves nothing held."""
    lock = cache_lock(cache)
    lock.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
    try:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"waiting for {cache.name}: another component of this repository is fetching")
            fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the flock


def _ensure_cache(cache: Path, log: Logger, registry: proc.ChildRegistry | None = None) -> bool:
    """Make the bare cache unless it is there; True when it was made now (nothing cached)."""
    made = not (cache / "HEAD").is_file()
    if made:
        cache.mkdir(parents=True, exist_ok=True)
        _local_ok(cache, ["init", "-q", "--bare"], registry)
        log(f"created cache {cache}")
    if made or not _allows_any_sha1(cache):
        # the checkout fetches a commit by id from the cache; set once (a cache made by a run
        # killed before this line gets it now)
        _local_ok(cache, ["config", "uploadpack.allowAnySHA1InWant", "true"], registry)
    return made


def _allows_any_sha1(cache: Path) -> bool:
    """The cache's config says allowAnySHA1InWant = true (read as text: no git process)."""
    try:
        text = read_regular(cache / "config").decode("utf-8", "replace").lower()
    except OSError:
        return False
    return re.search(r"^\s*allowanysha1inwant\s*=\s*true\s*$", text, re.M) is not None


def cached_commit(cache: Path, ref: str,
                  registry: proc.ChildRegistry | None = None) -> str | None:
    if not (cache / "HEAD").is_file():
        return None
    done = _local(cache, ["rev-parse", "--verify", "-q", cache_ref(ref) + "^{commit}"],
                  registry)
    return (done.stdout.strip() or None) if done.ok else None


def _is_tag_or_commit(cache: Path, ref: str,
                      registry: proc.ChildRegistry | None = None) -> bool:
    """Tags and commit ids do not move, so a cached copy is final; branches are fetched again."""
    if _SHA_RE.match(ref):
        return True
    if not (cache / "HEAD").is_file():
        return False  # no cache (yet): not known to be final
    done = _local(cache, ["config", "--get", f"rocbuild.{cache_ref(ref)[-16:]}.kind"], registry)
    return done.ok and done.stdout.strip() == "tag"


def ref_kind(cache: Path, ref: str, registry: proc.ChildRegistry | None = None) -> str:
    """tag, commit or branch: what the cached ref is (a fetch records it in the cache)."""
    if _SHA_RE.match(ref):
        return "commit"
    return "tag" if _is_tag_or_commit(cache, ref, registry) else "branch"


def remote_tag(url: str, tag: str, log: Logger,
               registry: proc.ChildRegistry | None = None) -> str | None:
    """The commit ``tag`` names in the repository at ``url`` now (``git ls-remote``: refs
    only, no objects), the peeled commit of an annotated tag; None when the remote cannot be
    asked or has no such tag (the cache's copy is then used, and the log says why)."""
    done = proc.run_capture(["git", "ls-remote", "--tags", "--", url, f"refs/tags/{tag}"],
                            timeout=REMOTE_ASK_TIMEOUT, env=_git_env(), registry=registry)
    if not done.ok:
        log(f"could not ask {url} whether {tag} moved ({git_cause(done.stderr).strip()})")
        return None
    refs: dict[str, str] = {}
    for line in done.stdout.splitlines():  # "<commit>\t<ref>"
        commit, _, ref = line.partition("\t")
        refs[ref.strip()] = commit.strip()
    return refs.get(f"refs/tags/{tag}^{{}}") or refs.get(f"refs/tags/{tag}")


def _fetch_into_cache(req: FetchRequest, log: Logger, registry: proc.ChildRegistry | None
                      ) -> tuple[str, str | None]:
    """The commit ``req.ref`` names, fetched into the cache unless it is already there, and
    the ref's kind (tag, commit, branch) where the fetch learned it (None: ask ``ref_kind``).
    The caller holds the cache's lock (``locked_cache``)."""
    cache = cache_dir(req.cache_root, req.url)
    made = _ensure_cache(cache, log, registry)
    cached = None if made else cached_commit(cache, req.ref, registry)
    if cached and req.offline:
        log(f"{req.ref} is cached as {cached}; no download")
        return cached, None
    if cached and _is_tag_or_commit(cache, req.ref, registry):
        now = (remote_tag(req.url, req.ref, log, registry)
               if req.recheck and not _SHA_RE.match(req.ref) else None)
        if now is None or now == cached:
            refresh = ("" if req.recheck else
                       f" (a tag is final here: `rocbuild clean {req.name} --sources` makes "
                       "the next build ask the remote whether it moved)")
            log(f"{req.ref} is cached as {cached}; no download{refresh}")
            return cached, "commit" if _SHA_RE.match(req.ref) else "tag"
        log(f"{MOVED_TAG} {req.ref} moved in {req.url}: the cache had {cached}, the "
            f"remote has {now}; fetching it")
    if req.offline and not is_local(req.url):  # a local mirror needs no network
        raise BuildFailed(f"{req.name}: {req.ref} from {req.url} is not in the cache and "
                          "--offline forbids downloading it",
                          tip="run once without --offline, or add a --mirror that has it")
    last_error, attempts = "", 0
    while attempts < req.attempts:
        attempts += 1
        try:
            _run(cache, ["fetch", "--depth", "1", "--no-tags", "--", req.url, req.ref], log,
                 registry)
            last_error = ""
            break
        except GitFailed as exc:
            last_error = exc.stderr.strip()
            transient = bool(_TRANSIENT.search(last_error))
            if cached and transient:
                log(f"network failed; using the cached {req.ref} = {cached} (may be stale)")
                return cached, None
            if not transient or attempts == req.attempts:
                break
            log(f"attempt {attempts} failed; retrying in {req.retry_delay * attempts:.0f}s")
            time.sleep(req.retry_delay * attempts)
    if last_error:
        transient = bool(_TRANSIENT.search(last_error))
        hint = ("check the network or add a --mirror" if transient
                else f"check that '{req.ref}' exists in {req.url} (tag, branch or full commit)")
        tries = f" after {attempts} attempts" if attempts > 1 else ""
        raise BuildFailed(f"{req.name}: cannot fetch {req.ref} from {req.url}{tries}:\n"
                          f"{git_cause(last_error)}", tip=hint)
    commit = _local_ok(cache, ["rev-parse", "FETCH_HEAD^{commit}"], registry)
    head_line = (cache / "FETCH_HEAD").read_text().splitlines()[0]
    kind = "tag" if "\ttag '" in head_line or _SHA_RE.match(req.ref) else "branch"
    _local_ok(cache, ["update-ref", cache_ref(req.ref), commit], registry)
    _local_ok(cache, ["config", f"rocbuild.{cache_ref(req.ref)[-16:]}.kind", kind], registry)
    return commit, ("commit" if _SHA_RE.match(req.ref) else kind)


def _cached_for_good(req: FetchRequest, cache: Path, log: Logger,
                     registry: proc.ChildRegistry | None) -> tuple[str, str] | None:
    """(commit, ref kind) where the cache already holds the ref for good (a tag or a commit
    id, or anything cached when offline) and a checkout may fetch from it as it is: what
    ``_fetch_into_cache`` would find without changing the cache, read under a shared lock.
    None: the cache must be made, set up or fetched into first."""
    if not (cache / "HEAD").is_file() or not _allows_any_sha1(cache):
        return None
    cached = cached_commit(cache, req.ref, registry)
    if cached is None:
        return None
    if req.offline:
        log(f"{req.ref} is cached as {cached}; no download")
        return cached, ref_kind(cache, req.ref, registry)
    if not _is_tag_or_commit(cache, req.ref, registry):
        return None
    if req.recheck and not _SHA_RE.match(req.ref):
        # a new checkout asks the remote whether the tag moved (refs only, no change to the
        # cache: still beside the other checkouts); a moved tag is fetched under the
        # exclusive lock, which asks again and says so
        now = remote_tag(req.url, req.ref, log, registry)
        if now is not None and now != cached:
            return None
        log(f"{req.ref} is cached as {cached}; no download")
        return cached, "tag"
    log(f"{req.ref} is cached as {cached}; no download (a tag is final here: `rocbuild "
        f"clean {req.name} --sources` makes the next build ask the remote whether it "
        "moved)")
    return cached, "commit" if _SHA_RE.match(req.ref) else "tag"


def checkout_commit(checkout: Path) -> str | None:
    """The commit checked out in ``checkout`` (None when it is not a git checkout or has no
    commit). Read from .git as git itself resolves HEAD (a detached HEAD, or a branch's ref
    file or packed-refs line): every up-to-date question about a fetch asks this, and a
    GitPython Repo started a `git cat-file` process for each (perf/noop.py). Anything unusual (a
    .git file, a symbolic ref to a symbolic ref) is left to GitPython."""
    dot_git = checkout / ".git"
    if not dot_git.exists():
        return None
    if dot_git.is_dir():
        try:
            head = read_regular(dot_git / "HEAD").decode().strip()
        except (OSError, UnicodeDecodeError):
            return None
        if _SHA_RE.match(head):
            return head
        if head.startswith("ref: refs/"):
            found = _ref_commit(dot_git, head.removeprefix("ref: "))
            if found is not None:
                return found
    import git  # GitPython, imported only where used: a no-op run never needs it

    try:
        repo = git.Repo(str(checkout))
        sha = git.SymbolicReference.dereference_recursive(repo, "HEAD")
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError, OSError):
        return None
    return sha if _SHA_RE.match(sha) else None


def _ref_commit(git_dir: Path, ref: str) -> str | None:
    """The commit a branch or tag ref names in its loose file, else in packed-refs; None
    when neither holds a commit id (GitPython then decides: a peeled tag, an unborn branch)."""
    with contextlib.suppress(OSError, UnicodeDecodeError):
        loose = read_regular(git_dir / ref).decode().strip()
        return loose if _SHA_RE.match(loose) else None
    try:
        packed = read_regular(git_dir / "packed-refs").decode()
    except (OSError, UnicodeDecodeError):
        return None
    for line in packed.splitlines():
        sha, _, name = line.partition(" ")
        if name == ref and _SHA_RE.match(sha):
            return sha
    return None


CHECKOUT_ID_FILE = "rocbuild-checkout-id"


def checkout_id(checkout: Path) -> str | None:
    """A token written when a checkout is created: the patch step and everything built from
    the tree depend on it, so a fresh checkout (new files, new times) is patched and built
    again, while reusing the same checkout changes nothing."""
    try:
        return read_regular(checkout / ".git" / CHECKOUT_ID_FILE).decode().strip() or None
    except OSError:
        return None


def _new_checkout_id(checkout: Path) -> str:
    token = os.urandom(16).hex()  # 128 random bits, as uuid4 (which loads `platform`)
    write_text_atomic(checkout / ".git" / CHECKOUT_ID_FILE, token + "\n")  # never via a link
    return token


@dataclass(frozen=True)
class FetchResult:
    commit: str
    checkout_id: str
    saved: Path | None = None  # where an old checkout with the user's work was moved
    ref_kind: str = ""  # tag, commit or branch (`cache push` reads it from the stamp)
    fresh: bool = False  # a new checkout was made: the pinned commit as git wrote it


def _holds_user_work(req: FetchRequest) -> bool:
    """The checkout about to be replaced has commits or edits of the user's: its HEAD moved
    away from what rocbuild checked out, or files differ from what the patches made."""
    head = checkout_commit(req.checkout_dir)
    if head is None:
        return False
    if req.previous_commit is not None and head != req.previous_commit:
        return True
    return bool(patches.user_edits(req.checkout_dir, req.applied))


def fetch(req: FetchRequest, log: Logger,
          registry: proc.ChildRegistry | None = None) -> FetchResult:
    """Make ``req.checkout_dir`` a checkout of the pinned ref; its git commands are
    registered in ``registry`` (the run's) while they run. The cache is locked while the
    commit is fetched into it, and shared while the new checkout fetches the commit from it;
    the checkout's own work (checkout, submodules) runs after, beside other components'
    checkouts of the same repository."""
    cache = cache_dir(req.cache_root, req.url)
    partial = req.checkout_dir.with_name(req.checkout_dir.name + ".partial")
    with locked_cache(cache, log, shared=True):  # a tag or commit cached: read it, beside
        final = _cached_for_good(req, cache, log, registry)  # other checkouts
    if final is None:
        with locked_cache(cache, log):  # the commit into the cache (its pinned ref keeps it)
            commit, known = _fetch_into_cache(req, log, registry)
            final = commit, known or ref_kind(cache, req.ref, registry)
    commit, kind = final
    with locked_cache(cache, log, shared=True):  # and from it, beside other checkouts
        _remove_own(partial)  # left by a run that was killed while checking out
        if checkout_commit(req.checkout_dir) == commit:
            log(f"{req.checkout_dir} already at {commit}")
            return FetchResult(commit, checkout_id(req.checkout_dir)
                               or _new_checkout_id(req.checkout_dir), ref_kind=kind)
        partial.mkdir(parents=True)
        _local_ok(partial, ["init", "-q"], registry)
        _run(partial, ["fetch", "--depth", "1", "--no-tags", "--", cache.as_uri(), commit],
             log, registry)
    return _finish_checkout(req, partial, commit, kind, log, registry)


def _remove_own(path: Path) -> None:
    """Remove a folder of the fetch's own (a half-made ``.partial``, a replaced ``.old``): a
    link or a file in its place is removed as such, never followed (rmtree refused a link with
    an error, and the fetch failed until the user removed it)."""
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


def _finish_checkout(req: FetchRequest, partial: Path, commit: str, kind: str, log: Logger,
                     registry: proc.ChildRegistry | None) -> FetchResult:
    """Check out the fetched commit in ``partial`` and rename it into place when complete
    (an older checkout with the user's work is moved aside, never deleted)."""
    _run(partial, ["checkout", "-q", "--detach", "FETCH_HEAD"], log, registry)
    if req.submodules:
        _run(partial, [*insteadof_args(req.mirror), "submodule", "update", "--init",
                       "--recursive", "--depth", "1"], log, registry)
    token = _new_checkout_id(partial)
    saved = None
    if req.checkout_dir.exists():  # an older ref: replace the source, never a build tree
        old = req.checkout_dir.with_name(req.checkout_dir.name + ".old")
        _remove_own(old)
        keep = req.save_root is not None and _holds_user_work(req)
        req.checkout_dir.rename(old)
        partial.rename(req.checkout_dir)
        if keep and req.save_root is not None:
            saved = req.save_root / f"checkout-{time.strftime('%Y%m%d-%H%M%S')}"
            saved.parent.mkdir(parents=True, exist_ok=True)
            old.rename(saved)
            log(f"the old checkout holds commits or edits of yours: moved to {saved}")
        else:
            _remove_own(old)
    else:
        partial.rename(req.checkout_dir)
    log(f"checked out {commit} in {req.checkout_dir}")
    return FetchResult(commit, token, saved, ref_kind=kind, fresh=True)
