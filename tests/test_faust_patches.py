"""The drain-loop patch (streams/faust_patches.py) and its guard."""

from __future__ import annotations

import faust
import pytest
from faust.transport.consumer import Consumer

from streams import faust_patches


def test_faust_is_the_version_the_patch_was_written_for():
    """Fails when faust changes: read its new _drain_messages, re-check that the patch
    still does what it says, and pin the new hash."""
    assert faust.__version__ == "0.15.3"
    assert faust_patches.is_pinned_source(faust_patches.original_source())


def test_install_replaces_the_per_message_wait_first():
    assert faust_patches.install()
    assert faust_patches.install()  # twice is once
    patched = faust_patches.patched_source(faust_patches.original_source())
    assert "await callback(message)" in patched
    assert patched.count("wait_first") == 1  # kept for a suspended flow only
    method = Consumer._drain_messages
    assert method.__eventq_original__ is not None
    assert method.__code__.co_filename.endswith("faust/transport/consumer.py")
    assert "callback" in method.__code__.co_varnames


def test_a_changed_source_is_refused():
    source = faust_patches.original_source()
    assert not faust_patches.is_pinned_source(source + "\n")
    with pytest.raises(ValueError):
        faust_patches.patched_source(source.replace("wait_first", "wait_all"))
