"""``eventq replay --from-commands`` compares the workflows' inputs too
(eventq/run/replay.py ``compare_inputs``): each difference named, one line each."""

from __future__ import annotations

import uuid

from eventq.core import Input
from eventq.run.replay import compare_inputs

DEP, UP, OTHER = uuid.UUID(int=1), uuid.UUID(int=2), uuid.UUID(int=3)
DONE = Input(True, b"done")


def test_equal_inputs_differ_in_nothing():
    assert compare_inputs({(DEP, UP): DONE}, {(DEP, UP): DONE}) == []
    assert compare_inputs({}, {}) == []


def test_each_kind_of_difference_is_named():
    lines = compare_inputs(
        {(DEP, UP): DONE, (DEP, OTHER): DONE},
        {(DEP, UP): Input(False, b"done"), (OTHER, UP): DONE},
    )
    assert lines == [
        f"{DEP}: the input from {UP}: commands say {DONE!r}, state log says "
        f"{Input(False, b'done')!r}",
        f"{DEP}: the input from {OTHER} is missing from the state log (commands say {DONE!r})",
        f"{OTHER}: the input from {UP} is in the state log only ({DONE!r})",
    ]


def test_a_jobs_tags_differing_are_named():
    """``eventq replay --from-commands`` compares every field of a job, its tags too
    (docs/workflows.md, "Determinism")."""
    import dataclasses

    from eventq.core import Add, apply
    from eventq.run.replay import compare

    _, folded = apply(None, Add(DEP, "q", 1, 60_000, b"", tags=("nightly", "etl")), 1, 1)
    assert compare({DEP: folded}, {DEP: folded}) == []
    logged = dataclasses.replace(folded, tags=("nightly",))
    [difference] = compare({DEP: folded}, {DEP: logged})
    assert difference.describe() == (
        f"{DEP}: tags: commands say ('nightly', 'etl'), state log says ('nightly',)")
