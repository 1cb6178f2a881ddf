"""The verification `KERNEL_PREFLIGHT=1` puts in front of a `kernels` load.

The principle (docs/flag.md): under the flag the loader's own pick is
loaded when it works; every refusal of the loader happens as and when the
loader makes it; the only differences from plain `kernels` are a working
variant instead of a dying or failing one, an exception instead of death,
and `has_kernel` answering from evidence.

So the loader runs as it always does, step by step, and this module only
stands between two of its steps:

1. Its resolver answers where each kernel of the tree is (publisher trust,
   pin, its pick by name). `VerifyingResolver` passes that answer through
   unchanged and remembers which of the loader's resolvers gave it.
2. The loader validates the tree (python-depends allowlist, minimum
   `kernels`, architecture) with its own validators; a refusal is its own
   exception, raised before anything is downloaded.
3. Where the loader installs the tree (downloads the pick online), the
   tree built here installs the pick the same way, then probes it in a
   child (`preflight check`). When it passes, the pick is what is loaded.
   Only when it fails do the loader's other candidates get a turn, in the
   loader's own preference order: each is first checked by the loader's
   validators (a refused candidate is never downloaded, never probed),
   then fetched when it is not on disk, then probed; the first that works
   is loaded.
4. The loader imports what step 3 answered, with its own code.

When nothing works: where the loader would have raised (the pick's import
raises a Python exception), the loader imports the pick and raises its own
exception, with preflight's table of variants as a note; where it would
have died or had nothing to load, `KernelLoadError`, a `FileNotFoundError`
(`_hub`).
"""

from __future__ import annotations

import contextvars
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional, Sequence

from . import _loader
from ._binary import PreflightError, Started, find_preflight, run_json

if TYPE_CHECKING:
    from ._types import Candidate

_SCOPE: contextvars.ContextVar[Optional["_Scope"]] = contextvars.ContextVar("kernel_preflight_scope", default=None)

# The pick's metadata files the loader failed to read while a verified
# resolution ran (`_enable`'s reader appends to it).
FAILED_READS: contextvars.ContextVar[Optional[list]] = contextvars.ContextVar(
    "kernel_preflight_failed_reads", default=None
)

# What this process already verified: (pick, backend, dependencies) -> the
# location loaded. A process loads a kernel's variant once (`kernels` keeps
# it), so a later load of the same pick probes nothing again.
_CHOSEN: dict[tuple, Any] = {}


class _Scope:
    """A verified load asked for by a call (`kernel_preflight.get_kernel`)
    rather than by the whole process."""

    def __init__(self, python: Optional[str]) -> None:
        self.python = python


def active_scope() -> Optional[_Scope]:
    """The scope of the call being served, if a call asked for one."""
    return _SCOPE.get()


def python_of(scope: Optional[_Scope], default: Optional[str]) -> str:
    """The interpreter the probes run in: the call's, else the process's
    (`enable(python=…)`), else this one."""
    if scope is not None and scope.python is not None:
        return scope.python
    return default or sys.executable


def enter_scope(python: Optional[Any]) -> Any:
    """Makes the calls that follow, in this context, a verified load asked
    for by a call (`_enable.scope`); the token `leave_scope` takes."""
    return _SCOPE.set(_Scope(os.fspath(python) if python is not None else None))


def leave_scope(token: Any) -> None:
    _SCOPE.reset(token)


def _kernels(name: str) -> Any:
    """The loader's module `name` (`"resolver"`) in the installed release."""
    return _loader.current().module(name)


def _native() -> Any:
    """The loader's compiled module (`KernelVersion`, `Metadata`)."""
    return _loader.current().native()


# ---------------------------------------------------------------- the tree


def verified_tree(tree: Any, resolver: "VerifyingResolver", *, api: Any, answer_only: bool) -> Any:
    """The loader's kernel tree, as a tree whose `install` verifies each
    kernel (its dependencies first) and whose `load` says why when the
    loader's import of a failed pick raises. For `has_kernel`
    (`answer_only`), which never installs, the verification runs now: a
    tree whose kernels do not all have a working variant raises
    `KernelLoadError`, which `has_kernel` answers with False."""
    node = _tree_class().of(tree, resolver)
    if not answer_only:
        return node
    node.validate_picks()
    return node.install(api=api, answer_only=True)


_TREE: Optional[type] = None


def _tree_class() -> type:
    """`_VerifiedTree`, made on first use: it derives from the loader's
    `DepTreeNode`, which exists only once `kernels` is imported."""
    global _TREE
    if _TREE is not None:
        return _TREE
    class _VerifiedTree(_kernels("deps").DepTreeNode):  # type: ignore[misc, valid-type]
        """A `kernels.deps.DepTreeNode` (so every check of the loader on
        its type holds) with the verification between install and load."""

        resolver: Optional[VerifyingResolver] = None
        note: Optional[str] = None

        @classmethod
        def of(cls, tree: Any, resolver: Optional[VerifyingResolver]) -> Any:
            node = cls(location=tree.location, deps={r: cls.of(d, resolver) for r, d in tree.deps.items()})
            node.resolver = resolver
            return node

        def validate_metadata(self, *args: Any, **kwargs: Any) -> None:
            """The loader's own validation of the tree's metadata; once it
            passed, each pick remembers the validator that accepted it."""
            super().validate_metadata(*args, **kwargs)
            validator = args[0] if args else next(iter(kwargs.values()), None)
            if self.resolver is not None and validator is not None:
                self.resolver.accepted(self.location, validator)

        def validate_picks(self) -> None:
            """The validators every loading entry point applies, on each
            kernel's pick (has_kernel answers for get_kernel)."""
            for dep in self.deps.values():
                dep.validate_picks()
            if self.resolver is not None:
                self.resolver.validate_pick(self.location)

        def install(self, *, api: Any, answer_only: bool = False) -> Any:  # type: ignore[override]
            deps = {r: d.install(api=api, answer_only=answer_only) for r, d in self.deps.items()}
            location, note = self.location, None
            if self.resolver is not None:
                paths = {r: os.fspath(d.location.variant_path) for r, d in deps.items()}
                location, note = self.resolver.verify(
                    self.location, api=api, dependencies=paths, answer_only=answer_only
                )
            node = type(self)(location=location, deps=deps)
            node.note = note
            return node

        def load(self) -> Any:
            try:
                return super().load()
            except BaseException as e:
                if self.note is not None and self.note not in getattr(e, "__notes__", ()):
                    from ._errors import _note

                    _note(e, self.note)
                raise

    _TREE = _VerifiedTree
    return _TREE


# ---------------------------------------------------------------- the resolver


class VerifyingResolver:
    """A `kernels` resolver (its `Resolver` protocol) that answers exactly
    what the loader's own resolver answers, remembering which of the
    loader's resolvers answered, so that the tree can verify the pick when
    the loader installs it. The one answer it changes is a refusal the
    loader makes only because the pick's files are broken or half there: a
    pick whose `metadata.json` cannot be read, and (offline) a snapshot the
    hub's own `get_kernel` fetched one variant of; there the working
    candidate in the loader's order is answered instead."""

    def __init__(self, inner: Any, *, python: str) -> None:
        self.inner = inner
        self.python = python
        self._picks: dict[int, _Pick] = {}

    def resolve(self, *, api: Any, backend: Optional[str], kernel: Any) -> Any:
        failed: list = []
        token = FAILED_READS.set(failed)
        leaf = None
        try:
            location = None
            for leaf in _leaves(self.inner):
                location = leaf.resolve(api=api, backend=backend, kernel=kernel)
                if location is not None:
                    break
        except Exception as e:
            if failed:
                pick = _Pick(self, None, kernel, backend, leaf, unreadable=Path(failed[-1][0]).parent)
                return pick.instead_of_unreadable(api, e)
            cached = self._from_the_cache(e, kernel=kernel, backend=backend, leaf=leaf)
            if cached is None:
                raise
            return cached
        finally:
            FAILED_READS.reset(token)
        if location is not None:
            pick = _Pick(self, location, kernel, backend, leaf)
            pick.ask_the_cache(self.python)
            self._picks[id(location)] = pick
        return location

    def accepted(self, location: Any, validator: Any) -> None:
        """The loader's `validator` accepted the pick `location`."""
        pick = self._picks.get(id(location))
        if pick is not None:
            pick.accepted_by = validator

    def validate_pick(self, location: Any) -> None:
        """The loader's default validators on a pick; a refusal is a
        `KernelLoadError` (has_kernel's False), never its `ValueError`."""
        pick = self._picks.get(id(location))
        if pick is None:
            return
        try:
            _validate(location.metadata, location.variant_str, arch=False)
        except Exception as e:
            raise _no_variant(pick.repo_id, [], [(location.variant_str, e)]) from e

    def verify(
        self, location: Any, *, api: Any, dependencies: dict[str, str], answer_only: bool
    ) -> tuple[Any, Optional[str]]:
        """The location to load instead of the loader's pick `location`
        (the pick itself when it works), and a note for the loader's own
        error when it is left to raise it."""
        pick = self._picks.get(id(location))
        if pick is None:  # answered here already (an unreadable pick's stand-in)
            return location, None
        return pick.verify(api, _Probes(self.python, dependencies), answer_only=answer_only)

    def _from_the_cache(self, error: BaseException, *, kernel: Any, backend: Optional[str], leaf: Any) -> Any:
        """Offline, `kernels` 0.17.2 with `huggingface_hub` 2.4 refuses a
        cached snapshot whose tree listing names files that were never
        fetched — which is every snapshot its own online `get_kernel`
        fetched, one variant of it. That snapshot's variants on disk are
        the candidates instead, in the loader's order; None when that is
        not the refusal or there is no such snapshot either."""
        from huggingface_hub.errors import LocalEntryNotFoundError

        if not isinstance(error, FileNotFoundError) or not isinstance(error.__cause__, LocalEntryNotFoundError):
            return None
        pin = _cache_pin(leaf, kernel)
        if pin is None:
            return None
        try:
            doc, _ = run_json(["resolve", "--repo", kernel.repo_id, *pin, "--python", self.python], answers=(0, 1))
        except PreflightError:
            return None  # no such snapshot either: the loader's error stands
        paths = [Path(d["path"]) for d in doc.get("decisions", []) if d.get("path")]
        if not paths:
            return None
        pick = _Pick(self, None, kernel, backend, leaf, unreadable=None)
        return pick.instead_of_refused(error, paths[0].parent)


def _leaves(resolver: Any) -> Iterator[Any]:
    """The resolvers a `SequentialResolver` tries, in its order (it answers
    with the first that answers), so that the one that answered is known."""
    if isinstance(resolver, _kernels("resolver").SequentialResolver):
        for inner in resolver.resolvers:
            yield from _leaves(inner)
    else:
        yield resolver


def _cache_pin(resolver: Any, kernel: Any) -> Optional[list[str]]:
    """The pin a resolver that reads the hub cache gives `kernel`, as
    `resolve`'s arguments (a lock's commit, else the kernel's own pin)."""
    resolvers = _kernels("resolver")
    if isinstance(resolver, resolvers.LockedHubCacheResolver):
        lock = resolver.kernel_locks.get(kernel, None)
        return None if lock is None else ["--revision", str(lock.commit)]
    if isinstance(resolver, resolvers.HubCacheResolver):
        if isinstance(kernel.version, _native().KernelVersion.Version):
            return ["--version", str(kernel.version.version)]
        return ["--revision", str(kernel.version.revision)]
    return None


class _Probes:
    """How probes run: in which interpreter, and with which verified
    variants of the kernels a kernel depends on (repo id -> variant)."""

    def __init__(self, python: str, dependencies: dict[str, str]) -> None:
        self.python = python
        self.dependencies = dependencies

    def env(self) -> Optional[dict[str, str]]:
        """The probes' `LOCAL_KERNELS`: the user's overrides, then the
        verified dependencies (the loader's first resolver reads it)."""
        if not self.dependencies:
            return None
        entries = [e for e in os.environ.get("LOCAL_KERNELS", "").split(":") if e]
        entries += [f"{repo}={path}" for repo, path in sorted(self.dependencies.items())]
        return {"LOCAL_KERNELS": ":".join(entries)}

    def key(self) -> tuple:
        return (self.python, tuple(sorted(self.dependencies.items())))

    def run(self, variants: Sequence[Path]) -> list["Candidate"]:
        """Each variant probed in a child of its own (`preflight check`,
        answered from the outcome cache when it holds them), in order."""
        return [_candidate(target, found) for target, found in self.results(variants)]

    def results(
        self, variants: Sequence[Path], *, verdicts: Optional[str] = None
    ) -> list[tuple[str, Optional[dict]]]:
        """`run`'s answers as `check` printed them: each variant's absolute
        path and its result document (None when there was none). A pick
        that passes needs nothing more, so the warm path builds no
        `Candidate` (whose module's dataclasses cost a fresh process more
        than the rest of the verification: docs/performance.md).
        `verdicts`: the hub's acceptance of some of them as this process's
        loader judged it, one JSON line each (`_verdict`)."""
        if not variants:
            return []
        targets = [os.path.abspath(v) for v in variants]
        args = ["check", *targets, "--python", self.python]
        if verdicts is None:
            doc, _ = run_json(args, answers=(0, 1), env=self.env())
        else:
            import tempfile

            with tempfile.NamedTemporaryFile("w", prefix="preflight-verdicts-", suffix=".jsonl") as f:
                f.write(verdicts)
                f.flush()
                doc, _ = run_json([*args, "--verdicts", f.name], answers=(0, 1), env=self.env())
        found = {os.path.abspath(r["path"]): r for r in doc.get("results", [])}
        return [(target, found.get(target)) for target in targets]


class _Early:
    """What the outcome cache says of a pick on disk, asked as soon as the
    loader's resolver answered it (`check --cached`: nothing is probed, so
    nothing of a variant the loader's validators will refuse runs), while
    the loader goes on to validate it. Warm, the answer is there when the
    loader installs the pick: the check cost the call no wait. Warmer
    still, the command's ticket answers in this process and no child
    starts at all (`_ticket`)."""

    def __init__(self, variant: str, python: str) -> None:
        from . import _ticket

        self.variant = variant
        self.python = python
        self._run: Optional[Started] = None
        self._doc: Optional[Any] = None
        args = ["check", variant, "--python", python, "--cached"]
        try:
            binary = str(find_preflight())
        except PreflightError:
            return
        self._doc = _ticket.answer(binary, [*args, "--json"])
        if self._doc is None:
            ticket = _ticket.path_for(binary, [*args, "--json"])
            extra = ["--ticket", ticket] if ticket is not None else []
            self._run = Started([*args, *extra], binary=Path(binary))

    def answer(self, targets: Sequence[str], probes: "_Probes") -> Optional[dict]:
        """The cache's result for `targets`, when it is the question asked
        early (the same single variant, interpreter and environment: no
        verified dependencies in it); None otherwise."""
        run, self._run = self._run, None
        doc, self._doc = self._doc, None
        if run is None and doc is None:
            return None
        if list(targets) != [self.variant] or probes.python != self.python or probes.env() is not None:
            if run is not None:
                run.discard()
            return None
        if run is not None:
            doc = run.answer()
        if not isinstance(doc, dict):
            return None
        found = [r for r in doc.get("results", []) if os.path.abspath(r.get("path", "")) == self.variant]
        return found[0] if found else None

    def discard(self) -> None:
        run, self._run = self._run, None
        self._doc = None
        if run is not None:
            run.discard()


def _passed(result: Optional[dict]) -> bool:
    """Whether a `check` result document says the variant works here."""
    return result is not None and result.get("outcome", {}).get("kind") == "pass"


def _candidate(target: str, result: Optional[dict]) -> "Candidate":
    from ._types import Candidate, Outcome

    if result is None:  # preflight said nothing of it: not a pass
        outcome = Outcome(kind="probe_error", message="preflight check reported nothing for this variant")
        return Candidate(variant=Path(target).name, path=target, outcome=outcome)
    return Candidate.from_json(result)


# ---------------------------------------------------------------- one pick


class _Pick:
    """The loader's pick of one kernel, where it came from, and how to find
    the candidates that come after it in the loader's order."""

    def __init__(
        self,
        resolver: VerifyingResolver,
        location: Any,
        kernel: Any,
        backend: Optional[str],
        leaf: Any,
        *,
        unreadable: Optional[Path] = None,
    ) -> None:
        self.resolver = resolver
        self.location = location
        self.kernel = kernel
        self.backend = backend
        self.leaf = leaf
        self.unreadable = unreadable
        # The outcome cache's answer, asked early (`ask_the_cache`).
        self.early: Optional[_Early] = None
        # The loader's metadata validator that accepted the pick, once it
        # did (`VerifyingResolver.accepted`).
        self.accepted_by: Any = None

    @property
    def repo_id(self) -> str:
        return self.kernel.repo_id

    def remote(self) -> Any:
        """The pinned hub repository the candidates are fetched from, or
        None when the loader answered from disk."""
        if isinstance(self.location, _kernels("resolver").RemoteKernel):
            return _Pinned(self.location.repo_id, self.location.revision)
        if self.unreadable is not None and _fetches(self.leaf):
            snapshot = self.unreadable.parent.parent
            if self.unreadable.parent.name == "build" and snapshot.parent.name == "snapshots":
                return _Pinned(self.repo_id, snapshot.name)
        return None

    def explicit(self, variant: Path) -> bool:
        """Whether the caller named this very variant folder (a local path
        that holds a `metadata.json`): the loader loads exactly it, and has
        no other candidate."""
        resolvers = _kernels("resolver")
        if isinstance(self.leaf, resolvers.RepoPathsResolver):
            named = self.leaf.local_kernels.get(self.repo_id)
        elif isinstance(self.leaf, resolvers.KernelPathsResolver):
            named = self.leaf.kernel_paths.get(self.kernel, None)
        else:
            return False
        return named is not None and os.path.abspath(named) == os.path.abspath(variant)

    def ask_the_cache(self, python: str) -> None:
        """Starts asking the outcome cache about the pick (`_Early`) when
        it is on disk already (the loader installs nothing for it) and this
        process has not verified it yet."""
        if isinstance(self.location, _kernels("resolver").RemoteKernel):
            return
        path = getattr(self.location, "variant_path", None)
        if path is None or not os.path.isdir(path):
            return
        identity = _identity(self.location)
        if any(key[0] == identity and key[1] == self.backend for key in _CHOSEN):
            return
        self.early = _Early(os.path.abspath(path), python)

    def verify(self, api: Any, probes: _Probes, *, answer_only: bool) -> tuple[Any, Optional[str]]:
        early, self.early = self.early, None
        key = (_identity(self.location), self.backend, probes.key())
        known = _CHOSEN.get(key)
        if known is not None:
            if early is not None:
                early.discard()
            return known, None
        cached = None
        try:
            installed = self.location.install(api=api)
            variant = Path(installed.variant_path)
            if early is not None:
                cached = early.answer([os.path.abspath(variant)], probes)
            if not _passed(cached):
                # The loader validates what it installed before it loads
                # it: a refusal (a digest that does not match) is its own,
                # raised here before anything of the pick runs, even in a
                # probe. A cached pass runs nothing: the loader's own check
                # after this install says it, once (a local kernel's files
                # are hashed once, not twice).
                _validate_kernel(installed)
        except BaseException:
            if early is not None:
                early.discard()
            raise
        if _passed(cached):
            _CHOSEN[key] = installed
            return installed, None
        remote = self.remote()
        if remote is not None:
            _fetch_benchmarks(api, remote, variant.parent.parent)
        # The loader has judged its pick (its validators, and from 0.18 its
        # digest check, just passed): the probe takes that verdict rather
        # than importing the loader again to judge it (`_verdict`).
        ((target, result),) = probes.results([variant], verdicts=_verdict(installed, self.accepted_by))
        if _passed(result):
            _CHOSEN[key] = installed
            return installed, None
        tried = _candidate(target, result)
        chosen, others, refused = self.candidates(api, probes, after=variant)
        if chosen is not None:
            _CHOSEN[key] = chosen
            return chosen, None
        error = _no_variant(self.repo_id, [tried, *others], refused)
        if _raises_in_import(tried) and not answer_only:
            # The loader's own import of its pick raises rather than dies:
            # its exception, with the reasons of every variant as a note.
            return installed, str(error)
        raise error

    def instead_of_unreadable(self, api: Any, error: BaseException) -> Any:
        """The loader could not read its pick's `metadata.json` and raised
        `error`: the working candidate after it in the loader's order; when
        none works, `error`'s types and message with the reasons of every
        variant."""
        variant = self.unreadable
        assert variant is not None
        if self.explicit(variant):
            raise _no_variant(self.repo_id, [], [(variant.name, error)], loader_error=error) from error
        probes = _Probes(self.resolver.python, {})
        remote = self.remote()
        if remote is not None:
            _fetch_benchmarks(api, remote, variant.parent.parent)
        chosen, others, refused = self.candidates(api, probes, after=variant)
        if chosen is not None:
            return chosen
        refused = [(variant.name, error), *refused]
        raise _no_variant(self.repo_id, others, refused, loader_error=error) from error

    def instead_of_refused(self, error: BaseException, build: Path) -> Any:
        """The loader refused a cached snapshot whose variants are on disk
        (`_from_the_cache`): the first that works, in the loader's order."""
        probes = _Probes(self.resolver.python, {})
        chosen, others, refused = self._first_working(None, None, probes, _accepted_local(build, self.backend), build)
        if chosen is not None:
            return chosen
        raise _no_variant(self.repo_id, others, refused, loader_error=error) from error

    def candidates(
        self, api: Any, probes: _Probes, *, after: Path
    ) -> tuple[Any, list["Candidate"], list[tuple[str, BaseException]]]:
        """The first working candidate after the pick `after`, in the
        loader's order: validated by the loader's validators first,
        fetched only then (online), probed last."""
        if self.explicit(after):
            return None, [], []
        remote = self.remote()
        build = after.parent
        if remote is None:
            names = _accepted_local(build, self.backend)
        else:
            # The listing the loader's hub resolver read its pick from (its
            # module's own name for it), in the loader's order.
            listed = _kernels("resolver").get_variants(api, repo_id=remote.repo_id, revision=remote.revision)
            names = [v.variant_str for v in _kernels("variants").resolve_variants(listed, self.backend)[0]]
        names = [n for n in names if n != after.name]
        return self._first_working(api, remote, probes, names, build)

    def _first_working(
        self, api: Any, remote: Optional[_Pinned], probes: _Probes, names: list[str], build: Path
    ) -> tuple[Any, list["Candidate"], list[tuple[str, BaseException]]]:
        """The first of `names` (variants of `build`, in the loader's order)
        that the loader's validators accept and that passes its probe.
        Those on disk are probed together; one that is not is fetched from
        `remote` (None: nothing is fetched) only when every one before it
        failed, and only after its `metadata.json` passed the validators.
        A candidate's files are checked by the loader's kernel validators
        (its digest check, from 0.18) before it is probed."""
        refused: list[tuple[str, BaseException]] = []
        metadata: dict[str, Any] = {}

        def accepted(name: str) -> bool:
            try:
                path = build / name / "metadata.json"
                if not path.is_file() and remote is not None:
                    path = _fetch_metadata(api, remote, name)
                metadata[name] = _read(path)
                _validate(metadata[name], name, arch=True)
            except Exception as e:
                refused.append((name, e))
                return False
            return True

        def located(name: str) -> Any:
            origin = None if remote is None else _remote_origin(remote, name, metadata[name])
            return _local(build / name, metadata[name], origin)

        def intact(name: str) -> bool:
            try:
                _validate_kernel(located(name))
            except Exception as e:
                refused.append((name, e))
                return False
            return True

        on_disk = [n for n in names if (build / n / "metadata.json").is_file() and accepted(n) and intact(n)]
        results = {c.variant: c for c in probes.run([build / n for n in on_disk])}
        probed: list[Candidate] = []
        for name in names:
            if name not in results:
                if remote is None or name in on_disk or not accepted(name):
                    continue
                _fetch(api, remote, [f"build/{name}/*"])
                if not intact(name):
                    continue
                results.update({c.variant: c for c in probes.run([build / name])})
            tried = results[name]
            probed.append(tried)
            if tried.outcome.passed:
                _kernels("validate").DirtyValidator().validate_metadata(metadata=metadata[name], variant=name)
                return located(name), probed, refused
        return None, probed, refused


def _raises_in_import(tried: "Candidate") -> bool:
    """Whether the variant's import raised a Python exception that its
    child survived: the loader's own import of it raises, rather than
    ending its caller."""
    outcome = tried.outcome
    return outcome.phase == "import" and outcome.raised is not None


def _no_variant(
    repo_id: str,
    probed: Sequence["Candidate"],
    refused: Sequence[tuple[str, BaseException]],
    loader_error: Optional[BaseException] = None,
) -> BaseException:
    from ._errors import KernelLoadError
    from ._types import Selection

    selection = Selection(chosen=None, alternatives=list(probed), cached=False, raw={})
    if loader_error is None:
        return KernelLoadError(repo_id, selection, refused)
    return KernelLoadError.carrying(loader_error, repo_id, selection, refused)


def _identity(location: Any) -> tuple:
    if isinstance(location, _kernels("resolver").RemoteKernel):
        return ("remote", location.repo_id, str(location.revision), location.variant_str)
    return ("local", os.path.abspath(location.variant_path))


class _Pinned:
    """A kernel repository at one commit, as the loader resolved it
    (`revision`, a `str` for the hub's client whatever type the loader
    gave it)."""

    def __init__(self, repo_id: str, revision: Any) -> None:
        self.repo_id = repo_id
        self.revision = str(revision)


def _fetches(resolver: Any) -> bool:
    """Whether `resolver` fetches from the hub."""
    resolvers = _kernels("resolver")
    return isinstance(resolver, (resolvers.HubResolver, resolvers.LockedHubResolver))


def _accepted_local(folder: Path, backend: Optional[str]) -> list[str]:
    """The variants in `folder` the loader accepts by name here, in its
    preference order (its own code decides)."""
    variants = _kernels("variants")
    accepted, _ = variants.resolve_variants(variants.get_variants_local(folder), backend)
    return [v.variant_str for v in accepted]


def _validate(metadata: Any, variant: str, *, arch: bool) -> None:
    """The loader's validators that refuse (its dirty-build check only
    warns, and is left to the variant that is loaded)."""
    validate = _kernels("validate")
    validators: list[Any] = [validate.DependencyValidator(), validate.MinverValidator()]
    if arch:
        validators.append(validate.ArchValidator())
    for validator in validators:
        validator.validate_metadata(metadata=metadata, variant=variant)


def _verdict(kernel: Any, validator: Any) -> Optional[str]:
    """The hub's acceptance of an installed pick as a probe would judge it
    (`probes/python/hub_bridge.py`, `by_kernels`: the loader's parser, its
    default metadata validators and its arch check, and from 0.18 its
    digest check), when this process's loader has just decided exactly
    that: `validator` (what accepted the pick's metadata) includes each of
    those validators, and the digest check, where the release has one, ran
    in `_validate_kernel`. One line of the judge's format
    (`probes/python/judge.py`), or None when the loader checked less (an
    entry point without the arch check): the probe then judges it."""
    import json

    release = _loader.current()
    validate = release.module("validate")
    checked: set = set()
    pending = [validator]
    while pending:
        v = pending.pop()
        inner = getattr(v, "validators", None)
        if isinstance(inner, (list, tuple)):
            pending.extend(inner)
        else:
            checked.add(type(v))
    needed = {type(v) for v in validate.default_metadata_validators()} | {validate.ArchValidator}
    if validator is None or not needed <= checked:
        return None
    variant = os.path.abspath(kernel.variant_path)
    try:
        with open(os.path.join(variant, "metadata.json"), "rb") as f:
            raw = f.read()
    except OSError:
        return None
    who = "kernels " + str(sys.modules["kernels"].__version__)
    return json.dumps({"variant": variant, "metadata": raw.decode("latin-1"), "who": who, "refused": None}) + "\n"


def _validate_kernel(kernel: Any) -> None:
    """The loader's kernel validators that refuse (its digest check, from
    0.18) on an installed kernel not yet imported. Their warnings (no
    digest recorded) are muted here: the loader's own pass over the tree
    it loads says them, once, as without kernel_preflight."""
    release = _loader.current()
    if not release.validates_kernels:
        return
    validate = release.module("validate")
    with release.muted(validate):
        validate.DigestValidator().validate_kernel(kernel=kernel)


def _read(path: Path) -> Any:
    return _native().Metadata.read_from_file(path)


def _local(variant: Path, metadata: Any, origin: Any) -> Any:
    return _kernels("resolver").LocalKernel(variant_path=variant, metadata=metadata, origin=origin)


def _remote_origin(pinned: _Pinned, name: str, metadata: Any) -> Any:
    return _kernels("resolver").RemoteKernel(
        repo_id=pinned.repo_id,
        revision=_loader.current().revision(pinned.revision),
        metadata=metadata,
        variant=_kernels("variants").parse_variant(name),
    )


def _fetch_metadata(api: Any, pinned: _Pinned, name: str) -> Path:
    """A candidate's `metadata.json`, fetched as the loader fetches its
    pick's: the one file, before any of the variant's code."""
    return Path(
        api.hf_hub_download(
            pinned.repo_id,
            repo_type="kernel",
            filename=f"build/{name}/metadata.json",
            cache_dir=_loader.current().cache_dir(),
            revision=pinned.revision,
            local_files_only=False,
        )
    )


def _fetch(api: Any, pinned: _Pinned, patterns: list[str]) -> None:
    """Files of the pinned snapshot, as the hub loader fetches a variant."""
    api.snapshot_download(
        pinned.repo_id,
        repo_type="kernel",
        allow_patterns=patterns,
        ignore_patterns=_kernels("resolver")._BYTECODE_IGNORE_PATTERNS,
        cache_dir=_loader.current().cache_dir(),
        revision=pinned.revision,
        local_files_only=False,
    )


def _fetch_benchmarks(api: Any, pinned: _Pinned, snapshot: Path) -> None:
    """The repository's `benchmarks/` (its smoke source: a few small
    scripts), unless this snapshot has it; a repository without one, or a
    failed fetch, leaves the probes without a smoke of its own."""
    if (snapshot / "benchmarks").is_dir():
        return
    try:
        _fetch(api, pinned, ["benchmarks/*"])
    except Exception:  # the smoke is evidence on top; the load goes on
        pass
