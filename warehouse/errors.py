"""Storage errors as the layers above see them: only this module knows DuckDB's exception types.

* `environment_error`: the machine's fault, not the input's or the code's (disk full, permissions, a file where a
  folder is needed or the reverse).
  The command line turns it into exit code 5 with one line (`flows/cli/process.py`), tasks that retry
  transient failures do not retry it (`flows/errors.py`), and the publish does not mistake it for a
  corrupted warehouse (`warehouse/publish.py`).
* `StorageError` and its kinds: a DuckDB or file operation of the warehouse failed (`QueryError`, a
  planner's SQL; `LakeRefreshFailed`, the Parquet copy of the records). `storage_error` says whether
  any other exception is DuckDB's, in one line, for the command line (exit code 2).
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

ENVIRONMENT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS}
# DuckDB reports a full disk as an IOException / TransactionException whose text carries the OS error
IO_ERROR_TYPES = ("IOException", "TransactionException", "FatalException")  # DuckDB's, by name
ENVIRONMENT_PHRASES = ("No space left on device", "Disk quota exceeded", "Permission denied", "Read-only file system")
# Polars (Rust) reports an OS error inside its own exception (a ComputeError when a Parquet write fills the disk:
# "parquet: File out of specification: underlying IO error: No space left on device (os error 28)")
_POLARS_OS_ERROR = re.compile(r"IO error: .*\(os error \d+\)")

# A URI's scheme: at most 32 characters (real ones are short: https, postgresql, mysql+pymysql), so a long run of
# letters or hex before a `://` costs each pattern linear time, not quadratic (review 82: 20,000 letters took 0.96 s).
SCHEME = r"[A-Za-z][A-Za-z0-9+.\-]{0,31}://"
# A URI in free text: scheme://, then the rest up to a space or a quote. A query string anywhere (`?name=...`, as an
# HTTP library quotes a request's path) to the same end.
_URI = re.compile(rf"""(?P<scheme>{SCHEME})(?P<rest>[^\s'"<>`]*)""")
_QUERY = re.compile(r"""[?#][^\s'"<>`=?#&]*=[^\s'"<>`]*""")
# User info whatever its characters: scheme://, then anything but a `/` or a line's end, to the last `@` before them. A
# password may hold a quote, a space, a backtick or `<` (`'` is legal unescaped in RFC 3986's user info), where `_URI`
# stops (review 77 S1-8: `http://alice:S3'cr3t@host` was printed, stored and published as it was).
_USER_INFO = re.compile(rf"(?P<scheme>{SCHEME})[^/\n]*@")
# The same within one word, across a `/` too: a password holding a `/` and a quote (`http://alice:S3'cr/et@host`) is
# reached by neither `_USER_INFO` (the `/`) nor `_URI` (the quote; review 81). Everything to the word's last `@` is
# masked, as `_redact_uri` masks a URI's; not across `","` (compact JSON: a URI, then an e-mail in another field).
_WORD_USER_INFO = re.compile(rf"""(?P<scheme>{SCHEME})(?:(?!["'],\s*["'])\S)*@""")
# `user:` then a password with a space and a `/` (`http://alice:pa ss/word@host`), which both stop at: a first word of
# `name:` (an e-mail too) and no port after it is user info up to an `@` at most two spaces on (review 81; more, and it
# is a sentence: `mlflow https://mlflow.corp.com: no experiment named 'team@gpu'`, review 82).
_SPACED_PASSWORD = re.compile(
    rf"""(?P<scheme>{SCHEME})[^\s/:\[\]]+:(?!\d{{1,5}}(?:[\s/).,;:'"`>\]!?]|$))[^\s@]*(?:[^\S\n]+[^\s@]*){{0,2}}@""")
# Where user info would span a space, the `@` may be a later word's: `http://mlflow:5000 (ask ops@example.com)` read
# `http://***@example.com)`, another host (review 78). The URI keeps its host only where the text before the space is
# a plain address (`_AUTHORITY`; quotes, brackets and the sentence's punctuation after it aside) and no later word
# holds a `:` (`user:password`; an e-mail's `mailto:` aside), or where that text holds the `@` and ends in host:port
# (`alice:pw@h:5000 ... ops@x`: masked to its own `@`). Anything else is masked whole: `alice@corp.com:pa ss@h`,
# `al ice:pw@h`, `al ice:pw x@h` and `alice: pw@h` showed the password (reviews 79-81). A word's one trailing `:`
# (`Error:`) is a sentence's; a time (`03:00`) or a proxy (`squid:3128`) later in the line masks the address to the
# e-mail's host, the safe side. A password whose text before a space is all digits (`alice:123 45@h`) still reads as a
# port and stays visible: a space is not legal in a URI's user info unescaped, and this is the rarer side.
_AUTHORITY = re.compile(r"(?:[\w.~-]+|\[[0-9A-Za-z:.%]+\])(?P<port>:\d{1,5})?")
_CLOSING = ").,;'\"`>]!?"  # what may close a sentence or a quote after an address
_MAILTO = re.compile(r"^\W*mailto:", re.IGNORECASE)
HIDDEN = "***"


def redact(text: str) -> str:
    """`text` with the secrets a URI may carry masked: its user info (`user:password@`), query string and fragment,
    so `http://alice:S3cret@host/mlflow?access_token=T` reads `http://***@host/mlflow?***`. A query string without
    its URI (`url: /mlflow?access_token=T/api/...`, as requests and urllib3 quote a request) is masked too. Applied
    wherever text that may hold a configured address is printed, logged or stored (`printable`, the run records of
    `warehouse/runs.py`): a tracking URI, PREFECT_API_URL or GPUCAST_DASK_ADDRESS may hold a password or a token,
    and planners read the run records. Apply it before cutting text short: a cut inside `user:pass@` hides the `@`
    that marks the user info."""
    if "://" not in text and "?" not in text and "#" not in text:
        return text
    for _ in range(4):  # until nothing changes: a query masked may join words another rule then reads (review 81)
        masked = _redact_once(text)
        if masked == text:
            break
        text = masked
    return text


def _redact_once(text: str) -> str:
    for whole in (_SPACED_PASSWORD, _WORD_USER_INFO):
        text = whole.sub(lambda m: m["scheme"] + HIDDEN + "@", text)
    text = _USER_INFO.sub(_mask_user_info, text)
    return _QUERY.sub(lambda m: _hidden(m[0]), _URI.sub(_redact_uri, text))


def _mask_user_info(m: re.Match) -> str:
    """A `_USER_INFO` match masked: all of it, unless a space shows the `@` to be a later word's (`_AUTHORITY`)."""
    info = m[0][len(m["scheme"]):-1]
    whole = m["scheme"] + HIDDEN + "@"
    if not any(ch.isspace() for ch in info):
        return whole
    parts = info.split()
    if not parts:  # (`http:// @x`: nothing before the `@` but spaces)
        return whole
    head, *words = parts
    if "@" not in head:
        address = _address(head)
        # `name:` then three words or more before the `@` is an address and a sentence, not `user: pass word@`
        plain = _AUTHORITY.fullmatch(address.removesuffix(":") if len(words) > 2 else address)
        later = [*words[:-1], _MAILTO.sub("", words[-1])] if words else []  # (`http://wiki @team`: none)
        return m[0] if plain and not any(map(_holds_colon, later)) else whole
    user, host = head.rsplit("@", 1)
    address = _AUTHORITY.fullmatch(_address(host))
    if "@" in user or not (address and address["port"]):
        return whole
    return m["scheme"] + HIDDEN + m[0][len(m["scheme"]) + len(user):]


def _address(word: str) -> str:
    """`word` without what closes a sentence after an address: `'mlflow:5000',` -> `mlflow:5000`; a trailing `:` after
    a port (`mlflow:5000:`) too, but not after a name alone (`alice:`, user info whose password follows a space)."""
    word = word.rstrip(_CLOSING)
    bare = word.removesuffix(":")
    address = _AUTHORITY.fullmatch(bare) if bare != word else None
    return bare if address and address["port"] else word


def _holds_colon(word: str) -> bool:
    """Whether a later word reads as `user:password`: a `:` but a sentence's one at its end (`Error:`); `:` alone too."""
    word = word.rstrip(_CLOSING)
    return word == ":" or ":" in word.removesuffix(":")


def _redact_uri(m: re.Match) -> str:
    """A URI with everything from `://` to the last `@` in it masked, then its query string or fragment. A password
    may hold `/`, `?` or `#` unescaped (`http://alice:pa/ss@host`), so where user info ends cannot be told from where
    the authority would end; an `@` later in the path or query hides the host too: masking more is the safe side."""
    rest = m["rest"]
    if "@" in rest:
        rest = HIDDEN + rest[rest.rindex("@"):]
    cut = min((rest.index(mark) for mark in "?#" if mark in rest), default=None)
    return m["scheme"] + (rest if cut is None else rest[:cut] + _hidden(rest[cut:]))


def _hidden(tail: str) -> str:
    """A query string or fragment (`?...`, `#...`) masked; the sentence's punctuation after it kept."""
    kept = tail[1:].rstrip(").,;:]")
    return tail[0] + HIDDEN + tail[1 + len(kept):]


def printable(text: str) -> str:
    """`text` safe to print on a terminal or a log line: the secrets of any URI in it masked (`redact`), and every
    character that is not printable (newlines, tabs, ESC and the other C0/C1 controls, bidi overrides) written as
    its Python escape (`\\n`, `\\x1b`, `\\u202e`), so a name read from a store (an MLflow experiment, a file name, a
    queue) can neither break the one line an error is nor drive the terminal. Printable text, accents and CJK
    included, is kept as it is."""
    text = redact(text)
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)


def environment_error(exc: BaseException) -> str | None:
    """One line for a disk-full or permission error found on `exc` or anything that caused it, else None."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in ENVIRONMENT_ERRNOS:
            return f"{os.strerror(seen.errno)}: {seen.filename or seen}; free space or fix permissions, then rerun"
        if isinstance(seen, OSError) and (wrong := wrong_kind_of_path(seen)):
            return wrong
        # only errors of I/O carry the OS's words; an SQL error that merely quotes them is not one
        if isinstance(seen, OSError) or type(seen).__name__ in IO_ERROR_TYPES or _polars_os_error(seen):
            text = str(seen)
            for phrase in ENVIRONMENT_PHRASES:
                if phrase in text:
                    return f"{phrase}: {text.splitlines()[0][:300]}; free space or fix permissions, then rerun"
        seen = seen.__cause__ or seen.__context__
    return None


def _polars_os_error(exc: BaseException) -> bool:
    """Whether `exc` is Polars' wrapping of an OS error (its text quotes the OS's `(os error N)`), not a computation's."""
    return type(exc).__module__.startswith("polars") and _POLARS_OS_ERROR.search(str(exc)) is not None


WRONG_KIND_ERRNOS = {errno.ENOTDIR, errno.EEXIST, errno.EISDIR}


def wrong_kind_of_path(exc: OSError) -> str | None:
    """One line for an OS error that a file where a folder is needed caused (a data directory, `inbox`, `staging` or
    `lake` that is a file: mkdir's EEXIST, or ENOTDIR below it), or a folder where a file is (a lock file such as
    `writer.lock` that is a folder: EISDIR); it names the path that is in the way, found on the disk. None for
    any other error, or when the disk does not show such a path (an EEXIST of a folder that exists)."""
    if exc.errno not in WRONG_KIND_ERRNOS or not exc.filename:
        return None
    path = Path(os.fsdecode(exc.filename)).absolute()
    if exc.errno == errno.EISDIR:
        return (f"{path} is a folder where gpucast needs a file; move the folder away (gpucast makes the file), "
                "then rerun") if path.is_dir() else None
    for part in reversed((path, *path.parents)):  # from the root down: the first that is there but not a folder
        if part.exists() and not part.is_dir():
            return f"{part} is a file where gpucast needs a folder; move the file away (gpucast makes the folder), then rerun"
    return None


def check_kind(*paths: Path, folder: bool) -> None:
    """Raise the OS's error for the first of `paths` that is of the wrong kind: not a folder where gpucast needs one
    (`NotADirectoryError`), or a folder where it needs a file (`IsADirectoryError`); a path that is not there is
    fine (gpucast makes it). Checked before anything is written, so the command ends with `wrong_kind_of_path`'s one
    line naming the path (exit code 5) and leaves nothing half done."""
    for path in paths:
        if folder and path.exists() and not path.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path))
        if not folder and path.is_dir():
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))


class StorageError(RuntimeError):
    """A warehouse operation failed; the message is DuckDB's (or the file system's), with its type."""


class QueryError(StorageError):
    """A planner's SQL failed: a syntax error, an unknown table, a statement the sandbox refuses."""


class LakeRefreshFailed(StorageError):
    """Rewriting the Parquet lake failed; the warehouse holds every row and the next ingest retries."""


def storage_error(exc: BaseException) -> str | None:
    """One line for a StorageError or a DuckDB error (the warehouse's, unwrapped), else None."""
    import duckdb

    if isinstance(exc, StorageError):
        return str(exc)
    if isinstance(exc, duckdb.Error):
        return duckdb_message(exc)
    return None


# DuckDB's words for a block that fails its checksum, or a header it cannot read
DAMAGED_DATABASE = ("Corrupt database file", "does not match stored checksum", "it is not a valid DuckDB database file")


def damaged_database(exc: BaseException) -> str | None:
    """One line for a DuckDB file whose blocks fail their checksums, found on `exc` or what caused it, else None: met
    by any step, it is the publish's exit 6 with the way back (review 85 S2-4: met by the score step it was exit 2,
    "bad input", with DuckDB's line alone)."""
    import duckdb

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, duckdb.Error) and any(words in str(seen) for words in DAMAGED_DATABASE):
            return (f"a DuckDB file is damaged ({duckdb_message(seen)}): the warehouse (warehouse.duckdb) is restored "
                    "from a backup or rebuilt from the Parquet lake, the planners' copy by `gpucast restore` "
                    "(docs/operations.md, on-call runbook step 7)")
        seen = seen.__cause__ or seen.__context__
    return None


def duckdb_message(exc: BaseException) -> str:
    """A DuckDB error in one line: its kind, then DuckDB's own lines (the error, its candidates, the query's line)
    joined by "; ", without the blank ones and the carets under the query's line (which point nowhere once the lines
    are one). The one-line rule (`printable`) wrote each newline as `\\n` (a planner's `gpucast sql` error,
    newcomer 22's S3)."""
    return f"{type(exc).__name__}: " + "; ".join(line.strip() for line in str(exc).splitlines() if line.strip(" ^"))
