"""Property tests: whatever the bytes, loading either gives a Session or one ArchiveError."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.test_archive import small_session
from tokenreel.session import archive
from tokenreel.session.model import ArchiveError, Session

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


def _paths(value, prefix=()):
    """Every (container, key) location inside a JSON value."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield prefix + (key,)
            yield from _paths(item, prefix + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield prefix + (i,)
            yield from _paths(item, prefix + (i,))


BASE = orjson.loads(archive.dumps(small_session()))
LOCATIONS = list(_paths(BASE))


def _load_or_error(payload: bytes) -> None:
    try:
        assert isinstance(archive.loads(payload, "fuzz.json"), Session)
    except ArchiveError as exc:
        assert str(exc).startswith("fuzz.json") and "\n" not in str(exc)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(LOCATIONS), json_values, st.booleans())
def test_any_field_replaced_or_removed(location, value, remove) -> None:
    data = orjson.loads(orjson.dumps(BASE))
    holder = data
    for key in location[:-1]:
        holder = holder[key]
    if remove and isinstance(holder, dict):
        del holder[location[-1]]
    else:
        holder[location[-1]] = value
    try:
        payload = orjson.dumps(data)
    except orjson.JSONEncodeError:
        return  # integers beyond 64 bits cannot be written as JSON by orjson
    _load_or_error(payload)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, len(archive.dumps(small_session()))))
def test_truncated_anywhere(cut) -> None:
    _load_or_error(archive.dumps(small_session())[:cut])


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes(payload) -> None:
    _load_or_error(payload)
