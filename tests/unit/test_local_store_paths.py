"""The directory store checks keys on their text (no path resolution per call) and lists only
the folder a prefix names."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest

from cdif_harvester.adapters.local import DirectoryObjectStore
from cdif_harvester.errors import StorageError


def test_puts_and_gets_resolve_no_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = DirectoryObjectStore(tmp_path)  # (the root is resolved once, here)

    def refuse(self: Path, strict: bool = False) -> Path:
        raise AssertionError(f"resolved {self}")

    monkeypatch.setattr(Path, "resolve", refuse)
    store.put("records/s/a.jsonld", b"{}")
    assert store.get("records/s/a.jsonld") == b"{}"
    assert store.exists("records/s/a.jsonld")


@pytest.mark.parametrize(
    "key", ["", "a/../../x", "./a", "a/./b", "/abs", "a/b\0c", "records/..", ".."]
)
def test_keys_that_could_leave_the_root_are_refused(tmp_path: Path, key: str) -> None:
    store = DirectoryObjectStore(tmp_path / "store")
    with pytest.raises(StorageError):
        store.put(key, b"x")
    assert not (tmp_path / "x").exists()


def test_a_listing_walks_only_the_prefixs_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = DirectoryObjectStore(tmp_path)
    store.put("records/s/a.jsonld", b"{}")
    store.put("runs/r1/x.json", b"{}")
    store.put("runs/r1/sub/y.json", b"{}")
    store.put("runs/r10/z.json", b"{}")
    walked: list[Path] = []
    rglob = Path.rglob

    def noting(self: Path, pattern: str) -> object:
        walked.append(self)
        return rglob(self, pattern)

    monkeypatch.setattr(Path, "rglob", noting)
    assert list(store.list("runs/r1/")) == ["runs/r1/sub/y.json", "runs/r1/x.json"]
    assert list(store.list("runs/r1")) == [
        "runs/r1/sub/y.json",
        "runs/r1/x.json",
        "runs/r10/z.json",
    ]
    assert list(store.list("nothing/here/")) == []
    assert walked == [tmp_path.resolve() / "runs" / "r1", tmp_path.resolve() / "runs"]


def test_a_write_makes_its_folder_only_when_it_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = DirectoryObjectStore(tmp_path)
    made: list[Path] = []
    mkdir = Path.mkdir
    depth = [0]

    def noting(self: Path, *args: object, **kwargs: object) -> None:
        if not depth[0]:  # (not the calls it makes for the parents)
            made.append(self)
        depth[0] += 1
        try:
            mkdir(self, *args, **kwargs)  # type: ignore[arg-type]
        finally:
            depth[0] -= 1

    monkeypatch.setattr(Path, "mkdir", noting)
    store.put("records/s/a.jsonld", b"1")
    store.put("records/s/b.jsonld", b"2")  # (into a folder that is there: nothing to make)
    assert made == [tmp_path.resolve() / "records" / "s"]
    shutil.rmtree(tmp_path / "records")  # (removed between two writes: made again)
    store.put("records/s/a.jsonld", b"3")
    assert store.get("records/s/a.jsonld") == b"3"
    assert len(made) == 2
    # written as tempfile.mkstemp made them: the owner's alone, no temporary file left
    assert stat.S_IMODE((tmp_path / "records/s/a.jsonld").stat().st_mode) == 0o600
    assert sorted(p.name for p in (tmp_path / "records/s").iterdir()) == ["a.jsonld"]
