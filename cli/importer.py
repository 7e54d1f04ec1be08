"""`llmtap import FILE…`: HAR files and mitmproxy flow files, through the same translators
and writer as live traffic, with a progress bar; and the writer's `rejected.jsonl`, whose
lines are whole records (`storage/rejected.py`), loaded back through the same writer.

Files are read as a stream and no faster than the writer stores (at most WAITING records
in between), so memory does not grow with the file. An entry that is not an LLM generation
is counted and skipped; an entry that cannot be read is reported in one line and skipped;
a file that is neither format is a one-line error; a HAR that breaks off keeps what came
before, then is a one-line error.

Who sent each entry is the import's own decision (SPEC §4), never the file's word: with
`[auth]` in the config only a captured `Proxy-Authorization` that checks names a team
(`storage/ingest.py`); `--team` names the team of entries no rule names (attribution
`import`); the trusted-host rule is decided again for every entry and every line of a
rejected or spool file (`storage/imported.py`).

Not responsible for decoding or storage themselves.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llmtap.cli import settings as settings_module
from llmtap.cli.errors import UsageError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress

    from llmtap.storage.credentials import ProxyCredentials
    from llmtap.storage.followups import FollowUp
    from llmtap.storage.ingest import HttpExchange
    from llmtap.storage.record import Recorded
    from llmtap.storage.rows import RowSet
    from llmtap.storage.secrets import KeyFingerprinter
    from llmtap.storage.sink import RecordSink
    from llmtap.storage.writer import Writer

    Item = HttpExchange | Recorded | RowSet | FollowUp

WAITING = 500  # records handed to the writer and not yet stored, at most (see `_keep_up`)
STALLED = 30.0  # seconds without a record stored before the import stops waiting for the writer


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "import",
        help="import HAR files, mitmproxy flow files and agent session logs into the store",
        description="Decode the LLM exchanges in HAR files (browser or proxy exports) and "
        "mitmproxy flow files and store them like live traffic. An entry's team follows the "
        "proxy's rules: with [auth] in the config, only a captured Proxy-Authorization whose "
        "password checks names a team (the X-LLMTap-Team header names no one); without it, "
        "the proxy-auth user name and the header are taken as the proxy takes them. The key "
        "map applies either way. Only traffic to a provider's API host is priced, whatever "
        "the file says (a rejected file's lines too). Claude Code, Codex and Gemini CLI session "
        "logs (files or folders, such as ~/.claude/projects) are imported as the calls they "
        "logged, each once, leaving out those the store already recorded.",
    )
    parser.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="HAR files, mitmproxy flow files, agent session logs and folders of them",
    )
    parser.add_argument(
        "--bodies", choices=("none", "metadata", "full"), help="what to keep of the bodies (default metadata)"
    )
    parser.add_argument(
        "--team",
        metavar="TEAM",
        help="the team of entries no rule names (attribution `import`), with or without [auth]; "
        "an entry whose credentials, header (without [auth]) or key map name a team keeps it",
    )
    settings_module.add_common(parser)
    parser.set_defaults(run=run)


@dataclass
class Counts:
    stored: int = 0  # handed to the writer (its stats say what the store took)
    skipped: int = 0
    unreadable: int = 0
    follow_ups: int = 0  # polls, resumed streams, cancels of background work (SPEC §1)
    held: int = 0  # agent-logged calls the store holds already (recorded live, or imported)
    logged: int = 0  # agent-logged calls read (each once)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from llmtap.cli.pricing import pricer_for
    from llmtap.cli.store import open_store
    from llmtap.storage.credentials import ProxyCredentials
    from llmtap.storage.importers import agent_logs
    from llmtap.storage.importers.har import HarError
    from llmtap.storage.store_secret import fingerprinter_for
    from llmtap.storage.writer import Writer

    given = [Path(p) for p in args.files]
    for path in given:
        if not path.is_file() and not path.is_dir():
            raise UsageError(f"no such file: {str(path)!r}")
    settings = settings_module.load(args)
    import_team = _import_team(args.team)
    engine = open_store(settings)
    # the store's secret, or refused; records fingerprinted here name it (`ingest.to_record`),
    # those loaded back from a rejected file keep the secret they name
    fingerprinter = fingerprinter_for(engine, settings.secret_file, by="import")
    writer = Writer(
        engine,
        spool_dir=settings.spool_dir,
        body_mode=settings.body_mode,
        enrich=pricer_for(settings, engine).price_rows,
    )
    rules = Rules(
        fingerprinter=fingerprinter,
        key_teams=settings.key_teams,
        # the config's [auth] table (team -> proxy password), as the proxy reads it
        credentials=ProxyCredentials(settings.auth) if settings.auth else None,
        import_team=import_team,
        providers=settings.provider_names(),  # [[providers]]: named and billed as the proxy does
    )
    counts = Counts()
    err = Console(stderr=True)
    broken: list[str] = []
    logs = AgentLogs(agent_logs.Seen(), agent_logs.Fresh(engine))
    found: set[Path | None] = set()  # the folders agent logs were found in
    try:
        with _progress(err) as progress:
            for path, folder in agent_logs.expand(given):
                reader = _agent_reader(path)
                if reader is not None:
                    found.add(folder)
                    _import_agent_log(path, reader, writer, counts, rules, logs, progress, err)
                    continue
                if folder is not None:  # a folder's other files: not what was asked for
                    continue
                source = _open(path)
                task = progress.add_task(path.name, total=source.total, in_bytes=source.position is not None)
                try:
                    for item, problem in source.items:
                        if source.position is None:
                            progress.advance(task)
                        else:
                            progress.update(task, completed=source.position())
                        if problem:
                            counts.unreadable += 1
                            err.print(f"[yellow]skipped[/] {path.name}: {escape(problem)}", highlight=False)
                            continue
                        assert item is not None
                        _submit(item, writer, counts, rules)
                        _keep_up(writer)
                except HarError as exc:  # the file breaks off: what came before it stays imported
                    broken.append(str(exc))
                finally:
                    source.close()
    finally:
        writer.close()
    print(_summary(writer, counts))
    broken += [
        f"{str(path)!r} holds no agent session logs (Claude Code, Codex, Gemini CLI): a folder is read for those only"
        for path in given
        if path.is_dir() and path not in found
    ]
    if broken:
        raise UsageError("; ".join(broken))
    return 0


def _summary(writer: Writer, counts: Counts) -> str:
    """What the import did, as the writer counted it: the exchanges of the files the store
    holds now (new, or stored before), not those handed to it (the database may refuse
    some, or be away)."""
    stats = writer.stats
    note = f", {stats.spooled} waiting in the spool (database unavailable)" if stats.spooled else ""
    if counts.follow_ups:
        note += f", {counts.follow_ups} polls of background work"
    if counts.logged:
        note += f"; of {counts.logged} calls in agent logs, {counts.held} were recorded already"
    if stats.rejected:
        note += f"; {stats.rejected} rejected by the database, kept in {writer.rejected_path}"
    return (
        f"imported {stats.written + stats.duplicates} LLM exchanges ({stats.duplicates} already stored), "
        f"skipped {counts.skipped} other requests and {counts.unreadable} unreadable entries{note}"
    )


@dataclass(frozen=True)
class Rules:
    """What decides who sent an entry (SPEC §4): the store's key fingerprints, the
    config's key map and `[auth]`, and `--team`."""

    fingerprinter: KeyFingerprinter
    key_teams: dict[str, str]
    credentials: ProxyCredentials | None
    import_team: str | None
    providers: Any = None  # protocols.providers.ProviderNames: the config's [[providers]] with the list's


def _import_team(value: str | None) -> str | None:
    """`--team`, checked: a name as a team is stored (teams.clean_team), nothing else."""
    from llmtap.storage.teams import clean_team

    if value is None:
        return None
    team = clean_team(value)
    if not team or team != value.strip():
        raise UsageError(f"--team wants a team name (printable, at most 200 characters), not {value!r}")
    return team


def _submit(item: Item, writer: RecordSink, counts: Counts, rules: Rules) -> None:
    """One item of a file to the writer: a record, a follow-up, or counted as skipped."""
    from llmtap.protocols.providers import DEFAULT
    from llmtap.storage.followups import FollowUp
    from llmtap.storage.imported import retrust
    from llmtap.storage.ingest import HttpExchange, to_follow_up, to_record

    if not isinstance(item, HttpExchange):  # a rejected or spool file's line: its id says whether it is stored
        retrust(item, rules.import_team, rules.providers or DEFAULT)
        writer.submit(item)
        if isinstance(item, FollowUp):  # no row of its own
            counts.follow_ups += 1
        else:
            counts.stored += 1
        return
    decide: dict[str, Any] = {
        "fingerprinter": rules.fingerprinter,
        "key_teams": rules.key_teams,
        "credentials": rules.credentials,
        "import_team": rules.import_team,
        "providers": rules.providers or DEFAULT,
    }
    record = to_record(item, **decide)
    if record is not None:
        writer.submit(record)
        counts.stored += 1
        return
    follow = to_follow_up(item, **decide)
    if follow is not None:  # changes the exchange it continues: no row of its own
        writer.submit(follow)
        counts.follow_ups += 1
    else:
        counts.skipped += 1


@dataclass(frozen=True)
class AgentLogs:
    """What an import knows of the agent-logged calls: those it took, those the store holds."""

    seen: Any  # storage.importers.agent_logs.Seen
    fresh: Any  # storage.importers.agent_logs.Fresh


def _agent_reader(path: Path) -> Any:
    """The agent log reader of `path`, or None for every other file (a rejected file too)."""
    from llmtap.storage import rejected
    from llmtap.storage.importers.agent_logs import reader_for

    if path.suffix not in (".jsonl", ".json") or rejected.looks_like_rejected(path):
        return None
    return reader_for(path)


AGENT_CHUNK = 200  # agent-logged calls checked against the store at once


def _import_agent_log(
    path: Path, reader: Any, writer: Writer, counts: Counts, rules: Rules, logs: AgentLogs, progress: Any, err: Any
) -> None:
    """One agent's session log: each call new to this import and to the store, stored as
    the provider's own answer would be (see storage/importers/agent_logs.py)."""
    from rich.markup import escape

    from llmtap.protocols.providers import DEFAULT
    from llmtap.storage.importers.agent_calls import as_http
    from llmtap.storage.importers.agent_logs import SOURCE
    from llmtap.storage.ingest import to_record

    task = progress.add_task(path.name, total=None, in_bytes=False)
    pending: list[Recorded] = []

    def flush() -> None:
        new = logs.fresh.new(pending)
        counts.held += len(pending) - len(new)
        for record in new:
            writer.submit(record)
            counts.stored += 1
            _keep_up(writer)
        pending.clear()

    try:
        with open(path, "rb") as handle:
            for call, problem in reader(handle, path.name):
                if problem:
                    counts.unreadable += 1
                    err.print(f"[yellow]skipped[/] {escape(problem)}", highlight=False)
                    continue
                if call is None or not logs.seen.first(call):
                    continue
                counts.logged += 1
                progress.advance(task)
                record = to_record(
                    as_http(call),
                    fingerprinter=rules.fingerprinter,
                    key_teams=rules.key_teams,
                    credentials=rules.credentials,
                    import_team=rules.import_team,
                    providers=rules.providers or DEFAULT,
                    source=SOURCE,
                )
                if record is None:
                    counts.skipped += 1
                    continue
                pending.append(record)
                if len(pending) >= AGENT_CHUNK:
                    flush()
            flush()
    except OSError as exc:
        raise UsageError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None


def _keep_up(writer: Writer) -> None:
    """Wait while more than WAITING records are submitted and not yet stored: the file is
    read no faster than the store takes it, so memory holds a bounded backlog, not the
    file. Gives up waiting when the writer settles nothing for STALLED seconds (it holds
    what neither the database nor the disk takes: memory grows then, as it must)."""
    seen, last = -1, time.monotonic()
    while writer.stats.submitted - writer.stats.settled > WAITING:
        now = writer.wait_settled(seen, 1.0)
        if now != seen:
            seen, last = now, time.monotonic()
        elif time.monotonic() - last > STALLED:
            return


def _progress(console: Console) -> Progress:
    from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

    from llmtap.cli.progress import shown

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        _done_column(),
        TimeRemainingColumn(),
        console=console,
        disable=not shown(),  # standard error a terminal, whatever FORCE_COLOR says (cli/progress.py)
    )


def _done_column() -> Any:
    """How much is done: a class made on first use, as rich is imported only when run."""
    from rich.progress import DownloadColumn, MofNCompleteColumn, ProgressColumn, Task
    from rich.text import Text

    class Done(ProgressColumn):
        """Bytes read of a file read as a stream; entries of one counted first."""

        def __init__(self) -> None:
            super().__init__()
            self.in_bytes, self.entries = DownloadColumn(), MofNCompleteColumn()

        def render(self, task: Task) -> Text:
            return (self.in_bytes if task.fields.get("in_bytes") else self.entries).render(task)

    return Done()


@dataclass
class Source:
    """A file's items, one at a time, and how far through it the import is: `position()`
    says the bytes read of `total` (the file's size), or is None when `total` counts items."""

    items: Iterator[tuple[Item | None, str | None]]
    total: int | None
    position: Callable[[], int] | None
    close: Callable[[], None]


def _open(path: Path) -> Source:
    from llmtap.storage import rejected
    from llmtap.storage.importers.flows import FlowFileError, looks_like_flows, read_flows
    from llmtap.storage.importers.har import HarError, NestingGuard, read_har

    try:
        if rejected.looks_like_rejected(path):
            # read whole first: a line refused again is appended to the writer's own
            # rejected file, which may be this one
            lines = list(rejected.read(path))
            return Source(iter(lines), len(lines), None, lambda: None)
        size = path.stat().st_size
        handle = open(path, "rb")  # noqa: SIM115 - closed by the caller through `Source.close`
        if looks_like_flows(path):
            return Source(_flows(read_flows(handle), FlowFileError), size, handle.tell, handle.close)
        guard = NestingGuard(handle)
        items = read_har(guard, str(path))
        try:
            first = next(items, None)  # a file that is no HAR at all is refused before anything is read
        except HarError as exc:
            handle.close()
            raise UsageError(str(exc)) from None
        rest = iter(()) if first is None else _chain(first, items)
        return Source(rest, size, lambda: guard.position, handle.close)
    except OSError as exc:
        raise UsageError(f"cannot read {str(path)!r}: {exc.strerror or exc}") from None


def _chain(first: Any, rest: Iterator[Any]) -> Iterator[Any]:
    yield first
    yield from rest


def _flows(items: Iterator[Any], error: type[Exception]) -> Iterator[Any]:
    try:
        yield from items
    except error as exc:
        raise UsageError(str(exc)) from None
