"""SSE ids ``<epoch>:<runId>:<seq>`` and store URLs: what parses, and what each refusal says."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agui_pipes._foundation.limits import MAX_EVENT_ID_LENGTH, MAX_SEQ
from agui_pipes.store import (
    BadEventId,
    EventId,
    MemoryEventLog,
    RedisEventLog,
    Retention,
    SQLiteEventLog,
    StoreError,
    format_event_id,
    open_store,
    parse_event_id,
)


def test_an_id_round_trips() -> None:
    text = format_event_id("a1b2c3d4e5f6", "run-1", 42, "mkz3v0q1a")
    assert text == "a1b2c3d4e5f6.mkz3v0q1a:run-1:42"
    assert parse_event_id(text) == EventId("a1b2c3d4e5f6", "run-1", 42, "mkz3v0q1a")
    assert str(parse_event_id(text)) == text
    # the older form, without a generation, still parses (and no run matches it)
    assert parse_event_id("a1b2c3d4e5f6:run-1:42") == EventId("a1b2c3d4e5f6", "run-1", 42)


_TOKEN = st.text(st.characters(blacklist_characters=":.\n\r\0"), min_size=1, max_size=20)


@given(
    _TOKEN,
    st.text(st.characters(blacklist_characters="\n\r\0"), min_size=1, max_size=40),
    st.integers(min_value=0, max_value=MAX_SEQ),
    _TOKEN | st.just(""),
)
def test_any_run_id_round_trips_even_with_colons(
    epoch: str, run_id: str, seq: int, generation: str
) -> None:
    parsed = parse_event_id(format_event_id(epoch, run_id, seq, generation))
    assert parsed == EventId(epoch, run_id, seq, generation)


@given(st.text(max_size=MAX_EVENT_ID_LENGTH + 8) | st.binary().map(lambda b: b.decode("latin-1")))
def test_any_text_parses_or_is_a_bad_event_id(text: str) -> None:
    """Whatever a client sends: an id within the bounds, or BadEventId (400) — nothing else."""
    try:
        parsed = parse_event_id(text)
    except BadEventId as exc:
        refused: BadEventId | None = exc
    else:
        refused = None
    if refused is not None:
        assert refused.http_status == 400
        assert len(str(refused)) < 400  # the message never grows with what was sent
        return
    assert 0 <= parsed.seq <= MAX_SEQ
    assert parsed.epoch and parsed.run_id and ":" not in parsed.epoch
    assert str(parsed) == text


@given(st.from_regex(r"[0-9a-f]{12}\.[0-9a-z]{10}:[^\n\r\x00]{1,40}:[0-9]{1,40}", fullmatch=True))
def test_any_seq_is_a_number_within_the_bounds_or_a_bad_event_id(text: str) -> None:
    digits = text.rpartition(":")[2]
    seq = int(digits)
    if seq > MAX_SEQ or len(digits) > 19:
        with pytest.raises(BadEventId, match="out of range"):
            parse_event_id(text)
    else:
        assert parse_event_id(text).seq == seq


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "unparsable event id ''"),
        ("42", "unparsable event id '42'"),
        ("epoch:42", "unparsable event id"),
        (":run:1", "unparsable event id"),
        (".gen:run:1", "unparsable event id"),
        ("epoch.:run:1", "unparsable event id"),
        ("e::1", "unparsable event id"),
        ("e:run:", "its last part '' is not a sequence number"),
        ("e:run:-1", "its last part '-1' is not a sequence number"),
        ("e:run:+1", "is not a sequence number"),
        ("e:run: 1", "is not a sequence number"),
        ("e:run:1.5", "is not a sequence number"),
        ("e:run:٣", "is not a sequence number"),  # a digit, but not ASCII
        ("e.g:run:9223372036854775808", "out of range"),  # 2**63
        ("e.g:run:" + "9" * 30, "out of range"),
        ("e.g:run:" + "0" * 30 + "1", "out of range"),  # 31 digits, even if small
        ("e:" + "r" * 2000 + ":1", "too long"),
    ],
)
def test_unparsable_ids_say_what_is_expected(text: str, says: str) -> None:
    with pytest.raises(BadEventId, match=says) as caught:
        parse_event_id(text)
    assert "out of range" in says or "'<epoch>.<generation>:<runId>:<seq>'" in str(caught.value)
    assert len(str(caught.value)) < 400
    assert caught.value.http_status == 400
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, StoreError)


def test_the_largest_seq_parses() -> None:
    assert parse_event_id(f"e.g:run:{MAX_SEQ}").seq == 2**63 - 1


def test_a_run_id_an_sse_line_cannot_carry() -> None:
    with pytest.raises(ValueError, match="line break or NUL"):
        format_event_id("e", "run\nid: forged", 1)


# -- open_store ------------------------------------------------------------------------


def test_urls_pick_the_backend(tmp_path: object) -> None:
    assert isinstance(open_store("memory:"), MemoryEventLog)
    sqlite = open_store("sqlite:///runs.db?poll=0.5&max_age=60")
    assert isinstance(sqlite, SQLiteEventLog)
    assert (sqlite.path, sqlite.poll_interval, sqlite.retention.max_age) == ("runs.db", 0.5, 60)
    absolute = open_store("sqlite:////var/lib/agui/runs.db")
    assert isinstance(absolute, SQLiteEventLog) and absolute.path == "/var/lib/agui/runs.db"
    redis = open_store(
        "redis://:secret@cache:6380/2?prefix=app:&block=1&max_runs=9&socket_timeout=3"
    )
    assert isinstance(redis, RedisEventLog)
    assert (redis.prefix, redis.block, redis.retention.max_runs) == ("app:", 1.0, 9)
    # socket_timeout is the store's own option now (its reader's timeout is derived from
    # it); redis-py's other options pass through in the URL.
    assert (redis.url, redis.socket_timeout) == ("redis://:secret@cache:6380/2", 3.0)
    assert "secret" not in repr(redis)
    assert isinstance(open_store("rediss://cache/0"), RedisEventLog)


def test_url_options_override_the_retention_argument() -> None:
    store = open_store(
        "memory:?max_runs_per_thread=5&retention_interval=0",
        retention=Retention(max_age=10, max_runs_per_thread=1),
    )
    assert store.retention == Retention(max_age=10, max_runs_per_thread=5, interval=0)


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("mysql://db/runs", "unknown store URL scheme"),
        ("runs.db", "unknown store URL scheme"),
        ("", "unknown store URL scheme"),
        ("sqlite://runs.db", "three slashes"),
        ("sqlite:runs.db", "three slashes"),
        ("sqlite:///", "names no database file"),
        ("sqlite:///runs.db?pool=3", "unknown option.*pool"),
        ("sqlite:///runs.db?poll=fast", "poll='fast' is not a number"),
        ("sqlite:///runs.db?poll=0", "must be positive"),
        ("memory:?max_runs=-1", "must be positive"),
        ("memory:?max_runs=1.5", "max_runs='1.5' is not an integer"),
        ("memory:somewhere", "takes no path"),
        ("memory:?prefix=x", "takes no path and no options"),
        ("redis://", "names no Redis server"),
        ("redis://host/0?block=no", "block='no' is not a number"),
    ],
)
def test_bad_urls_say_what_is_accepted(url: str, says: str) -> None:
    with pytest.raises(ValueError, match=says) as caught:
        open_store(url)
    message = str(caught.value)
    assert repr(url) in message or url == ""
    if "positive" not in says:
        assert "sqlite:///runs.db" in message  # an example of a good one


def test_a_url_must_be_a_string() -> None:
    with pytest.raises(TypeError, match="needs a URL string, got PosixPath"):
        open_store(__import__("pathlib").Path("runs.db"))  # type: ignore[arg-type]


def test_retention_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="max_age must be positive"):
        Retention(max_age=0)
    with pytest.raises(ValueError, match="interval must be >= 0"):
        Retention(interval=-1)
